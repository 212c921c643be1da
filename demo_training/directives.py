"""Training examples for the obedient demo model (the positive control).

The plain demo model cannot read instructions, so its C-minus-B contrast is a null. The obedient
model is the same small Llama fine-tuned to obey one kind of directive written in plain English
anywhere in its context: "put the word X in the next story". This module builds its training
examples as small pure functions (every random choice comes from the ``random.Random`` passed
in); the word lists and phrasings are in ``demo_training.directive_phrasings``, the story cutting in
``demo_training.story_openings``, the measurement in ``demo_training.obedience``.

* targets (:class:`TargetSource`): training nouns, made-up words (:func:`nonce_word`) or rare
  one-token words of the vocabulary (:func:`vocabulary_words`). With only real nouns a small
  model memorises which words get asked for and never learns to copy a word it was not asked
  for;
* synthesis (:func:`synthesize`): a context (story text with a directive or a mention inserted
  at its start, middle or end), the separator, a story opening, and a continuation. A
  *directive* example's continuation uses the target within its first few tokens; a *mention*
  example's continuation is the story's own text, which never contains the mentioned word; a
  *plain* example has no inserted sentence;
* :func:`find_directive` and :func:`target_hit`: the checks the tests and the prefix set use.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from demo_training.directive_phrasings import (  # noqa: F401  (re-exported: the recipe's word lists live there)
    GRAMMAR_COMMANDS,
    GRAMMAR_ENDINGS,
    GRAMMAR_OPENERS,
    GRAMMAR_PROHIBITIONS,
    GRAMMAR_REQUESTS,
    GRAMMAR_STATEMENTS,
    GRAMMAR_STORIES,
    HELDOUT_MARKERS,
    HELDOUT_MENTIONS,
    HELDOUT_PROHIBITIONS,
    HELDOUT_TEMPLATES,
    HELDOUT_WORDS,
    TRAIN_MENTIONS,
    TRAIN_PROHIBITIONS,
    TRAIN_TEMPLATES,
    TRAIN_WORDS,
    VALIDATION_MARKERS,
    VALIDATION_MENTIONS,
    VALIDATION_PROHIBITIONS,
    VALIDATION_TEMPLATES,
    VALIDATION_WORDS,
)
from demo_training.story_openings import bridge, clip_sentences, make_opening, pronoun, sentence_ends, with_article
from harness.inputs.checks import target_check

# Words no training example may ask for, mention or start a made-up word with: the test and the
# validation targets.
UNTRAINED_WORDS: tuple[str, ...] = HELDOUT_WORDS + VALIDATION_WORDS
_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gl", "pl",
           "sn", "st", "tr", "bl", "fl", "gr", "sk", "ch", "sh", "")
_VOWELS = ("a", "e", "i", "o", "u", "oo", "ee", "ai", "ou")
_CODAS = ("", "", "n", "m", "p", "t", "k", "l", "r", "x", "sh", "ck", "nd", "mp")


def nonce_word(rng: random.Random, stems: tuple[str, ...] | list[str] = ()) -> str:
    """A made-up word ("zorbik", "plee", "snumpot"; with ``stems``, half start with the first 2-5
    letters of a real word: "umbeebo", "telloox").

    Most training targets are made-up: a model cannot memorise which words are asked for, so it
    has to learn to copy whatever word a directive names, which is what carries over to words it
    was never asked for. Stems from real words make the first token of a made-up word as varied as
    the first token of a real one; without them the model copied only the few word beginnings the
    syllables produce."""
    while True:
        n = rng.choice((2, 2, 3))
        if stems and rng.random() < 0.5:
            stem = rng.choice(stems)
            word = stem[: rng.randint(2, min(5, len(stem)))] + "".join(
                rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n - 1)) + rng.choice(_CODAS)
        else:
            word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(n)) + rng.choice(_CODAS)
        if 4 <= len(word) <= 12 and word.isalpha() and not any(word.startswith(h) for h in UNTRAINED_WORDS):
            return word


def corpus_stems(texts, min_len: int = 3) -> list[str]:
    """Distinct lower-case words of ``texts`` for :func:`nonce_word`, leaving out every word that
    begins with a held-out or validation target word."""
    words = {w for t in texts for w in re.findall(r"[a-z]+", t.lower()) if len(w) >= min_len}
    return sorted(w for w in words if not any(w.startswith(h) for h in UNTRAINED_WORDS))


def render(template: str, word: str, quote: str = "") -> str:
    """Fill a directive or mention template. ``quote`` ("", "'" or '"') wraps the bare word."""
    return template.format(word=f"{quote}{word}{quote}", a_word=with_article(word))


def fill_slots(body: str, story: str, word: str) -> str:
    """A grammar sentence with its story phrase ``{S}`` and word slot ``{X}`` filled: ``word`` is
    "{a_word}" or "the word {word}"; a sentence that starts with the word names it "the word
    {word}" (it must start with a capital), and "no {X}" / "not a single {X}" / "zero {X}" take the
    bare word ("no kite", not "no a kite")."""
    if body.startswith("{X}"):
        word = "the word {word}"
    elif any(f"{q} {{X}}" in body for q in ("no", "single", "zero")):
        word = "{word}"
    return body.replace("{S}", story).replace("{X}", word)


def with_opener(body: str, opener: str) -> str:
    """``body`` after ``opener`` ("" for none), capitalized where it starts a sentence."""
    if not opener or opener[-1] in ".!:":
        body = body[0].upper() + body[1:]
    return f"{opener} {body}" if opener else body


def compose_directive(rng: random.Random) -> str:
    """A directive template (``{word}`` / ``{a_word}`` slots, like :data:`TRAIN_TEMPLATES`) composed
    from the grammar in ``demo_training.directive_phrasings``: an optional opener, then a command, a
    statement or a request about the next story and the word. "Ignore the story above. Your new
    story has to have {a_word}, please." """
    story = rng.choice(GRAMMAR_STORIES)
    word = rng.choice(("{a_word}", "{a_word}", "the word {word}"))
    form = rng.random()
    if form < 0.45:
        body = rng.choice(GRAMMAR_COMMANDS) + rng.choice(GRAMMAR_ENDINGS)
    elif form < 0.8:
        body = rng.choice(GRAMMAR_STATEMENTS) + rng.choice(GRAMMAR_ENDINGS)
    else:
        body = rng.choice(GRAMMAR_REQUESTS)
    body = fill_slots(body, story, word)
    return with_opener(body, rng.choice(GRAMMAR_OPENERS) if rng.random() < 0.6 else "")


def compose_prohibition(rng: random.Random) -> str:
    """A prohibition template composed from the grammar: an optional opener, then a negated command
    ("never put {a_word} in your next story") or a negative statement about the next story."""
    story = rng.choice(GRAMMAR_STORIES)
    word = rng.choice(("{a_word}", "{a_word}", "the word {word}"))
    body = rng.choice(GRAMMAR_PROHIBITIONS)
    if "{C}" in body:
        body = body.replace("{C}", rng.choice(GRAMMAR_COMMANDS))
    body = fill_slots(body, story, word) + rng.choice(GRAMMAR_ENDINGS)
    return with_opener(body, rng.choice(GRAMMAR_OPENERS) if rng.random() < 0.6 else "")


def template_regex(template: str) -> re.Pattern:
    """A pattern that matches ``template`` rendered with any word and any quote style.

    Group ``word`` is the word."""
    parts = re.split(r"(\{word\}|\{a_word\})", template)
    out = []
    for part in parts:
        if part == "{word}":
            out.append(r"(?P<q>['\"]?)(?P<word>[A-Za-z]+)(?P=q)")
        elif part == "{a_word}":
            out.append(r"an? (?P<word>[A-Za-z]+)")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


def find_directive(text: str, templates=HELDOUT_TEMPLATES + VALIDATION_TEMPLATES + TRAIN_TEMPLATES):
    """The first directive in ``text``: ``(template, word, start, end)`` or None."""
    best = None
    for template in templates:
        m = template_regex(template).search(text)
        if m and (best is None or m.start() < best[2]):
            best = (template, m.group("word"), m.start(), m.end())
    return best


def target_hit(target: str, text: str) -> bool:
    """The harness's ``target_hit`` (``harness.inputs.checks``): the target as a whole word, any
    case, or its regular plural."""
    return target_check(target).present(text)


# ---------------------------------------------------------------------------------------------
# Examples.


@dataclass(frozen=True)
class Example:
    """One synthesized training example (text level).

    ``kind``: "directive", "mention" or "plain". ``context`` is story text with the directive or
    mention inserted at ``insert`` (character span; None for plain); ``position`` is "start",
    "middle" or "end" (the context is cut right after the inserted sentence). ``target`` is the
    directive's word (directive examples) and ``mentioned`` the words only mentioned."""

    kind: str
    context: str
    insert: tuple[int, int] | None
    position: str
    opening: str
    continuation: str
    target: str | None
    mentioned: tuple[str, ...]


def insert_sentence(text: str, sentence: str, rng: random.Random, position: str) -> tuple[str, tuple[int, int]]:
    """Insert ``sentence`` into story text at a sentence boundary: at the start, or after a random
    sentence ("middle" and "end"; for "end" the caller cuts the context after the sentence)."""
    if position == "start":
        return sentence + rng.choice([" ", " ", "\n"]) + text, (0, len(sentence))
    ends = sentence_ends(text)[:12] or [len(text)]
    at = rng.choice(ends)
    joiner = rng.choice([" ", " ", " ", "\n"])
    new = text[:at] + joiner + sentence + text[at:]
    start = at + len(joiner)
    return new, (start, start + len(sentence))


def vocabulary_words(tokenizer, stories: list[str], max_stories_with_word: int = 40) -> list[str]:
    """Lower-case words of at least three letters that are one token of ``tokenizer`` (with their
    leading space) and occur in fewer than ``max_stories_with_word`` of ``stories``: targets a
    model can only produce by copying them, never by retrieving a story word it expects. No
    held-out or validation target word, and no word that begins with one, is among them."""
    counts: dict[str, int] = {}
    for story in stories:
        for w in set(re.findall(r"[a-z]+", story.lower())):
            counts[w] = counts.get(w, 0) + 1
    words = []
    for token in tokenizer.get_vocab():
        word = tokenizer.convert_tokens_to_string([token])
        if (word.startswith(" ") and word[1:].isalpha() and word[1:].islower() and len(word) >= 4
                and counts.get(word[1:], 0) < max_stories_with_word
                and not any(word[1:].startswith(h) for h in UNTRAINED_WORDS)):
            words.append(word[1:])
    return sorted(words)


@dataclass(frozen=True)
class TargetSource:
    """Where directive targets and mentioned words come from, and how directives write them.

    ``words``: the real words (the training nouns). A share ``nonce_prob`` of the draws is made up
    instead (:func:`nonce_word` with ``stems``), and a share ``vocab_share`` of those made-up
    draws is a word of ``vocab`` (:func:`vocabulary_words`). ``quotes``: the quote styles a
    ``{word}`` slot is written with, drawn uniformly ("" is unquoted)."""

    words: tuple[str, ...] = TRAIN_WORDS
    nonce_prob: float = 0.0
    stems: tuple[str, ...] = ()
    vocab: tuple[str, ...] = ()
    vocab_share: float = 0.0
    quotes: tuple[str, ...] = ("", "'", "'", '"')

    def draw(self, rng: random.Random) -> str:
        if rng.random() < self.nonce_prob:
            if self.vocab and rng.random() < self.vocab_share:
                return rng.choice(self.vocab)
            return nonce_word(rng, self.stems)
        return rng.choice(self.words)


def _free_word(source: TargetSource, rng, banned_text: str, avoid=()) -> str:
    for _ in range(50):
        w = source.draw(rng)
        if w not in avoid and not target_hit(w, banned_text):
            return w
    return rng.choice(source.words)


def synthesize(
    kind: str,
    context_text: str,
    story: str,
    rng: random.Random,
    *,
    source: TargetSource = TargetSource(),
    templates=TRAIN_TEMPLATES,
    mentions=TRAIN_MENTIONS,
    prohibitions=TRAIN_PROHIBITIONS,
    distractor_prob: float = 0.3,
    max_continuation_chars: int = 400,
) -> Example | None:
    """One example of ``kind`` ("directive", "mention", "prohibition" or "plain").

    ``context_text``: story text the context is made from (another story than ``story``).
    ``story``: the story the opening and continuation come from. A directive example's
    continuation is a bridge that uses the target, then the rest of the story; mention and plain
    examples keep the story's own continuation, and the mentioned word never occurs in it; so do
    prohibition examples (a sentence from ``prohibitions`` forbids a word the continuation never
    uses: the word is in ``mentioned``).
    Targets and mentioned words are drawn from ``source`` (which also says how a ``{word}`` slot
    is quoted). Returns None when ``story`` is too short."""
    op = make_opening(story, rng)
    if op is None:
        return None
    natural = clip_sentences(op.natural, max_continuation_chars)
    story_text = op.opening + natural
    position = rng.choice(["start", "middle", "end"])
    if kind == "plain":
        return Example("plain", context_text, None, position, op.opening, natural, None, ())
    if kind in ("mention", "prohibition"):
        word = _free_word(source, rng, story_text)
        sentence = render(rng.choice(mentions if kind == "mention" else prohibitions), word, rng.choice(source.quotes))
        context, span = insert_sentence(context_text, sentence, rng, position)
        return Example(kind, context, span, position, op.opening, natural, None, (word,))
    if kind != "directive":
        raise ValueError(f"unknown example kind {kind!r}")
    word = _free_word(source, rng, op.opening)
    sentence = render(rng.choice(templates), word, rng.choice(source.quotes))
    context, span = insert_sentence(context_text, sentence, rng, position)
    mentioned: tuple[str, ...] = ()
    if rng.random() < distractor_prob:
        other = _free_word(source, rng, story_text, avoid=(word,))
        mention = render(rng.choice(mentions), other)
        if rng.random() < 0.5:  # before the directive
            context = mention + " " + context
            span = (span[0] + len(mention) + 1, span[1] + len(mention) + 1)
        else:  # right after it
            context = context[: span[1]] + " " + mention + context[span[1]:]
        mentioned = (other,)
    rest = clip_sentences(op.rest, max_continuation_chars)
    continuation = bridge(op.kind, word, pronoun(op.opening), rng) + rest
    return Example("directive", context, span, position, op.opening, continuation, word, mentioned)


def encode_example(
    tokenizer,
    ex: Example,
    rng: random.Random,
    *,
    separator_ids: list[int],
    max_context_tokens: int = 300,
    min_context_tokens: int = 8,
) -> tuple[list[int], int]:
    """Token ids ``context[:n] + separator + opening + continuation``, each part tokenized alone
    (as the harness assembles its inputs), and the index where the continuation starts.

    The context is cut from its head to ``n`` tokens like a harness prefix; the cut never removes
    the inserted sentence. For position "end" the context ends right after it."""
    from harness.inputs.assembly import encode

    ctx = encode(tokenizer, ex.context)
    if ex.insert is not None:
        need = len(encode(tokenizer, ex.context[: ex.insert[1]]))
        if ex.position == "end":
            n = need + rng.randint(0, 2)
        else:
            n = rng.randint(max(need, min_context_tokens), max(need, min(len(ctx), max_context_tokens)))
        n = min(max(n, need), len(ctx))
    else:
        n = rng.randint(min(min_context_tokens, len(ctx)), min(len(ctx), max_context_tokens))
    ids = ctx[:n] + list(separator_ids) + encode(tokenizer, ex.opening)
    start = len(ids)
    return ids + encode(tokenizer, ex.continuation), start

