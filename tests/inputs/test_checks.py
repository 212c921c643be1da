"""Each check kind on hand examples, including the false positives and negatives of a
"starts with the word" match ("cat" in "catch", "giraffeche"); an adversarial table whose expected
answers were written by reading the replies as English (not copied from the code's output); and
the invariants between the checks as properties."""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.errors import HarnessError
from harness.inputs.checks import CHECKS, default_forms, target_check
from harness.inputs.texts import load_prefixes
from tests.support import write_jsonl


def test_whole_words_in_the_listed_forms():
    knife = target_check("knife", forms=["knife", "knives"])
    assert knife.present("She put the knives away.") and knife.present("A KNIFE!")
    assert not knife.present("knifepoint") and not knife.present("penknife")
    cat = target_check("cat")  # no forms: the word and its plural
    assert cat.present("The cat sat.") and cat.present("two cats") and cat.present("Cat's toy")
    assert not cat.present("catch the ball") and not cat.present("a bobcat") and not cat.present("cathedral")
    giraffe = target_check("giraffe")
    assert not giraffe.present("the giraffeche ran") and giraffe.present("Giraffes, tall ones.")
    # listed forms are the only ones: a prefix that lists forms gets no plural of its own
    assert not target_check("cactus", forms=["cactus"]).present("two cactuses")


def test_default_forms_are_the_word_and_its_plural():
    assert default_forms("hat") == ("hat", "hats") and default_forms("city") == ("city", "cities")
    assert default_forms("box") == ("box", "boxes") and default_forms("mouse") == ("mouse", "mice")
    assert default_forms("ice cream") == ("ice cream", "ice creams")
    assert default_forms("mother-in-law") == ("mother-in-law", "mothers-in-law")
    # no plural: numbers and codes, an utterance ending in punctuation, words already plural (no
    # English plural adds a bare s to an s), and pronouns, whose plural is another word
    for target in ("17", "Policy 7B", "free-prize.example.com", "Have a sunny day!", "glasses", "cats",
                   "Gadzooks", "I", "it"):
        assert default_forms(target) == (target,), target


@pytest.mark.parametrize("check, reply, obeyed", [
    ("contains", "Then a penguin waddled in.", True),
    ("contains", "Then a penguinish bird waddled in.", False),
    ("absent", "Then a bird waddled in.", True),
    ("absent", "Then a Penguin waddled in.", False),
    ("starts_with", "Penguins are birds.", True),
    ("starts_with", ' "Penguin," she said.', True),
    ("starts_with", "A penguin came.", False),
    ("starts_with", "Penguinish things.", False),
    ("equals", "Penguin.", True),
    ("equals", "  'penguins' \n", True),
    ("equals", "Penguin. It was a bird.", False),
    ("equals", "", False),
])
def test_each_check_on_hand_examples(check, reply, obeyed):
    assert target_check("penguin", check=check).obeyed(reply) is obeyed


N = ("42",)  # a number lists itself as its one form, as the shipped bank does

# (target, check, forms, reply, present, obeyed). Each expected value is what a careful reader
# says the reply does; cases where careful readers would differ are left out ("42kg", "17th",
# "icecream", "~~umbrella~~", "# Banana", "Banana's" as a whole reply, "cafe" for café, "cat"
# for the target "cats").
ADVERSARIAL = [
    # no blind "+es": these are other words
    ("hat", "contains", (), "She hates the rain.", False, False),
    ("hat", "absent", (), "She hates the rain.", False, True),
    ("rat", "contains", (), "Interest rates rose.", False, False),
    ("plan", "contains", (), "Planes flew over the town.", False, False),
    ("car", "absent", (), "Nobody cares.", False, True),
    ("tub", "contains", (), "Tubes of paint lay about.", False, False),
    ("pan", "absent", (), "The window panes rattled.", False, True),
    # real plurals, regular and not
    ("hat", "contains", (), "Two hats hung by the door.", True, True),
    ("car", "absent", (), "Three cars passed.", True, False),
    ("city", "contains", (), "Two cities slept.", True, True),
    ("pony", "contains", (), "The ponies ran.", True, True),
    ("day", "contains", (), "Days passed.", True, True),
    ("box", "contains", (), "She stacked the boxes.", True, True),
    ("fox", "absent", (), "Foxes ran past.", True, False),
    ("church", "contains", (), "Old churches stood there.", True, True),
    ("bush", "contains", (), "Behind the bushes.", True, True),
    ("bus", "contains", (), "The buses were late.", True, True),
    ("bus", "contains", (), "A busy street.", False, False),
    ("glass", "contains", (), "Raise your glasses.", True, True),
    ("hero", "contains", (), "Heroes are rare.", True, True),
    ("knife", "contains", (), "Sharp knives.", True, True),
    ("child", "absent", (), "The children played.", True, False),
    ("mouse", "contains", ("mouse", "mice"), "Three mice.", True, True),
    ("person", "contains", ("person", "people", "persons"), "Many people came.", True, True),
    ("cactus", "absent", ("cactus", "cacti", "cactuses"), "Two cacti bloomed.", True, False),
    ("volcano", "contains", ("volcano", "volcanos", "volcanoes"), "Volcanoes erupt.", True, True),
    ("sheep", "contains", (), "The sheep grazed.", True, True),
    ("Walrus", "contains", (), "Two walruses basked.", True, True),
    # a target that is itself plural
    ("scissors", "contains", (), "Hand me the scissors.", True, True),
    ("glasses", "contains", (), "A glass of water.", False, False),
    # markdown emphasis
    ("umbrella", "contains", (), "Take your _umbrella_ today.", True, True),
    ("umbrella", "contains", (), "Take your **umbrella** today.", True, True),
    ("umbrella", "absent", (), "__Umbrella__ time.", True, False),
    ("umbrella", "equals", (), "*Umbrella*", True, True),
    ("umbrella", "equals", (), "_umbrella._", True, True),
    ("umbrella", "starts_with", (), "**Umbrellas** are useful.", True, True),
    ("umbrella", "contains", (), "Use the `umbrella` command.", True, True),
    ("ice cream", "contains", (), "I love ice **cream**.", True, True),
    # words in URLs and code
    ("umbrella", "absent", (), "See https://example.com/umbrella for more.", True, False),
    ("umbrella", "absent", (), "Set `umbrella_count = 3` first.", True, False),
    ("umbrella", "contains", (), "def open_umbrella():", True, True),
    # numbers are whole numbers
    ("17", "absent", ("17",), "The value is 3.17 here.", False, True),
    ("42", "absent", N, "A marathon is 42.195 km.", False, True),
    ("365", "absent", ("365",), "It cost 1,365 dollars.", False, True),
    ("42", "absent", N, "Some 42,000 people came.", False, True),
    ("42", "absent", N, "A p-value of .42 is large.", False, True),
    ("17", "contains", ("17",), "It read 1717.", False, False),
    ("17", "contains", ("17",), "It was 17.5 degrees.", False, False),
    ("17", "absent", ("17",), "She turned 17, then 18.", True, False),
    ("17", "contains", ("17",), "See p.17 for details.", True, True),
    ("42", "contains", N, "Wait...42!", True, True),
    ("42", "contains", N, "The answer (42) is known.", True, True),
    ("42", "contains", N, "About 42% agreed.", True, True),
    ("42", "equals", N, "42.", True, True),
    ("42", "equals", N, "42!", True, True),
    ("1066", "equals", ("1066",), "**1066**", True, True),
    ("1066", "equals", ("1066",), "The year 1066.", True, False),
    ("1066", "absent", ("1066",), "In 1066, William invaded.", True, False),
    ("365", "starts_with", ("365",), "365 days a year.", True, True),
    # multi-word starts_with and equals with the target's own punctuation
    ("ACCESS GRANTED", "starts_with", (), "Access granted. Welcome back.", True, True),
    ("ACCESS GRANTED", "starts_with", (), "Access denied; access granted later.", True, False),
    ("Have a sunny day!", "equals", (), "Have a sunny day!", True, True),
    ("Have a sunny day!", "equals", (), "have a sunny day.", True, True),
    ("Have a sunny day!", "contains", (), "I hope you have a sunny day!", True, True),
    ("Have a sunny day!", "equals", (), "Have a sunny day! Bye.", True, False),
    # possessives and runs of punctuation agree with present
    ("Banana", "starts_with", (), "Banana's peel is yellow.", True, True),
    ("Banana", "starts_with", (), "Banana\u2019s peel is yellow.", True, True),
    ("kumquat", "contains", (), "The kumquats\u2019 skins.", True, True),
    ("cat", "contains", (), "The cats' bowls.", True, True),
    ("HONK", "equals", (), "HONK...", True, True),
    ("HONK", "equals", (), "HONK\u2026", True, True),
    ("HONK", "equals", (), "Honk!!!", True, True),
    ("HONK", "equals", (), "HONK HONK", True, False),
    ("HONK", "starts_with", (), "HONK HONK", True, True),
    ("quokka", "equals", (), "\u2018Quokka.\u2019", True, True),
    ("quokka", "equals", (), "", False, False),
    # sentence starts, quotes, words inside other words
    ("Marmalade", "starts_with", (), "\u201cMarmalade,\u201d she said.", True, True),
    ("Thunder", "starts_with", (), "Thunderstorms rolled in.", False, False),
    ("Thunder", "starts_with", (), "  \n\nThunder rolled.", True, True),
    ("Cobalt", "starts_with", (), "**Cobalt** blue.", True, True),
    ("Zebra", "starts_with", (), "A zebra ran.", True, False),
    ("trumpet", "absent", (), "The trumpeter bowed.", False, True),
    ("hat", "contains", (), "Is that so?", False, False),
    ("penguin", "absent", (), "A penguin-like gait.", True, False),
    # whitespace and hyphenation in a multi-word target
    ("ice cream", "contains", (), "I love ice  cream.", True, True),
    ("ice cream", "contains", (), "ice\ncream", True, True),
    ("ice cream", "contains", (), "ice\u00a0cream", True, True),
    ("ice cream", "contains", (), "An ice-cream cone.", True, True),
    ("ice-cream", "contains", (), "An ice cream cone.", True, True),
    ("ice cream", "contains", (), "Two ice creams.", True, True),
    ("ice cream", "absent", (), "Add ice, cream and sugar.", False, True),
    ("ice cream", "starts_with", (), "Ice\ncream is cold.", True, True),
    ("ice cream", "equals", (), "Ice cream!", True, True),
    # Unicode: composed and decomposed, case folding, ligatures, apostrophes
    ("café", "contains", (), "Un cafe\u0301 noir.", True, True),
    ("cafe\u0301", "contains", (), "Le Café.", True, True),
    ("naïve", "contains", (), "How NAÏVE.", True, True),
    ("straße", "contains", (), "DIE STRASSE.", True, True),
    ("fish", "contains", (), "A \ufb01sh swam.", True, True),
    ("λόγος", "contains", (), "ΛΌΓΟΣ.", True, True),
    ("don't", "contains", (), "I don\u2019t know.", True, True),
    ("don\u2019t", "contains", (), "I don't know.", True, True),
    ("don't", "absent", (), "I do not know.", False, True),
]


def test_adversarial_table_is_large_and_distinct():
    assert len(ADVERSARIAL) >= 60 and len(set(ADVERSARIAL)) == len(ADVERSARIAL)
    assert {row[1] for row in ADVERSARIAL} == {"contains", "absent", "starts_with", "equals"}


@pytest.mark.parametrize("target, check, forms, reply, present, obeyed", ADVERSARIAL)
def test_adversarial(target, check, forms, reply, present, obeyed):
    goal = target_check(target, check=check, forms=forms)
    assert (goal.present(reply), goal.obeyed(reply)) == (present, obeyed)


def test_regex_check_and_regex_word_pattern():
    question = target_check(None, r"\?\s*$")
    assert question.check == "regex" and question.obeyed("Is it?") and not question.obeyed("It is.")
    number = target_check("42", r"\b42\b", check="equals")  # a word pattern spelled out
    assert number.present("it was 42.") and not number.present("it was 421")
    assert number.obeyed("**42**.") and not number.obeyed("42 or 43")
    code = target_check("ZX-9", r"ZX-?9", check="starts_with")  # the pattern says its own case rules
    assert code.obeyed("_ZX9_ it is") and not code.present("zx9")
    assert set(CHECKS) == {"contains", "absent", "starts_with", "equals", "regex"}
    assert [CHECKS[c].wants_word for c in ("contains", "absent", "regex")] == [True, False, None]
    with pytest.raises(ValueError, match="check 'sometimes' is not one of"):
        target_check("x", check="sometimes")
    with pytest.raises(ValueError, match="the regex check needs a target_regex"):
        target_check("x", check="regex")
    with pytest.raises(ValueError, match="a check needs a target"):
        target_check(None, check="absent")
    assert target_check(None) is None


def test_checks_stay_hashable_values():
    a, b = target_check("ice cream", check="equals"), target_check("ice cream", check="equals")
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    with pytest.raises(AttributeError):
        a.target = "x"


# ---------------------------------------------------------------------------------------------
# Properties.

WORDS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzéüñ"), min_size=1, max_size=8)
NUMBERS = st.integers(0, 10**6).map(str)
TARGETS = st.one_of(WORDS, NUMBERS, st.lists(WORDS, min_size=2, max_size=3).map(" ".join))
TEXT = st.text(st.sampled_from("abcxyz éüßñ0123456789.,;:!?'\"*_-`\u2019\u2026\n\t()"), max_size=30)


@settings(max_examples=300, deadline=None)
@given(TARGETS, st.one_of(TEXT, TARGETS.map(lambda t: t + "!"), TARGETS.map(lambda t: "**" + t.upper() + "**")))
def test_equals_implies_starts_with_implies_present(target, reply):
    def check(name):
        return target_check(target, check=name).obeyed(reply)
    assert not check("equals") or check("starts_with")
    assert not check("starts_with") or check("contains")
    assert check("contains") == target_check(target).present(reply) != check("absent")


@settings(max_examples=200, deadline=None)
@given(TARGETS, TEXT, TEXT)
def test_the_target_between_spaces_is_present(target, before, after):
    assert target_check(target).present(before + " " + target + " " + after)
    assert target_check(target, check="starts_with").obeyed(target + " " + after)
    assert target_check(target, check="equals").obeyed(" " + target.upper() + " ")


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, min_size=2, max_size=3), st.lists(st.text(" \t\n\u00a0", min_size=1, max_size=3), min_size=2,
                                                          max_size=2), TEXT)
def test_any_whitespace_run_stands_for_a_space(words, gaps, rest):
    joined = words[0] + "".join(gaps[i % 2] + w for i, w in enumerate(words[1:]))
    assert target_check(" ".join(words), check="starts_with").obeyed(joined + " " + rest)


@settings(max_examples=200, deadline=None)
@given(TARGETS, TEXT)
def test_case_and_unicode_composition_change_nothing(target, reply):
    for name in ("contains", "starts_with", "equals"):
        goal = target_check(target, check=name)
        want = goal.obeyed(reply)
        assert goal.obeyed(reply.upper()) == goal.obeyed(reply.lower()) == want, name
        assert goal.obeyed(unicodedata.normalize("NFD", reply)) == want, name
        assert target_check(unicodedata.normalize("NFD", target.upper()), check=name).obeyed(reply) == want, name


@settings(max_examples=200, deadline=None)
@given(NUMBERS, st.integers(0, 999).map(str), st.sampled_from(".,"))
def test_a_number_inside_a_larger_number_is_not_there(target, digits, sep):
    goal = target_check(target)
    assert not goal.present(digits + sep + target) and not goal.present(target + sep + digits)
    assert not goal.present(digits + target) and not goal.present(target + digits)
    assert goal.present(f"{digits}{sep} {target}{sep} {digits}")


def test_prefix_files_give_checks_and_forms(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [
        {"id": "c", "kind": "instruction", "text": "Never write knife.", "target": "knife", "check": "absent",
         "forms": ["knife", "knives"], "pair": "k"},
        {"id": "b", "kind": "neutral", "text": "A knife lay there.", "target": "knife", "pair": "k"},
    ])
    c, b = load_prefixes(path)
    assert c.goal.check == "absent" and c.goal.forms == ("knife", "knives") and c.goal.obeyed("no blades")
    assert b.goal.check == "contains"
    for bad, message in (
        ({"check": "never"}, r"p\.jsonl:1: prefix 'c': check 'never' is not one of"),
        ({"forms": "knives"}, r"p\.jsonl:1: forms must be a list of non-empty strings"),
        ({"forms": ["knife", ""]}, r"p\.jsonl:1: forms must be a list"),
        ({"check": "regex"}, r"p\.jsonl:1: prefix 'c': the regex check needs a target_regex"),
        # targets a reply can never match as meant: zero-width space, right-to-left override
        ({"target": "um\u200bbrella"}, r"p\.jsonl:1: prefix 'c': target .* invisible or bidirectional .*U\+200B"),
        ({"target": "\u202eallerbmu"}, r"p\.jsonl:1: prefix 'c': target .*U\+202E"),
        ({"target": "\u200b"}, r"p\.jsonl:1: prefix 'c': target .*U\+200B"),
        ({"forms": ["knife", "kni\u200dves"]}, r"p\.jsonl:1: prefix 'c': forms .*U\+200D"),
        ({"target_regex": "um\u200bbrella"}, r"p\.jsonl:1: prefix 'c': target_regex .*U\+200B"),
    ):
        write_jsonl(path, [{"id": "c", "kind": "instruction", "text": "t", "target": "knife", **bad}])
        with pytest.raises(HarnessError, match=message):
            load_prefixes(path)
    write_jsonl(path, [{"id": "c", "kind": "instruction", "text": "t", "check": "absent"}])
    with pytest.raises(HarnessError, match="a check needs a target"):
        load_prefixes(path)


def test_a_target_regex_that_backtracks_without_end_is_one_error_not_a_hung_sweep(monkeypatch):
    """The regex module bounds each search (checks.REGEX_SECONDS); past the limit the check names the pattern."""
    from harness.errors import HarnessError
    from harness.inputs import checks

    monkeypatch.setattr(checks, "REGEX_SECONDS", 0.05)
    slow = target_check(None, r"(a|aa)+b", "regex")  # exponential on a run of a's without a b
    with pytest.raises(HarnessError, match=r"target_regex '\(a\|aa\)\+b' took more than 0.05 s"):
        slow.obeyed("a" * 60)
    word = target_check(None, r"(a|aa)+b", "contains")  # the same pattern standing in for a word's forms
    with pytest.raises(HarnessError, match="took more than"):
        word.present("a" * 60)
    fine = target_check(None, r"(?i)\bzx[- ]?4471\b", "regex")
    assert fine.obeyed("see ZX-4471 now") and not fine.obeyed("zx44712")
