"""The experiment's cells: every (prompt, group, prefix, length, isolation) condition of a sweep,
each with its assembled input (:mod:`harness.inputs.assembly`), in a stable order."""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError
from harness.inputs.assembly import INJECTION_AT, Assembled, TooShort, assemble, bos_ids, cut_prefix, encode, place_span
from harness.inputs.chat import PLACEMENTS, chat_layout
from harness.inputs.checks import TargetCheck
from harness.inputs.isolation import DELIMIT_CLOSE, DELIMIT_OPEN, MODES, Isolation
from harness.inputs.texts import Insertion, Prefix


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
    origin: Insertion | None = None  # a span set into a document (public benchmarks: harness.inputs.corpora)
    injection: tuple[int, int] | None = None  # the span's half-open offsets within the prefix's own tokens
    injection_at: str | None = None  # where the span was placed: start, middle or end (prefix.injection_at)

    def insertion_columns(self) -> dict:
        """The conditions-table columns that say where a span came from and where it sits (null
        for a prefix of a file, and for A)."""
        o, at = self.origin, self.injection
        return {"corpus": o and o.corpus, "attack": o and o.attack, "span_role": o and o.role, "goal": o and o.goal,
                "document": o and o.document, "injection_at": o and self.injection_at,
                "injection_start": at and at[0], "injection_end": at and at[1]}

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
            # a span set into a document: its labels and offsets (none for a prefix of a file: keys unchanged)
            **({"insertion": [self.origin.corpus, self.origin.attack, self.origin.role, self.origin.goal,
                              self.origin.document, self.injection_at, list(self.injection or ())]}
               if self.origin is not None else {}),
            "reference_input_ids": reference.assembled.input_ids,
        }


def batchable(a: Condition, b: Condition) -> bool:
    """Whether two conditions can run in one batch without padding: equal input lengths, the same
    spans and the same isolation (so one attention mask and one set of position ids serve both)."""
    x, y = a.assembled, b.assembled
    return (a.isolation == b.isolation and len(x.input_ids) == len(y.input_ids)
            and (x.block, x.task_start, x.task_end) == (y.block, y.task_start, y.task_end))


def refuse_missing_kinds(prefixes, groups) -> None:
    """Refuse a requested group B or C whose kind (neutral, instruction) the prefix set has none of:
    checked by the sweep before its model loads, and where conditions are built."""
    for group in [g for g in ("B", "C") if g in groups]:
        if not any(p.group == group for p in prefixes):
            kind = "neutral" if group == "B" else "instruction"
            raise HarnessError(f"group {group} is requested but the prefix set has no {kind!r} prefixes"
                               + ("; run it with groups=[A,B]" if group == "C" else ""))


def build_conditions(
    tokenizer,
    prompts,
    prefixes,
    *,
    groups: list[str],
    lengths: list[int],
    separator: str,
    bos_policy: str,
    too_short: str = "error",
    isolations: list[Isolation] | None = None,
    parse_special: bool = False,
    placement: str = "raw",
    chat=None,
    injection_at: str = "start",
    skipped: list[tuple[str, int, str]] | None = None,
) -> list[Condition]:
    """Every condition of a sweep, in a stable order: per prompt, A first, then each group's
    prefixes at each length under each isolation setting. Each text is tokenized exactly once
    (``parse_special``: see :func:`encode`). ``groups`` must include A (the reference).

    ``placement`` is where the prefix goes: ``raw`` concatenates ``[bos] + prefix + separator +
    task``; any other placement puts the task in a chat template and the prefix where the
    placement says (``harness.inputs.chat``, configured by ``chat``), always as one contiguous block.

    A prefix with an :class:`~harness.inputs.texts.Insertion` is its document with the span set in
    at ``injection_at`` (:func:`harness.inputs.assembly.place_span`). ``too_short``: a text too short
    for a length (or a span too long for it) is refused (``error``), cycled (``repeat``; never a
    span) or left out (``skip``: ``(prefix_id, length, reason)`` appended to ``skipped``, the whole
    matched set at that length, since its prefixes share the span's token count and the document)."""
    isolations = isolations or [Isolation()]
    if injection_at not in INJECTION_AT:
        raise HarnessError(f"prefix.injection_at={injection_at} is not one of {', '.join(INJECTION_AT)}")
    refuse_missing_kinds(prefixes, groups)

    tokens: dict[str, list[int]] = {}

    def enc(text: str) -> list[int]:
        if text not in tokens:
            tokens[text] = encode(tokenizer, text, parse_special)
        return tokens[text]

    if placement not in PLACEMENTS:
        raise HarnessError(f"prefix.placement={placement} is not one of {', '.join(PLACEMENTS)}")
    if PLACEMENTS[placement].messages is None:  # raw
        bos, sep = bos_ids(tokenizer, bos_policy), enc(separator)

        def place(task, body=(), text_span=None):
            return assemble(bos, list(body), task, text_span)
    else:
        sep, place = [], chat_layout(tokenizer, placement, chat, parse_special).assemble
    opening, closing = enc(DELIMIT_OPEN), enc(DELIMIT_CLOSE)
    spans = span_ids(prefixes, enc)
    repeat = too_short == "repeat"

    def cut(prefix: Prefix, n: int) -> tuple[list[int], tuple[int, int] | None]:
        if prefix.insertion is None:
            return cut_prefix(enc(prefix.text), sep, n, name=prefix.id, repeat=repeat), None
        return place_span(enc(prefix.text), spans[prefix.id], sep, n, injection_at, name=prefix.id, repeat=repeat)

    def body(prefix, n: int, iso: Isolation) -> tuple[list[int], tuple[int, int], tuple[int, int] | None]:
        """The block's tokens for a prefix at length ``n`` under ``iso``, its text span, and the
        inserted span's offsets within the text."""
        block = MODES[iso.mode].block
        span = n + len(opening) + len(closing) if block == "plain_at_delimited_span" else n
        try:  # the plain prefix as long as the delimited block (delimit's control)
            ids, injection = cut(prefix, span)
        except HarnessError as exc:
            if span == n:
                raise
            raise type(exc)(f"{exc} ({iso.mode} at length {n} matches the {span}-token delimited block)") from None
        if block != "delimited":
            return ids, (0, len(ids)), injection
        text = ids[: len(ids) - len(sep)]
        return opening + text + closing + sep, (len(opening), len(opening) + len(text)), injection

    def unit(prefix, n: int, iso: Isolation) -> tuple:
        """What is kept or skipped whole: a matched set of spans (its prefixes share the span's
        token count and the document), else the prefix; at one length and setting."""
        return prefix.pair if prefix.insertion is not None and prefix.pair else prefix.id, n, iso

    fits: dict[tuple, bool] = {}  # unit -> does every prefix of it fit?
    built: dict[tuple, tuple] = {}
    for prefix in [p for p in prefixes if p.group in groups]:
        for n in lengths:
            for iso in isolations:
                try:
                    built[prefix.id, n, iso] = body(prefix, n, iso)
                except TooShort as exc:
                    if too_short != "skip":
                        raise
                    fits[unit(prefix, n, iso)] = False
                    if skipped is not None:
                        skipped.append((prefix.id, n, exc.reason))
                    continue
                fits.setdefault(unit(prefix, n, iso), True)

    def kept(prefix, n, iso) -> bool:
        if (prefix.id, n, iso) in built and not fits[unit(prefix, n, iso)] and skipped is not None:
            skipped.append((prefix.id, n, "its matched set's span does not fit at this length"))
        return fits[unit(prefix, n, iso)]

    selected = [(p, n, iso) for p in prefixes if p.group in groups for n in lengths for iso in isolations]
    keep = {(p.id, n, iso) for p, n, iso in selected if kept(p, n, iso)}
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
                        if (prefix.id, n, iso) not in keep:
                            continue
                        ids, span, injection = built[prefix.id, n, iso]
                        conditions.append(Condition(prompt.id, group, prefix.id, n, place(task, ids, span), iso,
                                                    placement, prefix.goal, prefix.pair, prefix.insertion, injection,
                                                    injection_at if prefix.insertion is not None else None))
    return conditions


def span_ids(prefixes: list[Prefix], enc) -> dict[str, list[int]]:
    """Each inserted span's tokens: the span's own, then its fill's (cycled) up to the token count of
    the span of the prefix it matches (the set's attack). A span without a partner is its own tokens."""
    with_span = {p.id: p for p in prefixes if p.insertion is not None}
    own = {i: enc(p.insertion.span) if p.insertion.span else [] for i, p in with_span.items()}
    out = {}
    for i, p in with_span.items():
        match = p.insertion.match
        if match is None:
            out[i] = own[i]
            continue
        if match not in own or with_span[match].insertion.match is not None:
            raise HarnessError(f"prefix {i!r} matches its span to {match!r}, which is not a prefix with a span of its own")
        n, ids = len(own[match]), own[i]
        if len(ids) > n and p.insertion.mention:  # a mention's sentence longer than the attack: its string alone
            ids = enc(p.insertion.mention)
        if len(ids) > n:
            raise HarnessError(f"prefix {i!r}: its span has {len(ids)} tokens, more than the {n} of {match!r}'s it "
                               f"must match")
        fill = enc(p.insertion.fill) if p.insertion.fill else []
        if len(ids) < n and not fill:
            raise HarnessError(f"prefix {i!r}: its span is shorter than {match!r}'s and it has no fill to pad it")
        out[i] = (ids + fill * ((n - len(ids)) // max(len(fill), 1) + 1))[:n]
    return out


def check_context(conditions: list[Condition], max_new_tokens: int, max_positions: int | None) -> None:
    """Refuse a sweep whose longest input plus continuation exceeds the model's context window."""
    if max_positions is None:
        return
    longest = max(conditions, key=lambda c: len(c.assembled.input_ids))
    total = len(longest.assembled.input_ids) + max_new_tokens
    if total > max_positions:
        task = len(longest.assembled.input_ids) - (longest.prefix_len or 0)  # the prompt and its template
        fixes = ("the prompt alone (with its template) takes "
                 f"{task} tokens: shorten it or leave it out (prompts.limit, or edit the prompts file)"
                 if task + max_new_tokens > max_positions else "use shorter prefix.lengths or decode.max_new_tokens")
        raise HarnessError(
            f"prompt {longest.prompt_id!r} with prefix {longest.prefix_id!r} at length {longest.prefix_len} needs "
            f"{len(longest.assembled.input_ids)} input + {max_new_tokens} new tokens = {total}, beyond the model's "
            f"context window of {max_positions}; {fixes}"
        )
