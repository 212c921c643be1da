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


class TooShort(HarnessError):
    """A prefix text (or the document a span is set into) too short for a length, or a span longer
    than the prefix: refused, or with ``prefix.too_short=skip`` the condition is left out and counted.
    ``reason`` is what does not fit; the message adds what to do (a skipped condition records the
    reason alone: its advice is what was done)."""

    def __init__(self, reason: str, advice: str = ""):  # one argument: as an exception is unpickled
        super().__init__(f"{reason}; {advice}" if advice else reason)
        self.reason = reason


INJECTION_AT = ("start", "middle", "end")  # where a span sits in its prefix (prefix.injection_at)


def _body_length(length: int, separator_ids: list[int]) -> int:
    if length <= 0:
        raise HarnessError(f"prefix lengths must be positive, got {length}")
    body = length - len(separator_ids)
    if body < 0:
        raise HarnessError(
            f"prefix length {length} is shorter than the separator itself ({len(separator_ids)} tokens)"
        )
    return body


def _head(ids: list[int], n: int, repeat: bool, too_short: tuple[str, str]) -> list[int]:
    """The first ``n`` of ``ids``, cycling them with ``repeat``; else :class:`TooShort` (``too_short``:
    what is short, and what to do)."""
    if len(ids) < n:
        if not repeat or not ids:
            raise TooShort(*too_short)
        ids = ids * (n // len(ids) + 1)
    return list(ids[:n])


def cut_prefix(
    prefix_ids: list[int], separator_ids: list[int], length: int, *, name: str, repeat: bool = False
) -> list[int]:
    """Exactly ``length`` tokens: the head of the prefix text, then the separator.

    A text too short for ``length`` is an error naming it (:class:`TooShort`), or, with ``repeat``, is cycled.
    """
    body = _body_length(length, separator_ids)
    if body == 0 and prefix_ids:  # the separator alone: no prefix text, so B and C would be the same
        raise HarnessError(f"prefix length {length} leaves no prefix text: the separator itself takes "
                           f"{len(separator_ids)} token(s); give prefix.lengths above {len(separator_ids)}")
    return _head(prefix_ids, body, repeat, (
        (f"prefix {name!r} has {len(prefix_ids)} tokens, too short for length {length} "
         f"({body} + {len(separator_ids)} separator tokens)"),
        f"use a longer text, drop {length} from prefix.lengths, or set prefix.too_short=repeat (or skip)"
    )) + list(separator_ids)


def place_span(
    document_ids: list[int], span_ids: list[int], separator_ids: list[int], length: int, at: str, *, name: str,
    repeat: bool = False,
) -> tuple[list[int], tuple[int, int]]:
    """Exactly ``length`` tokens: the document's head with ``span_ids`` set into it, then the
    separator; and the span's half-open offsets within them.

    The span begins at the first token (``at="start"``), is centred (``middle``: the document's
    tokens before it are half of those around it, rounded down) or ends at the last token before
    the separator (``end``); around it the document reads on where it paused:
    ``doc[:k] + span + doc[k:rest]``. So two spans of one token count set into one document give
    prefixes identical outside ``[k, k + len(span))``. A span longer than the prefix, or a document
    shorter than the rest, is :class:`TooShort` (the document is cycled with ``repeat``)."""
    body = _body_length(length, separator_ids)
    if len(span_ids) > body:
        raise TooShort(f"prefix {name!r}: its span of {len(span_ids)} tokens does not fit in length {length} "
                       f"({body} + {len(separator_ids)} separator tokens)",
                       f"drop {length} from prefix.lengths or set prefix.too_short=skip")
    rest = body - len(span_ids)
    doc = _head(document_ids, rest, repeat, (
        (f"prefix {name!r}: its document has {len(document_ids)} tokens, too few for the {rest} around its "
         f"{len(span_ids)}-token span at length {length}"),
        f"drop {length} from prefix.lengths, or set prefix.too_short=repeat (or skip)"))
    k = {"start": 0, "middle": rest // 2, "end": rest}[at]
    return doc[:k] + list(span_ids) + doc[k:] + list(separator_ids), (k, k + len(span_ids))


def assemble(bos: list[int], prefix: list[int], task: list[int], text_span: tuple[int, int] | None = None) -> Assembled:
    """``bos + prefix + task`` (raw placement) with its spans; ``prefix`` is empty for group A.
    ``text_span`` locates the prefix's own tokens inside ``prefix`` when it is wrapped (delimit)."""
    if not task:
        raise HarnessError("a task prompt tokenized to zero tokens")
    p0 = len(bos)
    t0 = p0 + len(prefix)
    s0, s1 = (p0 + text_span[0], p0 + text_span[1]) if text_span else (p0, t0)
    return Assembled(tuple(bos) + tuple(prefix) + tuple(task), s0, s1, t0, t0 + len(task), p0, t0)


