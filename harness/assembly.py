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
    """One model input as token ids, with half-open spans.

    X's input is A's input with one contiguous *block* ``[block_start, block_end)`` inserted: the
    prefix and whatever tokens its placement wraps it in (a delimiter, a chat role header). The
    *prefix* span holds the prefix's own tokens inside the block (raw placement: the L tokens of
    the cut, separator included; so there block and prefix coincide), and the *task* span the task
    prompt's tokens, which come after the block. For A the block and prefix spans are empty, at
    the point where X's block goes.
    """

    input_ids: tuple[int, ...]
    prefix_start: int
    prefix_end: int
    task_start: int
    task_end: int
    block_start: int | None = None  # None: the prefix span
    block_end: int | None = None

    def __post_init__(self):
        if self.block_start is None:
            object.__setattr__(self, "block_start", self.prefix_start)
        if self.block_end is None:
            object.__setattr__(self, "block_end", self.prefix_end)

    @property
    def block(self) -> tuple[int, int]:
        return self.block_start, self.block_end

    @property
    def block_len(self) -> int:
        return self.block_end - self.block_start

    @property
    def n_bos(self) -> int:
        return self.block_start

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


def assemble(bos: list[int], prefix: list[int], task: list[int], text_span: tuple[int, int] | None = None) -> Assembled:
    """``bos + prefix + task`` (raw placement) with its spans; ``prefix`` is empty for group A.
    ``text_span`` locates the prefix's own tokens inside ``prefix`` when it is wrapped (delimit)."""
    if not task:
        raise HarnessError("a task prompt tokenized to zero tokens")
    p0 = len(bos)
    t0 = p0 + len(prefix)
    s0, s1 = (p0 + text_span[0], p0 + text_span[1]) if text_span else (p0, t0)
    return Assembled(tuple(bos) + tuple(prefix) + tuple(task), s0, s1, t0, t0 + len(task), p0, t0)


@dataclass(frozen=True)
class Condition:
    """One cell of the experiment: a prompt, a group, and for B/C a prefix cut to a length."""

    prompt_id: str
    group: str  # "A", "B" or "C"
    prefix_id: str | None  # None for A
    prefix_len: int  # 0 for A
    assembled: Assembled
    isolation: Isolation = Isolation()
    placement: str = "raw"
    target: str | None = None  # what the prefix's instruction asks for (harness.texts.target_pattern)
    target_regex: str | None = None
    pair: str | None = None  # shared by a matched B and C prefix

    @property
    def target_pattern(self):
        from .texts import target_pattern

        return target_pattern(self.target, self.target_regex) if (self.target or self.target_regex) else None


def batchable(a: Condition, b: Condition) -> bool:
    """Whether two conditions can run in one batch without padding: equal input lengths, the same
    spans and the same isolation (so one attention mask and one set of position ids serve both)."""
    x, y = a.assembled, b.assembled
    return (a.isolation == b.isolation and len(x.input_ids) == len(y.input_ids)
            and (x.block, x.task_start, x.task_end) == (y.block, y.task_start, y.task_end))


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
    placement: str = "raw",
    chat=None,
) -> list[Condition]:
    """Every condition of a sweep, in a stable order: per prompt, A first, then each group's
    prefixes at each length under each isolation setting. Each text is tokenized exactly once
    (``parse_special``: see :func:`encode`). ``groups`` must include A (the reference).

    ``placement`` is where the prefix goes: ``raw`` concatenates ``[bos] + prefix + separator +
    task``; any other placement puts the task in a chat template and the prefix where the
    placement says (``harness.chat``, configured by ``chat``), always as one contiguous block."""
    isolations = isolations or [Isolation()]
    for group in [g for g in ("B", "C") if g in groups]:
        if not any(p.group == group for p in prefixes):
            kind = "neutral" if group == "B" else "instruction"
            raise HarnessError(f"group {group} is requested but the prefix set has no {kind!r} prefixes")

    def enc(text: str) -> list[int]:
        return encode(tokenizer, text, parse_special)

    if placement == "raw":
        bos, sep = bos_ids(tokenizer, bos_policy), enc(separator)

        def place(task, body=(), text_span=None):
            return assemble(bos, list(body), task, text_span)
    else:
        from .chat import chat_layout

        sep, place = [], chat_layout(tokenizer, placement, chat, parse_special).assemble
    opening, closing = enc(DELIMIT_OPEN), enc(DELIMIT_CLOSE)
    text_ids = {p.id: enc(p.text) for p in prefixes if p.group in groups}

    def body(prefix, n: int, iso: Isolation) -> tuple[list[int], tuple[int, int]]:
        """The block's tokens for a prefix at length ``n`` under ``iso``, and its text span."""
        span = n + len(opening) + len(closing) if iso.mode == "delimit_control" else n
        try:  # delimit_control: the plain prefix as long as the delimited block
            ids = cut_prefix(text_ids[prefix.id], sep, span, name=prefix.id, repeat=repeat_short)
        except HarnessError as exc:
            if span == n:
                raise
            raise HarnessError(f"{exc} (delimit_control at length {n} matches the {span}-token delimited block)") from None
        if iso.mode != "delimit":
            return ids, (0, len(ids))
        text = ids[: len(ids) - len(sep)]
        return opening + text + closing + sep, (len(opening), len(opening) + len(text))

    conditions = []
    for prompt in prompts:
        task = enc(prompt.text)
        if not task:
            raise HarnessError(f"prompt {prompt.id!r} tokenizes to zero tokens")
        conditions.append(Condition(prompt.id, "A", None, 0, place(task), placement=placement))
        for group in [g for g in ("B", "C") if g in groups]:
            for prefix in [p for p in prefixes if p.group == group]:
                for n in lengths:
                    for iso in isolations:
                        ids, span = body(prefix, n, iso)
                        conditions.append(Condition(prompt.id, group, prefix.id, n, place(task, ids, span), iso,
                                                    placement, prefix.target, prefix.target_regex, prefix.pair))
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
