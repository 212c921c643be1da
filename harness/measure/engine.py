"""Running conditions through the model: decoding, teacher forcing and attention capture.

Per prompt, group A runs first and becomes the reference: its greedy continuation Y_A, its
next-token distributions along Y_A, and (with attention analysis on) its attention rows at the
task tokens and at Y_A's tokens, kept per layer. Every B/C condition of that prompt then runs as

    everything before the task   -> from the prefix cache (BOS, template scaffolding and the
                                    inserted block: computed once per sweep, shared by prompts)
    prefill the rest of the input -> task rows, compared with A's layer by layer
    fork the KV cache (rewind it after the first branch: harness.model.kv_buffers)
      branch 1: feed Y_A          -> continuation rows (same tokens as A's), output KL per step
      branch 2: decode greedily   -> Y_X, and how close each step came to a tie

Conditions with the same input length and spans (every B and C prefix at one L) can run as one
batch (:func:`harness.inputs.conditions.batchable`): no padding is ever needed.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from harness.inputs.conditions import Condition, batchable
from harness.model.masks import KeyBias
from harness.measure.attention_metrics import row_metrics, token_kl
from harness.measure.metrics import ROW_METRICS, check_row_metrics
from harness.model.decoding import Continuation, forward, greedy_from
from harness.model.kv_buffers import buffered_cache, rewound
from harness.model.prefix_cache import PrefixCache
from harness.model.probe import capture_rows, key_bias

SEGMENTS = ("task", "continuation")


@dataclass
class Reference:
    """Group A's results for one prompt, reused by every B/C condition of that prompt."""

    condition: Condition
    continuation: Continuation
    step_logp: torch.Tensor  # [steps, vocab] float32: next-token log-probs along Y_A
    # rows[segment][layer] = (log_probs, scores, sink): [heads, rows, keys] float32, and for learned
    # sinks their (log_prob, score) [heads, rows] (else None)
    rows: dict[str, dict[int, tuple]] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Result:
    """One condition's measurements."""

    condition: Condition
    continuation: Continuation
    output_kl: float | None
    # attention[segment][metric] = array [layers, heads], averaged over the segment's query rows
    attention: dict[str, dict[str, np.ndarray]]
    n_queries: dict[str, int]
    seconds: float
    output_kl_steps: list[float] | None = None  # KL at each step of A's continuation (its mean is output_kl)
    step_logp: torch.Tensor | None = None  # [steps, vocab] X's log-probs along Y_A (kept in memory only)


def _n_steps(y: Continuation) -> int:
    """Continuation steps compared by output_kl: each token of Y_A, and the EOS if A stopped on it."""
    return len(y.ids) + int(y.stopped_on_eos)


def _step_logp(last_logits: torch.Tensor, tf_logits: torch.Tensor | None, steps: int) -> torch.Tensor:
    """Log-probs ``[batch, steps, vocab]`` predicting Y_A[0], Y_A[1], ... (and EOS)."""
    parts = [last_logits[:, None]] + ([tf_logits] if tf_logits is not None else [])
    return torch.log_softmax(torch.cat(parts, dim=1)[:, :steps].float(), dim=-1)


def _metrics_to_numpy(per_layer: dict[int, dict[str, torch.Tensor]], batch: int) -> list[dict[str, np.ndarray]]:
    """{layer: {metric: [B, H]}} -> per batch row {metric: [layers, heads]}."""
    layers = sorted(per_layer)
    if layers:
        check_row_metrics(per_layer[layers[0]])
    out = []
    for b in range(batch):
        out.append({m: torch.stack([per_layer[l][m][b] for l in layers]).cpu().numpy() for m in ROW_METRICS})
    return out


def _comparer(ref: Reference, block: tuple[int, int], out: dict[str, dict[int, dict[str, torch.Tensor]]]):
    """``compare(segment)`` gives the probe callback that compares a layer's rows with A's rows of
    that layer and stores the row-averaged metrics, ``[batch, heads]``, in ``out[segment][layer]``.
    ``block`` is X's inserted key span (empty when X is A itself)."""
    a_input_len = len(ref.condition.assembled.input_ids)

    def compare(segment: str):
        def on_layer(layer, logp, scores, sink):
            lp_a, sc_a, sink_a = ref.rows[segment][layer]
            lp_a, sc_a = lp_a.to(logp.device)[None], sc_a.to(logp.device)[None]
            # X's keys are A's plus the block; any beyond (a pass without the cache fork) are causal padding
            k = lp_a.shape[-1] + block[1] - block[0]
            sinks = {}
            if sink is not None:
                sinks = {"sink_a": tuple(t.to(logp.device)[None] for t in sink_a), "sink_x": sink}
            rm = row_metrics(lp_a, sc_a, logp[..., :k], scores[..., :k], block, a_input_len, **sinks)
            out[segment][layer] = {m: v.mean(-1) for m, v in rm.items()}
        return on_layer

    return compare


class Engine:
    """Runs conditions on one loaded model. ``attention=False`` skips the probe (behaviour only);
    up to ``prefix_cache_bytes`` of prefix KV is kept for reuse across prompts (speed only)."""

    def __init__(self, model: torch.nn.Module, eos_id, max_new_tokens: int, attention: bool,
                 prefix_cache_bytes: int = 0):
        self.model = model
        self.eos_id = eos_id
        self.max_new_tokens = max_new_tokens
        self.attention = attention
        self.device = next(model.parameters()).device
        self.prefix_cache = PrefixCache(model, prefix_cache_bytes)

    def _capture(self, rows: slice, on_layer):
        return capture_rows(rows, on_layer) if self.attention else contextlib.nullcontext()

    @torch.no_grad()
    def reference(self, cond: Condition) -> tuple[Reference, Result]:
        """Run group A for one prompt; returns the reference and A's own result row."""
        t0 = time.perf_counter()
        a = cond.assembled
        rows: dict[str, dict[int, tuple]] = {s: {} for s in SEGMENTS}

        def keep(segment):
            def on_layer(layer, logp, scores, sink):
                rows[segment][layer] = (logp[0], scores[0], None if sink is None else (sink[0][0], sink[1][0]))
            return on_layer

        ids = torch.tensor([a.input_ids], device=self.device)
        cache = buffered_cache(self.model, len(a.input_ids) + self.max_new_tokens)
        with self._capture(slice(a.task_start, a.task_end), keep("task")):
            logits, cache = forward(self.model, ids, cache, last_only=True)
        last = logits[:, -1]
        with rewound(cache):  # decoding Y_A first: the teacher-forced pass below needs it
            (y_a,) = greedy_from(self.model, last, cache, self.max_new_tokens, self.eos_id)
        tf_logits = None
        if y_a.ids:
            y = torch.tensor([y_a.ids], device=self.device)
            with self._capture(slice(0, len(y_a.ids)), keep("continuation")):
                tf_logits, _ = forward(self.model, y, cache)
        step_logp = _step_logp(last, tf_logits, _n_steps(y_a))[0]
        ref = Reference(cond, y_a, step_logp, rows, time.perf_counter() - t0)

        attention, n_queries = {}, {}
        for segment, by_layer in rows.items():
            if not by_layer:
                continue
            per_layer = {}
            for layer, (lp, sc, sink) in by_layer.items():
                sinks = {} if sink is None else {"sink_a": sink, "sink_x": sink}
                rm = row_metrics(lp, sc, lp, sc, (a.prefix_start, a.prefix_end), len(a.input_ids), **sinks)
                per_layer[layer] = {m: v[None].mean(-1) for m, v in rm.items()}
            attention[segment] = _metrics_to_numpy(per_layer, 1)[0]
            n_queries[segment] = next(iter(by_layer.values()))[0].shape[1]
        own = token_kl(step_logp, step_logp)
        own_kl = float(own.mean()) if len(step_logp) else None
        return ref, Result(cond, y_a, own_kl, attention, n_queries, ref.seconds, own.tolist(), step_logp)

    @torch.no_grad()
    def conditions(self, ref: Reference, batch: list[Condition]) -> list[Result]:
        """Run B/C conditions of ``ref``'s prompt that share one input length, as one batch."""
        t0 = time.perf_counter()
        first = batch[0].assembled
        iso = batch[0].isolation
        assert all(batchable(batch[0], c) and c.prompt_id == ref.condition.prompt_id for c in batch), \
            "a batch needs one prompt and conditions that batchable() allows together"
        bias = KeyBias.of(iso, first.block_start, first.block_end)
        with key_bias(bias):
            return self._conditions(ref, batch, t0)

    def _conditions(self, ref: Reference, batch: list[Condition], t0: float) -> list[Result]:
        first = batch[0].assembled
        shift = first.block_len if batch[0].isolation.resets_positions else 0
        n_in, B = len(first.input_ids), len(batch)

        def positions(start: int, length: int) -> dict:
            """Position ids for sequence indices [start, start + length), restarting after the block
            as if it were absent."""
            if not shift:
                return {}
            idx = torch.arange(start, start + length, device=self.device)
            pos = torch.where(idx >= first.block_end, idx - shift, idx)
            return {"position_ids": pos[None].expand(B, -1)}

        metrics: dict[str, dict[int, dict[str, torch.Tensor]]] = {s: {} for s in SEGMENTS}
        compare = _comparer(ref, first.block, metrics)

        # Everything before the task (BOS, template scaffolding, the block) does not depend on the
        # prompt: it comes from the prefix cache. The rest (task, and a chat template's generation
        # prompt after it) runs here; its first task_len rows are the task rows.
        head, capacity = first.task_start, n_in + self.max_new_tokens
        cache = (self.prefix_cache.batch([c.assembled.input_ids[:head] for c in batch], capacity) if head
                 else buffered_cache(self.model, capacity))
        rest = torch.tensor([c.assembled.input_ids[head:] for c in batch], device=self.device)
        with self._capture(slice(0, first.task_len), compare("task")):
            logits, cache = forward(self.model, rest, cache, last_only=True, **positions(head, n_in - head))
        last = logits[:, -1]
        y_a = ref.continuation
        tf_logits = None
        if y_a.ids:
            y = torch.tensor([y_a.ids] * len(batch), device=self.device)
            with rewound(cache), self._capture(slice(0, len(y_a.ids)), compare("continuation")):
                tf_logits, _ = forward(self.model, y, cache, **positions(n_in, len(y_a.ids)))
        steps = _n_steps(y_a)
        step_logp = _step_logp(last, tf_logits, steps)
        step_kl = token_kl(ref.step_logp[None], step_logp) if steps else None  # [batch, steps]
        ys = greedy_from(self.model, last, cache, self.max_new_tokens, self.eos_id, start_index=n_in,
                         position_shift=shift)
        seconds = (time.perf_counter() - t0) / len(batch)

        per_row = {s: _metrics_to_numpy(m, len(batch)) for s, m in metrics.items() if m}
        n_queries = {s: ref.rows[s][0][0].shape[1] for s in per_row}
        return [
            Result(c, y, float(step_kl[i].mean()) if steps else None, {s: per_row[s][i] for s in per_row}, n_queries,
                   seconds, step_kl[i].tolist() if steps else None, step_logp[i])
            for i, (c, y) in enumerate(zip(batch, ys))
        ]
