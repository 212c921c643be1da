"""Each check kind on hand examples, including the false positives and negatives of a
"starts with the word" match ("cat" in "catch", "giraffeche")."""

import pytest

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
        ({"check": "never"}, r"p\.jsonl:1: check 'never' is not one of"),
        ({"forms": "knives"}, r"p\.jsonl:1: forms must be a list of non-empty strings"),
        ({"forms": ["knife", ""]}, r"p\.jsonl:1: forms must be a list"),
        ({"check": "regex"}, r"p\.jsonl:1: the regex check needs a target_regex"),
    ):
        write_jsonl(path, [{"id": "c", "kind": "instruction", "text": "t", "target": "knife", **bad}])
        with pytest.raises(HarnessError, match=message):
            load_prefixes(path)
    write_jsonl(path, [{"id": "c", "kind": "instruction", "text": "t", "check": "absent"}])
    with pytest.raises(HarnessError, match="a check needs a target"):
        load_prefixes(path)
