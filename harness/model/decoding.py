"""Greedy decoding with the KV cache.

Rows of a batch must have the same length (the harness never pads: padding changes numerics and
would itself be a source of drift). Each row stops at its own EOS (any of the model's stop ids);
the EOS token is not part of the continuation.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from harness.model.kv_buffers import buffered_cache


@dataclass(frozen=True)
class Continuation:
    ids: tuple[int, ...]
    stopped_on_eos: bool
    # The smallest top-1 minus top-2 logit margin over the greedy steps: how close the path came to
    # a tie (a near-tie can flip under numerical noise alone). Not part of equality.
    min_margin: float | None = field(default=None, compare=False)
    # The log-probability of each token of ``ids``, where the engine gives it (the vLLM backend);
    # None where it does not. Not part of equality.
    token_logprobs: tuple[float, ...] | None = field(default=None, compare=False)


def stop_set(eos_id: int | Collection[int] | None) -> frozenset[int]:
    """The token ids that end a continuation (an int, several, or none)."""
    if eos_id is None:
        return frozenset()
    return frozenset([eos_id]) if isinstance(eos_id, int) else frozenset(int(i) for i in eos_id)


def stop_ids(model: torch.nn.Module, tokenizer) -> frozenset[int]:
    """Where a continuation ends: the tokenizer's EOS and every EOS the model's generation config
    names (chat models end a turn with their own token, e.g. Gemma's ``<end_of_turn>``)."""
    ids = stop_set(tokenizer.eos_token_id)
    generation = getattr(model, "generation_config", None)
    return ids | stop_set(getattr(generation, "eos_token_id", None))


@lru_cache(maxsize=None)
def _cache_keyword(model_class: type) -> str:
    # transformers 5.2x renamed `past_key_values` to `cache`; accept either.
    params = inspect.signature(model_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@lru_cache(maxsize=None)
def _keeps_last_logits(model_class: type) -> bool:
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters


def forward(model: torch.nn.Module, input_ids: torch.Tensor, cache=None, last_only: bool = False, **kwargs):
    """One causal-LM forward pass that returns ``(logits, cache)``, whatever the transformers version.

    ``last_only`` computes logits for the last position only (a prefill needs no more): at long
    inputs the full ``[T, vocab]`` logits would dominate memory.
    """
    kw = {_cache_keyword(type(model)): cache} if cache is not None else {}
    if last_only and _keeps_last_logits(type(model)):
        kw["logits_to_keep"] = 1
    out = model(input_ids=input_ids, use_cache=True, **kw, **kwargs)
    new_cache = getattr(out, "cache", None)
    if new_cache is None:
        new_cache = out.past_key_values
    return out.logits, new_cache


@torch.no_grad()
def greedy_from(
    model: torch.nn.Module,
    logits: torch.Tensor,  # [batch, vocab], the prefill's last-position logits
    cache,
    max_new_tokens: int,
    eos_id: int | Collection[int] | None,
    start_index: int | None = None,
    position_shift: int = 0,
    step_logp: list[torch.Tensor] | None = None,
    forced: list[list[int]] | None = None,
) -> list[Continuation]:
    """Greedy continuations from a prefilled ``cache`` (which this extends in place).

    With ``position_shift``, the token at sequence index ``i`` gets position id ``i - shift``
    (``start_index`` is the index of the first new token). ``step_logp``, when given, receives each
    step's float32 log-probabilities ``[batch, vocab]`` (the noise floor compares them).
    ``forced[row]``, when given, are the row's tokens at its first steps, chosen already (no stop
    among them): they are fed instead of the argmax, and their margins are the caller's."""
    stop = stop_set(eos_id)
    batch = logits.shape[0]
    tokens: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    stopped = [False] * batch
    margins = [float("inf")] * batch
    forced = forced or [[] for _ in range(batch)]
    for step in range(max_new_tokens):
        next_ids = logits.argmax(dim=-1)  # [batch]
        top2 = logits.float().topk(2, dim=-1).values
        if step_logp is not None:
            step_logp.append(torch.log_softmax(logits.float(), dim=-1))
        chosen = [row for row in range(batch) if step < len(forced[row])]
        if chosen:
            next_ids = next_ids.clone()
            next_ids[chosen] = torch.tensor([forced[row][step] for row in chosen], device=next_ids.device)
        for row, (tok, margin) in enumerate(zip(next_ids.tolist(), (top2[:, 0] - top2[:, 1]).tolist())):
            if done[row]:
                continue
            if step < len(forced[row]):
                tokens[row].append(tok)
                continue
            margins[row] = min(margins[row], margin)
            if tok in stop:
                done[row] = stopped[row] = True
            else:
                tokens[row].append(tok)
        if all(done) or step == max_new_tokens - 1:
            break
        extra = {}
        if position_shift:
            pos = start_index + step - position_shift
            extra["position_ids"] = torch.full((batch, 1), pos, dtype=torch.long, device=next_ids.device)
        logits, cache = forward(model, next_ids[:, None], cache, **extra)
        logits = logits[:, -1]
    return [Continuation(tuple(t), s, m) for t, s, m in zip(tokens, stopped, margins)]


@torch.no_grad()
def greedy_decode(
    model: torch.nn.Module,
    input_ids: torch.Tensor,  # [batch, seq], one row per condition, no padding
    max_new_tokens: int,
    eos_id: int | Collection[int] | None,
) -> list[Continuation]:
    """Greedy continuations of each row, at most ``max_new_tokens`` tokens, stopping at EOS."""
    cache = buffered_cache(model, input_ids.shape[1] + max_new_tokens)
    logits, cache = forward(model, input_ids, cache, last_only=True)
    return greedy_from(model, logits[:, -1], cache, max_new_tokens, eos_id)
