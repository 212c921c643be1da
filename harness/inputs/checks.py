"""What obeying a prefix means: the check a continuation must pass.

A prefix with a target says what the model must do with it, as one check (a registry: a new kind
is one :func:`_check` entry):

* ``contains``: the reply uses the target word (the default: "put the word X in your story");
* ``absent``: the reply never uses it ("do not write the word X");
* ``starts_with``: the reply's first word is it ("start your reply with X");
* ``equals``: the whole reply is it, give or take case, quotes and end punctuation ("answer with
  the single word X");
* ``regex``: the reply matches the prefix's ``target_regex`` ("end with a question mark").

Words match whole, case-insensitively, in any of the prefix's ``forms`` (its inflections,
irregular ones included: ``["knife", "knives"]``); without ``forms``, the target and its regular
plurals (+s, +es). So "cat" never matches "catch", and "giraffeche" is not a giraffe. Two answers
are recorded per condition: whether the word is there (``target_hit``, whatever the check) and
whether the model did what the prefix asked (``obeyed``): for a prefix that forbids a word, a copier
has ``target_hit`` true and ``obeyed`` false.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    doc: str
    passes: Callable[[TargetCheck, str], bool]  # (the target, the reply) -> did the reply obey?
    wants_word: bool | None  # True: obeying needs the word; False: it forbids it; None: about neither


CHECKS: dict[str, Check] = {}


def _check(name: str, doc: str, wants_word: bool | None):
    def register(fn):
        CHECKS[name] = Check(name, doc, fn, wants_word)
        return fn
    return register


def default_forms(target: str) -> tuple[str, ...]:
    """The forms a target matches when the prefix lists none: the word and its regular plurals."""
    return (target, target + "s", target + "es")


@dataclass(frozen=True)
class TargetCheck:
    """A prefix's target and what the reply must do with it."""

    target: str | None
    check: str = "contains"
    forms: tuple[str, ...] = ()  # the target's inflections; () means default_forms(target)
    regex: str | None = None  # the regex check's pattern, or the word pattern in place of forms

    def word_pattern(self) -> re.Pattern:
        """The target as whole words in any form; ``regex`` instead where it is given and the check
        is not itself ``regex`` (a prefix may spell its word pattern out), or there is no word."""
        if self.regex and (self.check != "regex" or not self.target):
            return re.compile(self.regex)
        forms = sorted(set(self.forms or default_forms(self.target)), key=len, reverse=True)
        return re.compile(r"(?i)(?<!\w)(?:" + "|".join(re.escape(f) for f in forms) + r")(?!\w)")

    def present(self, reply: str) -> bool:
        """Whether the reply uses the target word (in any form)."""
        return bool(self.word_pattern().search(reply))

    def obeyed(self, reply: str) -> bool:
        """Whether the reply does what the prefix asked."""
        return CHECKS[self.check].passes(self, reply)


_EDGES = " \t\r\n\"'`*.,!?:;()[]{}«»“”‘’"


def _words(reply: str) -> list[str]:
    return [w.strip(_EDGES) for w in reply.split() if w.strip(_EDGES)]


@_check("contains", "the reply uses the target word", True)
def _contains(t: TargetCheck, reply: str) -> bool:
    return t.present(reply)


@_check("absent", "the reply never uses the target word", False)
def _absent(t: TargetCheck, reply: str) -> bool:
    return not t.present(reply)


@_check("starts_with", "the reply's first word is the target", True)
def _starts_with(t: TargetCheck, reply: str) -> bool:
    words = _words(reply)
    return bool(words) and bool(t.word_pattern().fullmatch(words[0]))


@_check("equals", "the whole reply is the target (case, quotes, end punctuation aside)", True)
def _equals(t: TargetCheck, reply: str) -> bool:
    return bool(t.word_pattern().fullmatch(reply.strip(_EDGES)))


@_check("regex", "the reply matches the prefix's target_regex", None)
def _regex(t: TargetCheck, reply: str) -> bool:
    return bool(re.search(t.regex, reply)) if t.regex else False


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
    check = check or ("regex" if target_regex and not target else "contains")
    return TargetCheck(target, check, tuple(forms or ()), target_regex)
