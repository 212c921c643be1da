"""The experiment's cells: every (prompt, group, prefix, length, isolation) condition of a sweep,
each with its assembled input (:mod:`harness.inputs.assembly`), in a stable order."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError
from harness.inputs.assembly import Assembled, assemble, bos_ids, cut_prefix, encode
from harness.inputs.chat import PLACEMENTS, chat_layout
from harness.inputs.checks import TargetCheck
from harness.inputs.isolation import DELIMIT_CLOSE, DELIMIT_OPEN, MODES, Isolation


# What names a condition's row in the tables (with the model it ran on: ``KEY_COLUMNS`` in
# harness.runs.schema). A has prefix_id None and prefix_len 0; beta is None except for decay.
KEY_FIELDS = ("prompt_id", "group", "prefix_id", "prefix_len", "placement", "isolation", "beta")


@dataclass(frozen=True)
class Condition:
    """One cell of the experiment: a prompt, a group, and for B/C a prefix cut to a length.

    :meth:`key` and :meth:`identity` are the one definition of what a condition is: the tables'
    key columns, the stored results' content key, the noise floor and the causal-head test all read
    them (``tests/inputs/test_condition_key.py`` fails when a field is added that neither reaches)."""

    prompt_id: str
    group: str  # "A", "B" or "C"
    prefix_id: str | None  # None for A
    prefix_len: int  # 0 for A
    assembled: Assembled
    isolation: Isolation = Isolation()
    placement: str = "raw"
    goal: TargetCheck | None = None  # what the prefix asks of the reply (harness.inputs.checks)
    pair: str | None = None  # shared by a matched set of prefixes about one target

    def key(self) -> dict:
        """The key columns of the condition's row (:data:`KEY_FIELDS`), without the model."""
        return {"prompt_id": self.prompt_id, "group": self.group, "prefix_id": self.prefix_id,
                "prefix_len": self.prefix_len, "placement": self.placement, "isolation": self.isolation.mode,
                "beta": self.isolation.beta}

    def identity(self, reference: Condition) -> dict:
        """Everything about the condition that determines its result, measured against
        ``reference`` (its prompt's A): the key, the head set of a per-head isolation, the input
        ids and spans, the target check, the matched set, and the reference's input ids. A head
        set's *name* is not part of it: two equal sets share one result."""
        a, iso, goal = self.assembled, self.isolation, self.goal
        heads = [[layer, head] for layer, head in sorted((int(lay), int(h)) for lay, h in iso.heads)]
        return {
            # a list, in KEY_FIELDS order (stored results' keys are hashes of this dict)
            "keys": [self.key()[k] for k in KEY_FIELDS] + ([heads] if heads else []),
            "input_ids": a.input_ids,
            "spans": [a.block_start, a.block_end, a.prefix_start, a.prefix_end, a.task_start, a.task_end],
            "target": None if goal is None else [goal.target, goal.regex, goal.check, goal.forms],
            **({"pair": self.pair} if self.pair is not None else {}),
            "reference_input_ids": reference.assembled.input_ids,
        }


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
    placement says (``harness.inputs.chat``, configured by ``chat``), always as one contiguous block."""
    isolations = isolations or [Isolation()]
    for group in [g for g in ("B", "C") if g in groups]:
        if not any(p.group == group for p in prefixes):
            kind = "neutral" if group == "B" else "instruction"
            raise HarnessError(f"group {group} is requested but the prefix set has no {kind!r} prefixes")

    def enc(text: str) -> list[int]:
        return encode(tokenizer, text, parse_special)

    if placement not in PLACEMENTS:
        raise HarnessError(f"prefix.placement={placement} is not one of {', '.join(PLACEMENTS)}")
    if PLACEMENTS[placement].messages is None:  # raw
        bos, sep = bos_ids(tokenizer, bos_policy), enc(separator)

        def place(task, body=(), text_span=None):
            return assemble(bos, list(body), task, text_span)
    else:
        sep, place = [], chat_layout(tokenizer, placement, chat, parse_special).assemble
    opening, closing = enc(DELIMIT_OPEN), enc(DELIMIT_CLOSE)
    text_ids = {p.id: enc(p.text) for p in prefixes if p.group in groups}

    def body(prefix, n: int, iso: Isolation) -> tuple[list[int], tuple[int, int]]:
        """The block's tokens for a prefix at length ``n`` under ``iso``, and its text span."""
        block = MODES[iso.mode].block
        span = n + len(opening) + len(closing) if block == "plain_at_delimited_span" else n
        try:  # the plain prefix as long as the delimited block (delimit's control)
            ids = cut_prefix(text_ids[prefix.id], sep, span, name=prefix.id, repeat=repeat_short)
        except HarnessError as exc:
            if span == n:
                raise
            raise HarnessError(f"{exc} ({iso.mode} at length {n} matches the {span}-token delimited block)") from None
        if block != "delimited":
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
                                                    placement, prefix.goal, prefix.pair))
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
