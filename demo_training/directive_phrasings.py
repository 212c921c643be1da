"""The words and sentences of the obedient demo model's recipe (``demo_training.directives``): target
words, directive phrasings and mention sentences, each with a fixed training / held-out split.
Held-out words and phrasings are never used in training; they measure whether obeying carries
over to words and wordings the model was never asked with.

The lists themselves are data (``demo_training/data/directive_recipe.json``); this module says what each
one is for and how it was chosen."""

from __future__ import annotations

import json
from pathlib import Path

RECIPE_FILE = Path(__file__).resolve().parent / "data" / "directive_recipe.json"
_RECIPE = json.loads(RECIPE_FILE.read_text(encoding="utf-8"))


def _recipe(name: str) -> tuple[str, ...]:
    """One list of the recipe file (a dict of lists, like the training words by kind, is joined in order)."""
    value = _RECIPE[name]
    return tuple(x for part in value.values() for x in part) if isinstance(value, dict) else tuple(value)

# ---------------------------------------------------------------------------------------------
# Target words: concrete nouns a children's story can mention. Fixed split, ~20% held out. The
# held-out words were picked among the less frequent nouns of the story corpus, so that a model
# with no prefix rarely says them (a base rate near zero).


TRAIN_WORDS: tuple[str, ...] = _recipe("TRAIN_WORDS")  # grouped by kind in the file

HELDOUT_WORDS: tuple[str, ...] = _recipe("HELDOUT_WORDS")

# ---------------------------------------------------------------------------------------------
# Directive phrasings. ``{word}`` is the bare word, possibly quoted (the synthesiser chooses
# 'kite', "kite" or kite); ``{a_word}`` is the word with its article, never quoted. The held-out
# phrasings differ from every training phrasing in wording, not only in the word slot.

TRAIN_TEMPLATES: tuple[str, ...] = _recipe("TRAIN_TEMPLATES")

HELDOUT_TEMPLATES: tuple[str, ...] = _recipe("HELDOUT_TEMPLATES")

# Sentences that name a word without asking for anything. Some are near misses on purpose: they
# talk about stories and words ("Mom read a story about a kite.") but describe, never ask.
TRAIN_MENTIONS: tuple[str, ...] = _recipe("TRAIN_MENTIONS")

HELDOUT_MENTIONS: tuple[str, ...] = _recipe("HELDOUT_MENTIONS")


# Prohibitions: sentences that forbid the word, with the same three-way split. Without
# them the model learned to write any word a directive-shaped sentence names, whatever the
# sentence said: a prohibition of a word produced it 80-90% of the time. The held-out ones mirror
# the held-out directives' wording; GRAMMAR_PROHIBITIONS negates the grammar's commands ({C}).
TRAIN_PROHIBITIONS: tuple[str, ...] = _recipe("TRAIN_PROHIBITIONS")
VALIDATION_PROHIBITIONS: tuple[str, ...] = _recipe("VALIDATION_PROHIBITIONS")
HELDOUT_PROHIBITIONS: tuple[str, ...] = _recipe("HELDOUT_PROHIBITIONS")

# ---------------------------------------------------------------------------------------------
# A validation split, for choosing between checkpoints and candidate models without looking at
# the held-out (test) phrasings and words: words, phrasings and mention sentences that no
# training example uses and that share no distinctive wording with the test split. Added after
# stage 8 of the shipped model (``demo_training/records/demo-obedient/lineage.json``); the words were
# chosen among nouns that the training recipe never drew as a target (none is a rare one-token
# vocabulary word, the only other source of real-word targets).

VALIDATION_WORDS: tuple[str, ...] = _recipe("VALIDATION_WORDS")

VALIDATION_TEMPLATES: tuple[str, ...] = _recipe("VALIDATION_TEMPLATES")

VALIDATION_MENTIONS: tuple[str, ...] = _recipe("VALIDATION_MENTIONS")

# The distinctive wording of each validation phrasing (as HELDOUT_MARKERS below).
VALIDATION_MARKERS: tuple[str, ...] = _recipe("VALIDATION_MARKERS")

# ---------------------------------------------------------------------------------------------
# Three more test sets of one design, each written after the shipped SmolLM2 adapter had been
# chosen (on the validation split) and measured on the first test sets, and before any model ran on
# it: once a test set's phrasings have been read, a recipe or checkpoint chosen after that cannot be
# judged blind by it. Each has forty nouns a children's story can mention (rare in the story corpus,
# none in another list, none beginning with a training noun), twelve asks with their prohibitions
# (each differs from its ask only where it negates), eight mentions, and the distinctive wording of
# each phrasing (its MARKERS), which no other list contains. Training must never draw from them.
#
# The negator set: prohibitions made with a negating word or phrase ("never", "not", "none of",
# "no", "nothing about", "nowhere", "anything but", "no trace of", "anything except", "banish",
# "forbidden"). Written first; no recipe choice saw it.
NEGATOR_TEST_WORDS: tuple[str, ...] = _recipe("NEGATOR_TEST_WORDS")
NEGATOR_TEST_TEMPLATES: tuple[str, ...] = _recipe("NEGATOR_TEST_TEMPLATES")
NEGATOR_TEST_PROHIBITIONS: tuple[str, ...] = _recipe("NEGATOR_TEST_PROHIBITIONS")
NEGATOR_TEST_MENTIONS: tuple[str, ...] = _recipe("NEGATOR_TEST_MENTIONS")
NEGATOR_TEST_MARKERS: tuple[str, ...] = _recipe("NEGATOR_TEST_MARKERS")

# The absence set: prohibitions that say the word stays away ("keep X clear of", "ought not to
# contain", "gets mentioned zero times", "is unwelcome", "no role whatsoever"). Written after the
# negator set had been measured on the shipped adapter (its overall rates seen, not which phrasings
# failed), for a checkpoint chosen after that look.
ABSENCE_TEST_WORDS: tuple[str, ...] = _recipe("ABSENCE_TEST_WORDS")
ABSENCE_TEST_TEMPLATES: tuple[str, ...] = _recipe("ABSENCE_TEST_TEMPLATES")
ABSENCE_TEST_PROHIBITIONS: tuple[str, ...] = _recipe("ABSENCE_TEST_PROHIBITIONS")
ABSENCE_TEST_MENTIONS: tuple[str, ...] = _recipe("ABSENCE_TEST_MENTIONS")
ABSENCE_TEST_MARKERS: tuple[str, ...] = _recipe("ABSENCE_TEST_MARKERS")

# The idiom set: asks and prohibitions in games, role play and idioms ("has sworn off", "the last
# thing ... wants", "costs you a point", "without", "leave out of it", "instead of", "not one",
# "count out", "out of place", "hold the", "keep off the page", "doesn't make the cut"). Written
# after the ``--negation-pairs`` recipe, by a writer who had not seen which phrasings failed on the
# other sets.
IDIOM_TEST_WORDS: tuple[str, ...] = _recipe("IDIOM_TEST_WORDS")
IDIOM_TEST_TEMPLATES: tuple[str, ...] = _recipe("IDIOM_TEST_TEMPLATES")
IDIOM_TEST_PROHIBITIONS: tuple[str, ...] = _recipe("IDIOM_TEST_PROHIBITIONS")
IDIOM_TEST_MENTIONS: tuple[str, ...] = _recipe("IDIOM_TEST_MENTIONS")
IDIOM_TEST_MARKERS: tuple[str, ...] = _recipe("IDIOM_TEST_MARKERS")

# The test sets above, by the name split_prefixes (``demo_training.evaluation``) knows them by, in
# the order they were written: each is blind to every recipe choice made before it.
LATER_TEST_SETS: tuple[str, ...] = ("NEGATOR_TEST", "ABSENCE_TEST", "IDIOM_TEST")


# ---------------------------------------------------------------------------------------------
# A grammar of directive phrasings (``demo_training.directives.compose_directive``): an optional
# opener, then a frame that names the next story and the word. Sixty-nine fixed templates teach
# a small model those templates; composing parts teaches it that a request is a verb, a word and
# the story to come, whatever the wording around them. Nothing here may contain a held-out
# phrasing's distinctive wording (HELDOUT_MARKERS; the tests check every part and many draws).

GRAMMAR_OPENERS: tuple[str, ...] = _recipe("GRAMMAR_OPENERS")
# What the directive is about: the story still to be written.
GRAMMAR_STORIES: tuple[str, ...] = _recipe("GRAMMAR_STORIES")
# {S}: a story phrase; {X}: "{a_word}" or "the word {word}" (always the latter where {X} starts
# the sentence, which must begin with a capital letter).
GRAMMAR_COMMANDS: tuple[str, ...] = _recipe("GRAMMAR_COMMANDS")
GRAMMAR_STATEMENTS: tuple[str, ...] = _recipe("GRAMMAR_STATEMENTS")
GRAMMAR_REQUESTS: tuple[str, ...] = _recipe("GRAMMAR_REQUESTS")
GRAMMAR_ENDINGS: tuple[str, ...] = _recipe("GRAMMAR_ENDINGS")
GRAMMAR_PROHIBITIONS: tuple[str, ...] = _recipe("GRAMMAR_PROHIBITIONS")
# More ways to forbid (``demo_training.contrast_pairs``): statements that ban the word ("{X} is off
# limits in {S}", "no {X} anywhere in {S}") and ways to forbid a command ("you may not {C}"). A model
# trained on matched pairs with the negations above alone kept the word out after those (0.07 of
# replies, as often as after a mention) but wrote it after 29-35% of the validation split's
# prohibitions; these were written after seeing that, so they are not blind to the validation
# split's *kind* of wording, though they carry none of its or the test split's markers.
GRAMMAR_BANS: tuple[str, ...] = _recipe("GRAMMAR_BANS")
GRAMMAR_NEGATORS: tuple[str, ...] = _recipe("GRAMMAR_NEGATORS")
# Command frames with a made-up verb ({V}: "zorbik the word X into the next story"): the verb says
# nothing, so an ask and its prohibition differ only in the negator, which is what has to carry
# over to a verb never seen ("Don't weave the word X ..." was written as often as "Please weave").
# Off by default (``--made-up-verbs``): one try with 30% of the command pairs so made wrote the
# word after 40-42% of the validation prohibitions at step 150, against 19-35% without them.
GRAMMAR_VERB_FRAMES: tuple[str, ...] = _recipe("GRAMMAR_VERB_FRAMES")
# An ask and its prohibition that differ only inside a clause about the story ("write {S} where {X}
# comes up" / "... where {X} never comes up", "keep {X} in {S}" / "keep {X} out of {S}"). Written
# after the step-160 validation check of the SmolLM2 adapter found that all its forbidden words came
# from two validation prohibitions of this kind ("keep X away from the story", "a story in which X
# never shows up"), obeyed as asks: the validation split is not blind to them (none of its or the
# test split's markers is in them). Off by default (``--clause-pairs``).
GRAMMAR_CLAUSE_PAIRS: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _recipe("GRAMMAR_CLAUSE_PAIRS"))
# An ask and its prohibition written as a label and the word ("Needed in {S}: {X}" / "Forbidden in
# {S}: {X}"), the negation far from the word. Written after the negator test set found the shipped
# SmolLM2 adapter writing the word after "Forbidden in the writing below: X." in 30 of 54 trials (and
# after no other of its prohibitions more than 7 times): the negator set is not blind to label
# wording; no held-out, validation or later test set's marker is in them. Off by default
# (``--label-pairs``).
GRAMMAR_LABEL_PAIRS: tuple[tuple[str, str], ...] = tuple(tuple(pair) for pair in _recipe("GRAMMAR_LABEL_PAIRS"))

# Generated asks and prohibitions (``--negation-pairs``): per family, frames with a polar slot {P}
# and (ask part, prohibition part) pairs ("{X} gets mentioned in {S} {P}": "at least once" / "zero
# times"; "{X} is {P} in {S}": "welcome" / "unwelcome"); every frame goes with every pair of its
# family, so one family gives frames x pairs wordings rather than a list's few. Written after the
# absence test set found the shipped adapter (and a retraining with label pairs) writing the word
# after "X gets mentioned zero times", "X is unwelcome in", "keep X clear of" and "give X no role
# whatsoever": the negator and absence sets are not blind to those kinds of wording; no held-out,
# validation or later test set's marker is in them. Off by default.
NEGATION_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]] = {
    name: (tuple(family["frames"]), tuple(tuple(pair) for pair in family["pairs"]))
    for name, family in _RECIPE["NEGATION_FAMILIES"].items()}
# Said before a generated statement, the same for the ask and the prohibition ("for the record, ...").
NEGATION_WRAPPERS: tuple[str, ...] = _recipe("NEGATION_WRAPPERS")

# The distinctive wording of each held-out phrasing. No training phrasing (template or grammar
# draw) contains one of these, so a held-out phrasing is new wording, not a recombination of
# trained parts.
HELDOUT_MARKERS: tuple[str, ...] = _recipe("HELDOUT_MARKERS")
