"""What obeying a prefix means: the check a continuation must pass.

A prefix with a target says what the model must do with it, as one check (a registry: a new kind
is one :func:`_check` entry):

* ``contains``: the reply uses the target word (the default: "put the word X in your story");
* ``absent``: the reply never uses it ("do not write the word X");
* ``starts_with``: the reply opens with it ("start your reply with X"), after any leading edge
  characters (below);
* ``equals``: the whole reply is it, edge characters aside on both sides ("answer with the
  single word X");
* ``regex``: the reply, as written, matches the prefix's ``target_regex`` ("end with a question
  mark").

Two answers are recorded per condition: whether the word is there (``target_hit``, whatever the
check) and whether the model did what the prefix asked (``obeyed``): for a prefix that forbids a
word, a copier has ``target_hit`` true and ``obeyed`` false.

How a word is found, the same for all four word checks (so ``equals`` implies ``starts_with``,
which implies ``contains``, and ``absent`` is exactly not ``contains``):

* Forms. The prefix's ``forms`` where it lists them, and only those (irregular ones included:
  ``["cactus", "cacti", "cactuses"]``). Otherwise the target and its plural as the ``inflect``
  library spells it for the last word in lower case (hat: hats, city: cities, box: boxes, knife:
  knives, mouse: mice, ice cream: ice creams, mother-in-law: mothers-in-law). A target gets no
  plural when it does not end in a letter (17, Policy 7B, Have a sunny day!), when its last word
  holds anything but letters, hyphens and apostrophes, when the plural would only add "s" to a
  final "s" (glasses, cats: already plural), or when the plural begins with another letter (a
  pronoun's: I, we). There is no blind "+es": hat never matches "hates", nor car "cares".
* Text. Reply and forms alike are put in Unicode NFC, the apostrophes ’ and ʼ become ', runs of
  markdown markers (``* _ ~ ```) are dropped unless they sit between two letters or digits (so
  ``_umbrella_`` and ``**umbrella**`` read as umbrella, ``snake_case`` keeps its underscore), and
  everything is casefolded (then NFC again): "CAFÉ", "café" and "cafe\u0301" are one word, and
  "STRASSE" is "straße". A form also loses its edge characters, so "Have a sunny day!" is the
  words "have a sunny day".
* Whole words. A form matches where no letter, digit or combining mark touches it on either side
  (an underscore, hyphen, apostrophe or any punctuation does not: "Banana's", "penguin-like" and
  "umbrella_count" hold the word; "catch", "bobcat" and "trumpeter" do not hold cat or trumpet).
  Where a space or hyphen separates two words of a form, any run of whitespace or one hyphen
  matches it ("ice  cream", "ice\\ncream", "ice-cream"; a hyphen is - or ‐ or ‑).
* Whole numbers. Where a form begins or ends with a digit, a number it is part of hides it: no
  digit before or after, no "." or "," between it and another digit ("3.17", "42.195" and
  "1,365" hold no 17, 42 or 365), and no "." right before it unless a letter or another "."
  precedes that ("a p-value of .42" holds no 42; "p.17" and "wait...42" do hold theirs).
* Edge characters, skipped before the first word for ``starts_with`` and around the reply for
  ``equals``: whitespace, quotes, brackets, markdown markers and the punctuation . , ! ? : ; …
  ¿ ¡ ("HONK…", "'Quokka.'", "**1066**" each equal their target).

A ``target_regex`` given with a word check (or alone, when the check is not ``regex``) stands in
for the forms: it is searched in the reply after NFC, the apostrophes and the markers, but not
casefolded (the pattern says its own case rules), with the same edges for ``starts_with`` and
``equals``. The ``regex`` check itself reads the reply exactly as written.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import regex as bounded_re  # a user's target_regex runs here: with a time limit, and without re's worst backtracking

from harness.errors import HarnessError

REGEX_SECONDS = 1.0  # the most one target_regex may take on one reply


class BoundedPattern:
    """A user's ``target_regex``, compiled by the ``regex`` module and searched with a time limit:
    a pattern that backtracks without end is one error naming it, not a sweep that never ends."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        try:
            self.compiled = bounded_re.compile(pattern)
        except bounded_re.error as exc:
            raise ValueError(f"target_regex is not a valid regular expression ({exc})") from None
        if self._bounded("search", "", 0) is not None:  # found in every reply, even an empty one: it cannot fail
            raise ValueError(f"target_regex {pattern!r} matches the empty string, so every reply would pass it: "
                             f"require at least one character (e.g. + where it has *)")

    def _bounded(self, method: str, *args):
        try:
            return getattr(self.compiled, method)(*args, timeout=REGEX_SECONDS)
        except TimeoutError:
            raise HarnessError(f"target_regex {self.pattern!r} took more than {REGEX_SECONDS:g} s on one reply "
                               f"(nested repetition backtracks without end): rewrite it") from None

    def search(self, text: str, pos: int = 0):
        return self._bounded("search", text, pos)

    def match(self, text: str, pos: int = 0):
        return self._bounded("match", text, pos)

    def fullmatch(self, text: str, pos: int = 0, endpos: int | None = None):
        return self._bounded("fullmatch", text, pos, len(text) if endpos is None else endpos)


@dataclass(frozen=True)
class Check:
    name: str
    doc: str
    passes: Callable[[TargetCheck, str], bool]  # (the target, the reply) -> did the reply obey?
    wants_word: bool | None  # True: obeying needs the word; False: it forbids it; None: about neither


# The checks' rules as above; a change to what they accept bumps it, so that results judged by
# earlier rules (stored with their obeyed and target_hit answers) are recomputed, never mixed in.
CHECKS_VERSION = 2

CHECKS: dict[str, Check] = {}


def _check(name: str, doc: str, wants_word: bool | None):
    def register(fn):
        CHECKS[name] = Check(name, doc, fn, wants_word)
        return fn
    return register


@functools.lru_cache(maxsize=1)
def _inflect():
    import inflect  # imported on first use: it takes a second or more to import (typeguard instruments it)

    return inflect.engine()


@functools.lru_cache(maxsize=4096)
def default_forms(target: str) -> tuple[str, ...]:
    """The forms a target matches when the prefix lists none: the target and its plural (see the
    module docstring for which targets have one)."""
    target = unicodedata.normalize("NFC", target)
    head, last = re.fullmatch(r"(.*?)(\S*)", target.rstrip(), re.S).groups()
    if not last[-1:].isalpha() or not all(c.isalpha() or c in "-'\u2019" for c in last):
        return (target,)
    word = last.lower()
    plural = _inflect().plural_noun(word)
    if (not plural or plural == word or plural[0] != word[0]
            or (word.endswith("s") and plural == word + "s")):
        return (target,)
    return (target, head + plural)


_APOSTROPHES = str.maketrans({"\u2019": "'", "\u02bc": "'"})
_MARKERS = re.compile(r"[*_~`]+")
_EDGE_CHARS = frozenset("\"'`*_~.,!?:;()[]{}«»“”‘’„‚‹›…¿¡")


def _drop_markers(m: re.Match) -> str:
    text, i, j = m.string, m.start(), m.end()
    inside = i > 0 and j < len(text) and text[i - 1].isalnum() and text[j].isalnum()
    return m.group() if inside else ""


def clean(text: str) -> str:
    """``text`` in NFC, with ’ and ʼ as ' and without markdown markers (those not between two
    letters or digits): what a ``target_regex`` word pattern reads."""
    return _MARKERS.sub(_drop_markers, unicodedata.normalize("NFC", text).translate(_APOSTROPHES))


def fold(text: str) -> str:
    """``clean(text)`` casefolded, in NFC: what the forms' word pattern reads."""
    return unicodedata.normalize("NFC", clean(text).casefold())


def _is_edge(c: str) -> bool:
    return c.isspace() or c in _EDGE_CHARS


def _lead(text: str) -> int:
    """Where the first character that is not an edge character stands."""
    i = 0
    while i < len(text) and _is_edge(text[i]):
        i += 1
    return i


def _trail(text: str) -> int:
    """Where the run of edge characters that ends ``text`` begins."""
    j = len(text)
    while j > 0 and _is_edge(text[j - 1]):
        j -= 1
    return j


_MARKS = r"\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"  # combining marks
_WORD_BEFORE = rf"(?<![^\W_])(?<![{_MARKS}])"  # no letter, digit or mark just before
_WORD_AFTER = rf"(?![^\W_])(?![{_MARKS}])"
_NUMBER_BEFORE = r"(?<!\d[.,])(?<![^\w.][.])(?<!^[.])"  # not 3.17, 1,365, .42 (p.17 and ...42 are fine)
_NUMBER_AFTER = r"(?![.,]\d)"  # not 42.195, 42,000
_HYPHENS = r"\-\u2010\u2011"  # for a character class
_SEPARATOR = rf"(?:\s+|[{_HYPHENS}])"  # where a form has a space or a hyphen between two words


def _form_regex(form: str) -> str:
    core = fold(form)
    core = core[_lead(core):_trail(core)] or core
    words = [w for w in re.split(rf"[\s{_HYPHENS}]+", core) if w]
    body = _SEPARATOR.join(map(re.escape, words)) or re.escape(core)
    before = _WORD_BEFORE + (_NUMBER_BEFORE if core[0].isdigit() else "")
    after = _WORD_AFTER + (_NUMBER_AFTER if core[-1].isdigit() else "")
    return before + body + after


@functools.lru_cache(maxsize=4096)
def _word_pattern(t: TargetCheck) -> re.Pattern | BoundedPattern:
    if t.uses_regex:
        return BoundedPattern(t.regex)
    forms = sorted(set(t.forms or default_forms(t.target)), key=len, reverse=True)
    return re.compile("|".join(f"(?:{_form_regex(f)})" for f in forms), re.IGNORECASE)


@dataclass(frozen=True)
class TargetCheck:
    """A prefix's target and what the reply must do with it."""

    target: str | None
    check: str = "contains"
    forms: tuple[str, ...] = ()  # the target's inflections; () means default_forms(target)
    regex: str | None = None  # the regex check's pattern, or the word pattern in place of forms

    @property
    def uses_regex(self) -> bool:
        """Whether ``regex`` stands in for the forms: given, and the check is not itself ``regex``
        (a prefix may spell its word pattern out), or there is no word."""
        return bool(self.regex) and (self.check != "regex" or not self.target)

    def word_pattern(self) -> re.Pattern:
        """The target as whole words in any form, to search in :meth:`read` of a reply; ``regex``
        instead where :attr:`uses_regex`."""
        return _word_pattern(self)

    def read(self, reply: str) -> str:
        """The reply as the word pattern reads it: :func:`fold` for forms, :func:`clean` for a regex."""
        return clean(reply) if self.uses_regex else fold(reply)

    def present(self, reply: str) -> bool:
        """Whether the reply uses the target word (in any form)."""
        return bool(self.word_pattern().search(self.read(reply)))

    def obeyed(self, reply: str) -> bool:
        """Whether the reply does what the prefix asked."""
        return CHECKS[self.check].passes(self, reply)


@_check("contains", "the reply uses the target word", True)
def _contains(t: TargetCheck, reply: str) -> bool:
    return t.present(reply)


@_check("absent", "the reply never uses the target word", False)
def _absent(t: TargetCheck, reply: str) -> bool:
    return not t.present(reply)


@_check("starts_with", "the reply opens with the target word (leading quotes, markup, punctuation aside)", True)
def _starts_with(t: TargetCheck, reply: str) -> bool:
    text = t.read(reply)
    return bool(t.word_pattern().match(text, _lead(text)))


@_check("equals", "the whole reply is the target word (case, quotes, markup, edge punctuation aside)", True)
def _equals(t: TargetCheck, reply: str) -> bool:
    text = t.read(reply)
    start, end = _lead(text), _trail(text)
    return start < end and bool(t.word_pattern().fullmatch(text, start, end))


@_check("regex", "the reply matches the prefix's target_regex", None)
def _regex(t: TargetCheck, reply: str) -> bool:
    return bool(BoundedPattern(t.regex).search(reply)) if t.regex else False


def bad_forms(forms) -> bool:
    """Whether a prefix's ``forms`` field is not what it must be: a list of non-empty strings (a
    string would be read letter by letter)."""
    return not isinstance(forms, (list, tuple)) or not all(isinstance(f, str) and f.strip() for f in forms)


def target_check(target: str | None, target_regex: str | None = None, check: str | None = None,
                 forms=()) -> TargetCheck | None:
    """The check of a prefix's fields; None for a prefix without a target. ``check`` defaults to
    ``contains`` (``regex`` when only ``target_regex`` is given). A ValueError says what is wrong
    with the fields (the prefix readers add where)."""
    if check and check not in CHECKS:
        raise ValueError(f"check {check!r} is not one of {sorted(CHECKS)}")
    if not target and not target_regex:
        if check:
            raise ValueError("a check needs a target (or target_regex) to check")
        return None
    if check == "regex" and not target_regex:
        raise ValueError("the regex check needs a target_regex")
    if bad_forms(forms or ()):
        raise ValueError(f"forms must be a list of non-empty strings (the target's inflections, e.g. "
                         f'["knife", "knives"]), got {forms!r}')
    if forms and target_regex and check != "regex":  # the regex stands in for the forms: one would be dropped
        raise ValueError("forms and target_regex both say which spellings count, and the regex would replace the "
                         "forms without a word: give one of them")
    if target_regex:
        BoundedPattern(target_regex)  # a ValueError where it does not compile
    for name, text in (("target", target), *(("forms", f) for f in forms or ()), ("target_regex", target_regex)):
        hidden = [c for c in text or "" if unicodedata.category(c) == "Cf" or (unicodedata.category(c) == "Cc"
                                                                               and name != "target_regex")]
        if hidden:
            raise ValueError(f"{name} {text!r} holds an invisible or bidirectional control character "
                             f"(U+{ord(hidden[0]):04X}): a reply can never be checked against it as meant; remove it")
    check = check or ("regex" if target_regex and not target else "contains")
    made = TargetCheck(target, check, tuple(forms or ()), target_regex)
    if forms and not made.uses_regex and target and not made.present(target):  # as the regex's below
        raise ValueError(f"forms {list(forms)!r} do not include the target {target!r} itself: the forms are every "
                         f"spelling a reply is checked for, so a reply with the word would not count; add it")
    if made.uses_regex and target and not made.present(target):  # the tables and the report name the word
        raise ValueError(f"target_regex {target_regex!r} does not find its own target {target!r}: the regex stands in "
                         f"for the word's forms, so a reply with the word would not count; make them agree")
    return made
