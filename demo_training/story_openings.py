"""Story surgery for the obedient model's training examples: sentence ends, the main pronoun, a
story cut into an opening and its continuation (cut the way the harness's story prompts are), and
short bridges that use a target word right after an opening. Pure functions of text and the
``random.Random`` passed in."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_A_NOT_AN = ("uni", "use", "uti", "eu", "one")


def with_article(word: str) -> str:
    """``word`` with its indefinite article: "an umbrella", "a unicorn", "a kite"."""
    vowel = word[0].lower() in "aeiou" and not word.lower().startswith(_A_NOT_AN)
    return ("an " if vowel else "a ") + word


_SENTENCE_END = re.compile(r"[.!?][\"\u201d']?(?=\s|$)")


def sentence_ends(text: str) -> list[int]:
    """Character offsets just after each sentence end (a ., ! or ? with its closing quote)."""
    return [m.end() for m in _SENTENCE_END.finditer(text)]


def pronoun(text: str) -> str:
    """The story's main pronoun: "she", "he" or "they", by counting."""
    she = len(re.findall(r"\b(she|her)\b", text, re.I))
    he = len(re.findall(r"\b(he|his|him)\b", text, re.I))
    if max(she, he) == 0:
        return "they"
    return "she" if she >= he else "he"


# Ways to say the target right after an opening, by how the opening ends. {p}/{P}: pronoun.
BRIDGES: dict[str, tuple[str, ...]] = {
    "boundary": (
        "{P} saw {a_w}.", "Then {p} found {a_w}.", "There was {a_w} in the yard.", "{P} had {a_w}.",
        "One day, {p} found {a_w}.", "Suddenly, {a_w} appeared.", "{P} wanted {a_w}.",
        "Next to the house was {a_w}.", "{P} looked up and saw {a_w}.", "It was {a_w}!",
    ),
    "time": (
        " {p} saw {a_w}.", " {p} found {a_w}.", " there was {a_w} in the yard.", " {p} got {a_w}.",
        " {a_w} came to visit.", " {p} saw a big {w}.", " {p} played with {a_w}.",
        " {p} made {a_w}.", " {p} went to look for {a_w}.",
    ),
    "verb": (" {a_w}.", " a big {w}.", " a little {w}.", " {a_w} in the garden.", " the {w}.", " a shiny {w}."),
    "and": (" saw {a_w}.", " found {a_w}.", " played with {a_w}.", " picked up {a_w}.", " got {a_w}."),
    "so": (" {p} looked for {a_w}.", " {p} went to find {a_w}.", " {p} asked for {a_w}.", " {p} took {a_w}."),
    "said": (' "Look, {a_w}!"', ' "I want {a_w}!"', ' "Let\'s find {a_w}!"', ' "Can I have {a_w}?"',
             ' "I see {a_w}!"', ' "Where is the {w}?"'),
    "subject": (" saw {a_w}.", " found {a_w}.", " wanted {a_w}.", " had {a_w}.", " made {a_w}."),
}

_TIME = re.compile(
    r"^(One (?:sunny |cold |rainy |warm )?(?:day|morning|night|evening|afternoon)|Every (?:day|morning|night)|"
    r"Then|Suddenly|But then|After that|Soon|Later|That night|The next day|At night|Now),"
)
_VERB = re.compile(
    r"\b(saw|found|met|had|got|wanted|bought|made|picked up|was|took|gave|heard|liked|loved|see|find|get)"
    r"(?= (?:a|an|the|some|his|her|their|many|lots)\b)"
)
_SAID = re.compile(r"\b(said|asked|shouted|cried|replied|yelled|whispered),(?= [\"\u201c])")
_AND = re.compile(r"\w and\b")
_SO = re.compile(r"\w,? so\b")
_SUBJECT = re.compile(r"^(He|She|They)\b")


@dataclass(frozen=True)
class Opening:
    """A story cut into an opening and its own continuation.

    ``kind`` says how the opening ends (a key of :data:`BRIDGES`); ``rest`` is the story after the
    sentence the cut falls in (what a bridge is followed by), starting with its whitespace."""

    opening: str
    natural: str
    kind: str
    rest: str


def make_opening(story: str, rng: random.Random, max_sentences: int = 3) -> Opening | None:
    """Cut a story after 1-3 sentences, either at the sentence end or a few words into the next
    sentence ("One day,", "... and", "... said,", "... found"), like the harness's story prompts."""
    ends = sentence_ends(story)
    if len(ends) < 4:
        return None
    candidates = []  # (kind, k, cut offset); k = sentences before the cut's sentence
    for k in range(1, min(max_sentences, len(ends) - 3) + 1):
        start = ends[k - 1]
        nxt = story[start:ends[k]]
        body_start = start + len(nxt) - len(nxt.lstrip())  # where sentence k+1 begins
        body = story[body_start:ends[k]]
        candidates.append(("boundary", k, start))
        m = _TIME.match(body)
        if m:
            candidates += [("time", k, body_start + m.end())] * 2
        for kind, pat in (("verb", _VERB), ("said", _SAID), ("and", _AND), ("so", _SO)):
            m = pat.search(body)
            if m and m.end() < len(body) - 3:
                candidates += [(kind, k, body_start + m.end())] * (3 if kind == "said" else 1)
        m = _SUBJECT.match(body)
        if m:
            candidates.append(("subject", k, body_start + m.end()))
    kind, k, cut = rng.choice(candidates)
    rest_from = ends[k - 1] if kind == "boundary" else ends[k]
    return Opening(story[:cut].rstrip(), story[cut:], kind, story[rest_from:])


def bridge(kind: str, word: str, pron: str, rng: random.Random) -> str:
    """A short phrase that uses ``word`` and fits after an opening of this kind."""
    text = rng.choice(BRIDGES[kind]).format(
        a_w=with_article(word), w=word, p=pron, P=pron.capitalize()
    )
    if kind == "boundary":
        text = " " + text[0].upper() + text[1:]
    return text


def clip_sentences(text: str, max_chars: int) -> str:
    """The whole sentences of ``text`` that fit in about ``max_chars`` (at least one)."""
    ends = [e for e in sentence_ends(text) if e <= max_chars] or sentence_ends(text)[:1]
    return text[: ends[-1]] if ends else text

