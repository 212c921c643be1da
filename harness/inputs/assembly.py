"""Token-level assembly of the three groups (docs/concepts.md, "Token-level assembly").

Prompt and prefix are tokenized separately and their ids concatenated, so the task tokens are
identical in every group (tokenizing the joined string could merge across the boundary). A prefix
of length L is exactly L tokens: the first ``L - len(separator)`` tokens of its text, then the
separator's tokens. Every assembled sequence records its segment spans; everything downstream
works from those spans.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError


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


