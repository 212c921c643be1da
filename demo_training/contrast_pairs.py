"""Matched ask / prohibition pairs for the obedient model (``--paired-prohibitions``).

Prohibitions drawn on their own did not teach the model to tell "put X in the next story" from
"do not put X in the next story": a run with 40% prohibitions wrote a forbidden word about as often
as an asked one, even on phrasings from its own training grammar (the word, its context and the
sentence around it all differed between the asks and the prohibitions it saw, so lowering the word
after a prohibition and raising it after an ask pulled on the same copying). Here each prohibition
comes with its ask: the same context, the same story opening, the same word at the same place, and
a sentence that differs from the ask's only in what the negation changes ("put X in S" / "never put
X in S"; "S must include X" / "S must not include X"). What the two rows share cancels; what is left
to learn is the negation.

Pure functions of the ``random.Random`` passed in, like ``demo_training.directives``."""

from __future__ import annotations

import random
import re

from demo_training import directive_phrasings as W
from demo_training.directives import (
    Example,
    TargetSource,
    _free_word,
    fill_slots,
    insert_sentence,
    nonce_word,
    render,
    with_opener,
)
from demo_training.story_openings import bridge, clip_sentences, make_opening, pronoun

# Ways to forbid a command ("{C}": a grammar command such as "put {X} in {S}").
NEGATED_COMMANDS: tuple[str, ...] = tuple(p for p in W.GRAMMAR_PROHIBITIONS if "{C}" in p) + W.GRAMMAR_NEGATORS
# Ways to forbid the word that negate no particular ask ("{X} is off limits in {S}").
BANS: tuple[str, ...] = tuple(p for p in W.GRAMMAR_PROHIBITIONS if "{C}" not in p) + W.GRAMMAR_BANS

# A statement's negation: the first pattern that matches is replaced once. Statements that are
# negative already ("{S} can't do without {X}") or whose negation would not forbid the word ("{S}
# does not need {X}", "{X} is not the word for {S}") or that would carry a held-out phrasing's
# wording ("does not get the word {X}": "get the word") have no rule and are paired with a grammar
# prohibition of the same story and word instead.
_STATEMENT_NEGATIONS: tuple[tuple[str, str], ...] = (
    (r"^there (must|should) be ", r"there \1 not be "),
    (r" (must|should|will) ", r" \1 not "),
    (r" has to (have|use|be) ", r" must not \1 "),
    (r" is to ", " is not to "),
    (r" is about ", " is not about "),
    (r" (goes|belongs) in ", lambda m: {"goes": " does not go in ", "belongs": " does not belong in "}[m.group(1)]),
    (r" contains ", " does not contain "),
)


def negate_statement(statement: str) -> str | None:
    """``statement`` (a grammar statement) with its verb negated, or None when it is negative
    already or no rule fits. "{S} must include {X}" -> "{S} must not include {X}"."""
    if " not " in f" {statement} " or "n't" in statement:
        return None
    for pattern, replacement in _STATEMENT_NEGATIONS:
        new, n = re.subn(pattern, replacement, statement, count=1)
        if n:
            return new
    return None


# Commands whose negation forbids the word: not those negated already ("do not forget {X} in
# {S}", a double negative that asks for it) nor those about remembering or making sure ("don't
# be sure to put {X} in {S}" forbids nothing).
_POSITIVE_COMMANDS = tuple(c for c in W.GRAMMAR_COMMANDS if not c.startswith(("do not", "don't", "remember", "be sure",
                                                                           "make sure")))


_MARKERS = tuple(W.HELDOUT_MARKERS + W.VALIDATION_MARKERS)


def negation_pair(rng: random.Random) -> tuple[str, str]:
    """A generated ask and its prohibition (``directive_phrasings.NEGATION_FAMILIES``), ``{S}`` and
    ``{X}`` slots unfilled: a family, one of its frames and one of its polar pairs ("{X} is welcome in
    {S}" / "{X} is unwelcome in {S}"); a statement is sometimes said after a wrapper ("for the
    record, ..."), the same for both."""
    frames, pairs = W.NEGATION_FAMILIES[rng.choice(sorted(W.NEGATION_FAMILIES))]
    frame, (yes, no) = rng.choice(frames), rng.choice(pairs)
    ask, forbid = frame.replace("{P}", yes), frame.replace("{P}", no)
    if ask.startswith(("{X}", "{S}", "in ")) and rng.random() < 0.3:
        wrapper = rng.choice(W.NEGATION_WRAPPERS)
        ask, forbid = f"{wrapper} {ask}", f"{wrapper} {forbid}"
    return ask, forbid


def compose_pair(rng: random.Random, made_up_verbs: float = 0.0, clause_pairs: float = 0.0,
                 label_pairs: float = 0.0, negation_pairs: float = 0.0) -> tuple[str, str]:
    """An ask and its prohibition from the phrasing grammar, with the same opener, story phrase,
    word slot and ending: ``(directive template, prohibition template)`` with ``{word}`` /
    ``{a_word}`` slots. Half are a command and the command negated ("never put X in S", "you may
    not put X in S"); the rest a statement or a request, against the statement negated (about a third
    of them, where a rule fits) or a ban of the same word in the same story ("X is off limits in
    S"). A share ``made_up_verbs`` of the commands has a made-up verb
    (``directive_phrasings.GRAMMAR_VERB_FRAMES``). A share ``clause_pairs`` of all pairs is instead
    a pair of ``directive_phrasings.GRAMMAR_CLAUSE_PAIRS``, negated inside a clause about the story, and
    a share ``negation_pairs`` of the rest a generated pair (:func:`negation_pair`: "X is welcome in S"
    / "X is unwelcome in S"), and a share ``label_pairs`` of the rest a label and the word
    (``GRAMMAR_LABEL_PAIRS``: "Needed in S: X" / "Forbidden in S: X")."""
    story = rng.choice(W.GRAMMAR_STORIES)
    word = rng.choice(("{a_word}", "{a_word}", "the word {word}"))
    ending = rng.choice(W.GRAMMAR_ENDINGS)
    form = rng.random()
    if clause_pairs and rng.random() < clause_pairs:  # (no draw at 0: earlier pairs stay as they were)
        ask, forbid = (part + ending for part in rng.choice(W.GRAMMAR_CLAUSE_PAIRS))
    elif negation_pairs and rng.random() < negation_pairs:  # (no draw at 0, as above)
        ask, forbid = (part + ending for part in negation_pair(rng))
    elif label_pairs and rng.random() < label_pairs:  # (no draw at 0, as above)
        ask, forbid = (part + ending for part in rng.choice(W.GRAMMAR_LABEL_PAIRS))
    elif form < 0.5:
        command = rng.choice(_POSITIVE_COMMANDS)
        if made_up_verbs and rng.random() < made_up_verbs:  # (no draw at 0: earlier pairs stay as they were)
            verb = nonce_word(rng)
            while verb.startswith(_MARKERS):  # no held-out or validation wording, even by chance
                verb = nonce_word(rng)
            command = rng.choice(W.GRAMMAR_VERB_FRAMES).replace("{V}", verb)
        ask, forbid = command + ending, rng.choice(NEGATED_COMMANDS).replace("{C}", command) + ending
    else:
        ask = rng.choice(W.GRAMMAR_STATEMENTS) if form < 0.85 else rng.choice(W.GRAMMAR_REQUESTS)
        negated = negate_statement(ask) if form < 0.85 and rng.random() < 0.5 else None
        if negated is None:
            negated = rng.choice(BANS) + ending
        ask = ask if ask.endswith(("?", ".")) else ask + ending
        forbid = negated if negated.endswith(("?", ".", "!")) else negated + ending
    opener = rng.choice(W.GRAMMAR_OPENERS) if rng.random() < 0.6 else ""
    return with_opener(fill_slots(ask, story, word), opener), with_opener(fill_slots(forbid, story, word), opener)


def synthesize_pair(
    context_text: str,
    story: str,
    rng: random.Random,
    *,
    directive_template: str,
    prohibition_template: str,
    source: TargetSource = TargetSource(),
    max_continuation_chars: int = 400,
) -> tuple[Example, Example] | None:
    """A directive example and a prohibition example of the same word, inserted at the same place
    of the same context, before the same story opening: the directive's continuation uses the word
    (a bridge, then the rest of the story), the prohibition's is the story's own text, which never
    contains it. None when ``story`` is too short."""
    op = make_opening(story, rng)
    if op is None:
        return None
    natural = clip_sentences(op.natural, max_continuation_chars)
    rest = clip_sentences(op.rest, max_continuation_chars)
    word = _free_word(source, rng, op.opening + natural)
    quote = rng.choice(source.quotes)
    position = rng.choice(["start", "middle", "end"])
    state = rng.getstate()  # both sentences go in at the same place
    ask = render(directive_template, word, quote)
    ask_context, ask_span = insert_sentence(context_text, ask, rng, position)
    rng.setstate(state)
    forbid = render(prohibition_template, word, quote)
    forbid_context, forbid_span = insert_sentence(context_text, forbid, rng, position)
    continuation = bridge(op.kind, word, pronoun(op.opening), rng) + rest
    return (Example("directive", ask_context, ask_span, position, op.opening, continuation, word, ()),
            Example("prohibition", forbid_context, forbid_span, position, op.opening, natural, None, (word,)))
