"""Token-level assembly of the three groups (DESIGN.md section 2).

Prompt and prefix are tokenized separately and their ids concatenated, so the task tokens are
identical in every group (tokenizing the joined string could merge across the boundary). A prefix
of length L is exactly L tokens: the first ``L - len(separator)`` tokens of its text, then the
separator's tokens. Every assembled sequence records its segment spans; everything downstream
works from those spans.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HarnessError
from .isolation import DELIMIT_CLOSE, DELIMIT_OPEN, Isolation


@dataclass(frozen=True)
class Assembled:
    """One model input: ``[bos] + prefix + task`` as token ids, with half-open segment spans.

    For group A the prefix span is empty (``prefix_start == prefix_end == task_start``).
    """

    input_ids: tuple[int, ...]
    prefix_start: int
    prefix_end: int
    task_start: int
    task_end: int

    @property
    def n_bos(self) -> int:
        return self.prefix_start

    @property
    def prefix_len(self) -> int:
        return self.prefix_end - self.prefix_start

    @property
    def task_len(self) -> int:
        return self.task_end - self.task_start


def encode(tokenizer, text: str, parse_special: bool = False) -> list[int]:
    """Token ids of ``text`` alone, without added special tokens.

    A special-token string written in the text (``<|endoftext|>``) is encoded as the ordinary
    characters it is, unless ``parse_special``: in a contamination experiment data must stay data,
    and a prompt must not be able to smuggle in a real end-of-text or role token.
    """
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=not parse_special,
                          verbose=False)["input_ids"])


def bos_ids(tokenizer, policy: str) -> list[int]:
    """The BOS ids to put at position 0 under ``policy`` (``auto``, ``always`` or ``never``).

    ``auto`` prepends BOS exactly when the tokenizer itself would (Llama yes, GPT-2 no); that is
    read from what the tokenizer does to a short text with special tokens on.
    """
    policy = getattr(policy, "value", policy)
    bos = tokenizer.bos_token_id
    if policy == "never":
        return []
    if policy == "always":
        if bos is None:
            raise HarnessError("model.bos=always, but this tokenizer has no BOS token; use auto or never")
        return [bos]
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    without = tokenizer("a", add_special_tokens=False)["input_ids"]
    return [bos] if bos is not None and len(with_special) > len(without) and with_special[0] == bos else []


def cut_prefix(
    prefix_ids: list[int], separator_ids: list[int], length: int, *, name: str, repeat: bool = False
) -> list[int]:
    """Exactly ``length`` tokens: the head of the prefix text, then the separator.

    A text too short for ``length`` is an error naming it, or, with ``repeat``, is cycled.
    """
    if length <= 0:
        raise HarnessError(f"prefix lengths must be positive, got {length}")
    body = length - len(separator_ids)
    if body < 0:
        raise HarnessError(
            f"prefix length {length} is shorter than the separator itself ({len(separator_ids)} tokens)"
        )
    if len(prefix_ids) < body:
        if not repeat or not prefix_ids:
            raise HarnessError(
                f"prefix {name!r} has {len(prefix_ids)} tokens, too short for length {length} "
                f"({body} + {len(separator_ids)} separator tokens); use a longer text, drop {length} "
                f"from prefix.lengths, or set prefix.too_short=repeat"
            )
        prefix_ids = prefix_ids * (body // len(prefix_ids) + 1)
    return list(prefix_ids[:body]) + list(separator_ids)


def assemble(bos: list[int], prefix: list[int], task: list[int]) -> Assembled:
    """``bos + prefix + task`` with its spans; ``prefix`` is empty for group A."""
    if not task:
        raise HarnessError("a task prompt tokenized to zero tokens")
    p0 = len(bos)
    t0 = p0 + len(prefix)
    return Assembled(tuple(bos) + tuple(prefix) + tuple(task), p0, t0, t0, t0 + len(task))


@dataclass(frozen=True)
class Condition:
    """One cell of the experiment: a prompt, a group, and for B/C a prefix cut to a length."""

    prompt_id: str
    group: str  # "A", "B" or "C"
    prefix_id: str | None  # None for A
    prefix_len: int  # 0 for A
    assembled: Assembled
    isolation: Isolation = Isolation()


def batchable(a: Condition, b: Condition) -> bool:
    """Whether two conditions can run in one batch without padding: equal input lengths, the same
    spans and the same isolation (so one attention mask and one set of position ids serve both)."""
    x, y = a.assembled, b.assembled
    return (a.isolation == b.isolation and len(x.input_ids) == len(y.input_ids)
            and (x.prefix_start, x.prefix_end, x.task_start) == (y.prefix_start, y.prefix_end, y.task_start))


def build_conditions(
    tokenizer,
    prompts,
    prefixes,
    *,
    groups: list[str],
    lengths: list[int],
    separator: str,
    bos_policy: str,
    repeat_short: bool = False,
    isolations: list[Isolation] | None = None,
    parse_special: bool = False,
) -> list[Condition]:
    """Every condition of a sweep, in a stable order: per prompt, A first, then each group's
    prefixes at each length under each isolation setting. Each text is tokenized exactly once
    (``parse_special``: see :func:`encode`). ``groups`` must include A (the reference)."""
    isolations = isolations or [Isolation()]
    for group in [g for g in ("B", "C") if g in groups]:
        if not any(p.group == group for p in prefixes):
            kind = "neutral" if group == "B" else "instruction"
            raise HarnessError(f"group {group} is requested but the prefix set has no {kind!r} prefixes")
    def enc(text: str) -> list[int]:
        return encode(tokenizer, text, parse_special)

    bos = bos_ids(tokenizer, bos_policy)
    sep = enc(separator)
    cut = {
        (p.id, n): cut_prefix(enc(p.text), sep, n, name=p.id, repeat=repeat_short)
        for p in prefixes
        if p.group in groups
        for n in lengths
    }
    if any(iso.mode == "delimit" for iso in isolations):
        opening, closing = enc(DELIMIT_OPEN), enc(DELIMIT_CLOSE)
        delimited = {k: opening + ids[: len(ids) - len(sep)] + closing + sep for k, ids in cut.items()}
    conditions = []
    for prompt in prompts:
        task = enc(prompt.text)
        if not task:
            raise HarnessError(f"prompt {prompt.id!r} tokenizes to zero tokens")
        conditions.append(Condition(prompt.id, "A", None, 0, assemble(bos, [], task)))
        for group in [g for g in ("B", "C") if g in groups]:
            for prefix in [p for p in prefixes if p.group == group]:
                for n in lengths:
                    for iso in isolations:
                        ids = delimited[prefix.id, n] if iso.mode == "delimit" else cut[prefix.id, n]
                        conditions.append(Condition(prompt.id, group, prefix.id, n, assemble(bos, ids, task), iso))
    return conditions


def check_context(conditions: list[Condition], max_new_tokens: int, max_positions: int | None) -> None:
    """Refuse a sweep whose longest input plus continuation exceeds the model's context window."""
    if max_positions is None:
        return
    longest = max(conditions, key=lambda c: len(c.assembled.input_ids))
    total = len(longest.assembled.input_ids) + max_new_tokens
    if total > max_positions:
        raise HarnessError(
            f"prompt {longest.prompt_id!r} with prefix {longest.prefix_id!r} at length {longest.prefix_len} needs "
            f"{len(longest.assembled.input_ids)} input + {max_new_tokens} new tokens = {total}, beyond the model's "
            f"context window of {max_positions}; use shorter prefix.lengths or decode.max_new_tokens"
        )
