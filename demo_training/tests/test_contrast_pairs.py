"""Matched ask / prohibition pairs (demo_training/contrast_pairs.py) and the mixer rows they make."""

import random
import re

import pytest

from demo_training import contrast_pairs as P
from demo_training import directive_phrasings as W
from demo_training import directives as D
from demo_training.tests.test_directives import STORIES, markers_in

NEGATION = ("not", "never", "don't", "without", "cannot", "out of", "avoid", "no ", "nobody", "nothing", "omit",
            "exclude", "banned", "forbidden", "free of", "steer clear", "stay away", "off limits", "refuse",
            "hold back", "cut", "zero", "lack")


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from demo_training.tests.test_directives import DEMO

    return AutoTokenizer.from_pretrained(DEMO)


@pytest.mark.parametrize(("statement", "negated"), [
    ("{S} must include {X}", "{S} must not include {X}"),
    ("{S} has to use {X}", "{S} must not use {X}"),
    ("there should be {X} in {S}", "there should not be {X} in {S}"),
    ("{X} belongs in {S}", "{X} does not belong in {S}"),
    ("{S} contains {X}", "{S} does not contain {X}"),
    ("{S} can't do without {X}", None),  # negative already: no rule
    ("{S} needs {X} in it", None),  # "does not need" would not forbid the word
])
def test_negate_statement_by_hand(statement, negated):
    assert P.negate_statement(statement) == negated


def test_pairs_differ_only_in_the_negation_and_keep_the_split():
    """Ask and prohibition share the opener, the story phrase and the word slot; only the
    prohibition is negative; neither carries held-out or validation wording."""
    rng = random.Random(0)
    pairs = [P.compose_pair(rng) for _ in range(3000)]
    assert len(set(pairs)) > 1000
    same_frame = 0
    for ask, forbid in pairs:
        assert not markers_in(D.HELDOUT_MARKERS + D.VALIDATION_MARKERS, ask + " " + forbid), (ask, forbid)
        assert any(n in forbid.lower() for n in NEGATION), forbid
        assert "don't be sure" not in forbid.lower() and "not forget" not in forbid.lower()
        assert ("{word}" in ask or "{a_word}" in ask) and ("{word}" in forbid or "{a_word}" in forbid)
        a, f = ask.split(), forbid.split()
        same_frame += a[0] == f[0] or a[-1] == f[-1]
    assert same_frame > 0.9 * len(pairs)  # the same opener, or the same ending and story phrase
    # half are a command and its negation: taking the negator out gives the ask back
    def without_negator(text):
        return {re.sub(r"\b" + n, "", text, count=1, flags=re.I).lower()
                for n in (c.replace("{C}", "") for c in P.NEGATED_COMMANDS)}

    commands = sum(ask.lower() in without_negator(forbid) for ask, forbid in pairs)
    assert 0.4 < commands / len(pairs) < 0.6


def test_synthesized_pair_shares_everything_but_the_sentence():
    rng = random.Random(4)
    for i in range(10):
        pair = P.synthesize_pair(STORIES[0] * 3, STORIES[1 + i % 2], rng,
                                 directive_template="Put {a_word} in the next story.",
                                 prohibition_template="Never put {a_word} in the next story.")
        assert pair is not None
        ask, forbid = pair
        word = ask.target
        assert forbid.mentioned == (word,) and forbid.target is None
        assert ask.opening == forbid.opening and ask.position == forbid.position
        assert ask.context[:ask.insert[0]] == forbid.context[:forbid.insert[0]]  # the same place
        assert ask.context[ask.insert[1]:] == forbid.context[forbid.insert[1]:]
        assert forbid.context[forbid.insert[0]:forbid.insert[1]] == "Never " + ask.context[
            ask.insert[0]:ask.insert[1]].replace("Put", "put")
        assert D.target_hit(word, ask.continuation)  # the ask is obeyed, the prohibition too
        assert not D.target_hit(word, forbid.opening + forbid.continuation)


def test_paired_rows_come_in_matched_twos(tokenizer):
    """With --paired-prohibitions each prohibition row has an ask row of the same word in the same
    step; the prohibition's forbidden token is marked over the whole unlikelihood window; the
    unpaired recipe still draws one row per synthesized slot."""
    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings

    base = dict(synth_fraction=1.0, directive_share=0.0, mention_share=0.0, prohibition_share=1.0,
                copy_fraction=0.0, copy_warmup=0.0, micro_batch=16, plain_len=64, phrasing_grammar=1.0)
    mix = MixSettings(**base, paired_prohibitions=True, unlikelihood_window=10)
    (tokens, weights, avoid), = DirectiveMixer(tokenizer, STORIES * 4, mix, 256, 0).batch(0, 4, 100)
    assert tokens.shape[0] == 8  # four pairs
    forbidden, asked = [], []
    for row, w, a in zip(tokens.tolist(), weights.tolist(), avoid.tolist()):
        marked = [j for j, x in enumerate(a) if x >= 0]
        if marked:
            assert len(marked) == 10 and marked == list(range(marked[0], marked[0] + 10))
            forbidden.append(a[marked[0]])
        else:
            target = [j for j, x in enumerate(w) if x == mix.target_weight]
            assert target
            asked.append(row[target[0] + 1])  # weights[j] is about token j + 1
    assert sorted(forbidden) == sorted(asked)  # each prohibition's word is its ask's target
    # without pairs: one row per slot
    plain = DirectiveMixer(tokenizer, STORIES * 4, MixSettings(**base), 256, 0).batch(0, 4, 100)
    assert sum(t.shape[0] for t, _, _ in plain) == 4


def test_counterfactual_rows_teach_only_not_writing_the_word_where_the_ask_did(tokenizer):
    """--counterfactual-rows: a third row per pair, the prohibition's context followed by the ask's
    continuation, with no cross-entropy and the forbidden token marked exactly where that
    continuation writes the word."""
    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings

    mix = MixSettings(synth_fraction=1.0, directive_share=0.0, mention_share=0.0, prohibition_share=1.0,
                      copy_fraction=0.0, copy_warmup=0.0, micro_batch=16, plain_len=64, phrasing_grammar=1.0,
                      paired_prohibitions=True, counterfactual_rows=True)
    mixer = DirectiveMixer(tokenizer, STORIES * 4, mix, 256, 0)
    items = mixer._pair_items(random.Random(1), 300)
    assert len(items) == 3
    ask, forbid, counterfactual = items
    assert counterfactual.ids[:forbid.start] == forbid.ids[:forbid.start]  # the prohibition's context
    assert counterfactual.ids[forbid.start:] == ask.ids[ask.start:]  # then the ask's continuation
    ids, weights, avoid = mixer._synth_row(counterfactual, 257)
    assert not any(weights)
    (marked,) = [j for j, x in enumerate(avoid) if x >= 0]
    assert ids[marked] == avoid[marked] == forbid.forbidden  # the word's first token, where the ask wrote it
    word = tokenizer.decode([forbid.forbidden]).strip()
    assert word and word in tokenizer.decode(ids[:forbid.start])  # the prohibition named it
    (tokens, _, _), = mixer.batch(0, 4, 100)
    assert tokens.shape[0] == 12  # four pairs, three rows each


def test_made_up_verbs_leave_only_the_negator_to_tell_ask_from_prohibition(monkeypatch):
    """A command with a made-up verb ("zorbik a kite into the next story") and its prohibition
    differ only in the negator."""
    monkeypatch.setattr(P, "nonce_word", lambda rng: "zorbik")
    rng = random.Random(7)
    pairs = [P.compose_pair(rng, made_up_verbs=1.0) for _ in range(400)]
    with_verb = [(a, f) for a, f in pairs if "zorbik" in a.lower()]
    assert 0.4 < len(with_verb) / len(pairs) < 0.6  # the command half
    negators = {c.replace(" {C}", "").lower() for c in P.NEGATED_COMMANDS}
    for ask, forbid in with_verb:
        a, f = ask.lower().split("zorbik"), forbid.lower().split("zorbik")
        assert a[1] == f[1]  # the same after the verb
        opener = a[0].strip()
        assert f[0].startswith(opener) and f[0][len(opener):].strip() in negators, (ask, forbid)


def test_clause_pairs_negate_inside_the_clause_and_keep_the_split():
    """``--clause-pairs``: the ask and the prohibition share everything but the negation inside a
    clause about the story; none carries held-out or validation wording."""
    rng = random.Random(0)
    pairs = [P.compose_pair(rng, clause_pairs=1.0) for _ in range(500)]
    templates = set(W.GRAMMAR_CLAUSE_PAIRS)
    assert len(templates) == len(W.GRAMMAR_CLAUSE_PAIRS) >= 10
    for ask, forbid in templates:
        assert not markers_in(D.HELDOUT_MARKERS + D.VALIDATION_MARKERS, ask + " " + forbid), (ask, forbid)
        assert any(n in forbid.lower() for n in NEGATION + ("nowhere", "absent", "empty", "far away")), forbid
        assert not any(n in ask.lower() for n in NEGATION), ask
        assert ask.split()[0] == forbid.split()[0] or ask.split()[-1] == forbid.split()[-1], (ask, forbid)
    for ask, forbid in pairs:
        assert "{S}" not in ask + forbid and "{X}" not in ask + forbid
        assert ("{word}" in ask or "{a_word}" in ask) and ("{word}" in forbid or "{a_word}" in forbid)
    assert len(set(pairs)) > 200


def test_label_pairs_differ_only_in_the_label_and_keep_every_test_split_blind():
    """``--label-pairs``: a label and the word ("Needed in S: X" / "Forbidden in S: X"); the ask and
    the prohibition share the story phrase, the word and the ending; no held-out, validation or
    later test set's wording is in them."""
    rng = random.Random(1)
    templates = set(W.GRAMMAR_LABEL_PAIRS)
    assert len(templates) == len(W.GRAMMAR_LABEL_PAIRS) >= 10
    markers = (D.HELDOUT_MARKERS + D.VALIDATION_MARKERS + W.NEGATOR_TEST_MARKERS + W.ABSENCE_TEST_MARKERS
               + W.IDIOM_TEST_MARKERS)
    for ask, forbid in templates:
        assert not markers_in(markers, ask + " " + forbid), (ask, forbid)
        assert ask.endswith("{X}") or ask.endswith("{S}"), ask
        assert ask.split("{S}")[1] == forbid.split("{S}")[1] and ask != forbid, (ask, forbid)
    labels = [P.compose_pair(rng, label_pairs=1.0) for _ in range(300)]
    for ask, forbid in labels:
        assert ask.split()[-1] == forbid.split()[-1] and ("{word}" in ask or "{a_word}" in ask), (ask, forbid)
    assert sum(":" in a for a, _ in labels) > 200


def test_negation_pairs_differ_only_in_the_polar_part_and_keep_every_test_split_blind():
    """``--negation-pairs``: each family's frames go with each of its polar pairs, so the generator
    has hundreds of wordings; an ask and its prohibition differ only where the polar part goes (the
    wrapper, story phrase, word and ending are shared); no held-out, validation or later test set's
    wording is in any part or draw."""
    markers = (D.HELDOUT_MARKERS + D.VALIDATION_MARKERS + W.NEGATOR_TEST_MARKERS + W.ABSENCE_TEST_MARKERS
               + W.IDIOM_TEST_MARKERS)
    for name, (frames, pairs) in W.NEGATION_FAMILIES.items():
        assert len(set(frames)) == len(frames) and len(set(pairs)) == len(pairs) >= 8, name
        assert all("{P}" in f for f in frames) and all(yes != no for yes, no in pairs), name
        for frame in frames:
            for yes, no in pairs:
                ask, forbid = frame.replace("{P}", yes), frame.replace("{P}", no)
                assert "{X}" in ask and "{S}" in ask and "{X}" in forbid and "{S}" in forbid, (ask, forbid)
                assert not markers_in(markers, ask + " " + forbid), (ask, forbid)
    assert not markers_in(markers, " ".join(W.NEGATION_WRAPPERS))
    rng = random.Random(5)
    drawn = [P.compose_pair(rng, negation_pairs=1.0) for _ in range(2000)]
    assert len(set(drawn)) > 1200
    for ask, forbid in drawn:
        assert ask != forbid and not markers_in(markers, ask + " " + forbid), (ask, forbid)
        assert _one_polar_swap(ask, forbid), (ask, forbid)
    assert sum(" unwelcome " in f for _, f in drawn) > 5


def _one_polar_swap(ask: str, forbid: str) -> bool:
    """Whether ``forbid`` is ``ask`` with one ask part of a polar pair swapped for its prohibition
    part (with the same story phrase and word where the part has them; a bare word after "no"),
    everything else shared (case aside: a part may start the sentence)."""
    def bare(text):
        return text.replace("{a_word}", "{word}").lower()
    stories = "|".join(re.escape(st) for st in sorted(W.GRAMMAR_STORIES, key=len, reverse=True))
    slots = {re.escape("{S}"): f"(?P<s>{stories})", re.escape("{X}"): r"(?P<x>\{a_word\}|the word \{word\})"}
    ask = ask.lower()
    for _, pairs in W.NEGATION_FAMILIES.values():
        for yes, no in pairs:
            pattern = re.escape(yes)
            for slot, group in slots.items():
                pattern = pattern.replace(slot, group)
            for m in re.finditer(pattern, ask):
                found = m.groupdict()
                filled = no.replace("{S}", found.get("s") or "{S}").replace("{X}", found.get("x") or "{X}")
                for q in ("no", "single", "zero"):  # as demo_training.directives.fill_slots
                    filled = filled.replace(f"{q} the word {{word}}", f"{q} {{word}}")
                if bare(ask[:m.start()] + filled + ask[m.end():]) == bare(forbid):
                    return True
    return False
