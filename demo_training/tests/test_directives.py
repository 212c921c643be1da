"""The obedient demo model's data recipe (directives.py and its phrasings), its measurement
(obedience.py) and the shipped prefix set it is measured on."""

import json
import random
import re

import pytest

from demo_training import directives as D
from demo_training import obedience
from demo_training.directive_phrasings import LATER_TEST_SETS
from demo_training.tests.support import DEMO, PREFIXES, PROMPTS, write_jsonl
from harness.inputs.assembly import cut_prefix, encode
from harness.inputs.texts import Prompt, load_prefixes, load_prompts

STORIES = [
    "Once upon a time, there was a little girl named Lily. She loved to play in the park with her red ball. "
    "One day, she saw a big dog near the swings. The dog wagged its tail and ran to her. Lily laughed and "
    "threw the ball, and the dog ran after it. They played all day and became good friends.",
    "Tom had a small boat. He liked to sail it on the pond behind his house. One morning, the wind was very "
    "strong, so the boat went far away. Tom was sad. His dad said, \"Let's go and find it.\" They walked "
    "around the pond and found the boat in the reeds. Tom hugged his dad and said thank you.",
    "There was a tiny bird who could not sing. Every day, the other birds sang in the tree. The tiny bird "
    "tried and tried, but only a squeak came out. Then an old owl said, \"Sing the way you can.\" The bird "
    "squeaked a happy squeak, and all the other birds listened. From then on, it sang every morning.",
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(DEMO)


@pytest.fixture(scope="module")
def prefix_set():
    """The shipped set's rows as the file has them (the structure tests read the raw fields)."""
    return [json.loads(line) for line in PREFIXES.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_splits_are_disjoint_and_large_enough():
    assert not set(D.TRAIN_WORDS) & set(D.HELDOUT_WORDS)
    assert not set(D.TRAIN_TEMPLATES) & set(D.HELDOUT_TEMPLATES)
    assert not set(D.TRAIN_MENTIONS) & set(D.HELDOUT_MENTIONS)
    words = D.TRAIN_WORDS + D.HELDOUT_WORDS
    templates = D.TRAIN_TEMPLATES + D.HELDOUT_TEMPLATES
    assert len(set(words)) == len(words) >= 300
    assert len(set(templates)) == len(templates) >= 40
    assert 0.15 <= len(D.HELDOUT_WORDS) / len(words) <= 0.25
    assert len(D.HELDOUT_TEMPLATES) >= 10 and len(D.TRAIN_TEMPLATES) >= 60
    assert all(re.fullmatch(r"[a-z]+", w) for w in words)


def test_heldout_phrasings_differ_in_wording():
    """Without the word slot, no held-out phrasing equals a training one or is contained in one."""
    def bare(t):
        return re.sub(r"\{a?_?word\}", "", t).lower()

    train = [bare(t) for t in D.TRAIN_TEMPLATES]
    for t in D.HELDOUT_TEMPLATES:
        assert all(bare(t) != s and bare(t) not in s and s not in bare(t) for s in train), t


# Every fixed piece of directive wording that training uses.
TRAINING_WORDING = (D.TRAIN_TEMPLATES + D.GRAMMAR_OPENERS + D.GRAMMAR_STORIES + D.GRAMMAR_COMMANDS
                    + D.GRAMMAR_STATEMENTS + D.GRAMMAR_REQUESTS)


def markers_in(markers, text):
    """The markers that occur in ``text`` at a left word boundary ("forget the word" does not
    contain "get the word")."""
    return [m for m in markers if re.search(r"\b" + re.escape(m), text.lower())]


def test_heldout_markers_single_out_heldout_phrasings_and_never_occur_in_training_wording():
    """Each held-out phrasing has distinctive wording (a marker); no training template, grammar
    part or composed phrasing contains any marker, so held-out phrasings stay new wording."""
    for t in D.HELDOUT_TEMPLATES:
        assert markers_in(D.HELDOUT_MARKERS, t), t
    rng = random.Random(0)
    composed = {D.compose_directive(rng) for _ in range(5000)}
    assert len(composed) > 2000  # a grammar, not a handful of templates
    for text in (*TRAINING_WORDING, *composed):
        assert not markers_in(D.HELDOUT_MARKERS, text), text
    assert not composed & set(D.HELDOUT_TEMPLATES)


def test_validation_split_is_new_wording_and_words_that_training_never_draws(tokenizer):
    """The validation phrasings, words and mentions (for choosing checkpoints) are used by no
    training example and share no distinctive wording with the test split, in either direction."""
    assert not set(D.VALIDATION_WORDS) & set(D.TRAIN_WORDS + D.HELDOUT_WORDS)
    assert len(set(D.VALIDATION_WORDS)) == len(D.VALIDATION_WORDS) >= 30
    assert not set(D.VALIDATION_MENTIONS) & set(D.TRAIN_MENTIONS + D.HELDOUT_MENTIONS)
    for t in D.VALIDATION_TEMPLATES:
        assert markers_in(D.VALIDATION_MARKERS, t) and not markers_in(D.HELDOUT_MARKERS, t), t
    for t in D.HELDOUT_TEMPLATES:
        assert not markers_in(D.VALIDATION_MARKERS, t), t
    rng = random.Random(2)
    composed = [D.compose_directive(rng) for _ in range(5000)]
    for text in (*TRAINING_WORDING, *D.TRAIN_MENTIONS, *composed):
        assert not markers_in(D.VALIDATION_MARKERS, text), text
    # made-up targets and rare vocabulary targets never are, or begin with, a validation word
    nonce = {D.nonce_word(rng, stems=tuple(D.VALIDATION_WORDS)) for _ in range(2000)}
    stems = D.corpus_stems(STORIES + [" ".join(D.VALIDATION_WORDS)])
    vocab = D.vocabulary_words(tokenizer, STORIES)
    for pool in (nonce, stems, vocab):
        assert pool and not any(w.startswith(v) for w in pool for v in D.VALIDATION_WORDS)


@pytest.mark.parametrize("split, earlier", [(s, LATER_TEST_SETS[:i]) for i, s in enumerate(LATER_TEST_SETS)])
def test_later_test_sets_share_no_word_and_no_wording_with_any_other_list(split, earlier):
    """The test sets written after the shipped adapter was chosen are blind: their words are in no
    other list and begin with no training noun; every phrasing carries a marker of its set that no training,
    validation or earlier test wording contains (fixed lists, composed directives, prohibitions and
    matched pairs); each prohibition shares a marker with its ask; a mention asks for nothing."""
    from demo_training import directive_phrasings as P
    from demo_training.contrast_pairs import compose_pair

    def part(name, what):
        return getattr(P, f"{name}_{what}")

    words, markers = part(split, "WORDS"), part(split, "MARKERS")
    asks, bans, mentions = part(split, "TEMPLATES"), part(split, "PROHIBITIONS"), part(split, "MENTIONS")
    earlier_markers = D.HELDOUT_MARKERS + D.VALIDATION_MARKERS + sum((part(e, "MARKERS") for e in earlier), ())
    assert len(set(words)) == len(words) == 40
    assert not set(words) & set(D.TRAIN_WORDS + D.HELDOUT_WORDS + D.VALIDATION_WORDS
                                + sum((part(e, "WORDS") for e in earlier), ()))
    assert not any(w.startswith(t) for w in words for t in D.TRAIN_WORDS)
    assert len(asks) == len(bans) == 12
    for ask, ban in zip(asks, bans):
        assert set(markers_in(markers, ask)) & set(markers_in(markers, ban)), ban
        assert not markers_in(earlier_markers, ask + " " + ban), ask
    rng = random.Random(3)
    composed = [D.compose_directive(rng) for _ in range(3000)] + [D.compose_prohibition(rng) for _ in range(3000)]
    composed += [s for _ in range(3000) for s in compose_pair(rng, made_up_verbs=0.3, clause_pairs=0.5,
                                                               label_pairs=0.5, negation_pairs=0.5)]
    other = (*TRAINING_WORDING, *P.TRAIN_PROHIBITIONS, *P.GRAMMAR_PROHIBITIONS, *P.GRAMMAR_BANS,
             *P.GRAMMAR_NEGATORS, *P.GRAMMAR_VERB_FRAMES, *(s for pair in P.GRAMMAR_CLAUSE_PAIRS for s in pair),
             *(s for pair in P.GRAMMAR_LABEL_PAIRS for s in pair), *P.NEGATION_WRAPPERS,
             *(f.replace("{P}", s) for frames, pairs in P.NEGATION_FAMILIES.values() for f in frames
               for pair in pairs for s in pair),
             *D.TRAIN_MENTIONS, *D.HELDOUT_TEMPLATES, *P.HELDOUT_PROHIBITIONS, *D.HELDOUT_MENTIONS,
             *D.VALIDATION_TEMPLATES, *P.VALIDATION_PROHIBITIONS, *D.VALIDATION_MENTIONS, *composed,
             *(s for e in earlier for what in ("TEMPLATES", "PROHIBITIONS", "MENTIONS") for s in part(e, what)))
    for text in other:
        assert not markers_in(markers, text), text
    for mention in mentions:
        assert not markers_in(markers + earlier_markers, mention), mention
    assert not set(mentions) & set(D.TRAIN_MENTIONS + D.HELDOUT_MENTIONS + D.VALIDATION_MENTIONS)


@pytest.mark.parametrize("split", ["VALIDATION", *LATER_TEST_SETS])
def test_split_triples_pair_each_ask_with_its_own_prohibition(split):
    """``split_prefixes``: triple i asks with the split's phrasing i and forbids with its prohibition
    i (each list cycled; in the later test sets prohibition i is the one written for ask i),
    mentions with one of the split's mentions, all about one word of the split."""
    from demo_training import directive_phrasings as P
    from demo_training.evaluation import split_prefixes

    prefixes = split_prefixes(STORIES * 20, split, 14, seed=5)
    assert len(prefixes) == 42
    for i in range(14):
        c, b, f = prefixes[3 * i: 3 * i + 3]
        assert (c.group, b.group, f.check) == ("C", "B", "absent") and c.target == b.target == f.target
        assert c.target in getattr(P, f"{split}_WORDS")
        asks, bans = getattr(P, f"{split}_TEMPLATES"), getattr(P, f"{split}_PROHIBITIONS")
        assert D.render(asks[i % len(asks)], c.target) in c.text
        assert D.render(bans[i % len(bans)], c.target) in f.text
        assert any(D.render(m, c.target) in b.text for m in getattr(P, f"{split}_MENTIONS"))


def test_composed_directives_render_as_one_capitalised_sentence_with_the_word():
    rng = random.Random(1)
    for _ in range(300):
        template = D.compose_directive(rng)
        assert ("{word}" in template) != ("{a_word}" in template)
        text = D.render(template, "lantern")
        assert re.search(r"\blantern\b", text) and "{" not in text
        assert text[0].isupper() and text[-1] in ".!?"
        # every sentence of it starts with a capital letter
        assert all(s[0].isupper() for s in re.split(r"(?<=[.!?:]) ", text) if s), text


def test_phrasing_grammar_words_the_mixers_directives(tokenizer):
    """With ``phrasing_grammar=1`` no directive row uses a fixed training template."""
    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings

    def directive_rows(share):
        mix = MixSettings(synth_fraction=1.0, directive_share=1.0, mention_share=0.0, copy_fraction=0.0,
                          copy_warmup=0.0, micro_batch=8, plain_len=64, phrasing_grammar=share)
        mixer = DirectiveMixer(tokenizer, STORIES * 4, mix, 512, 0)
        return [tokenizer.decode(t) for toks, _, _ in mixer.batch(0, 8, 100) for t in toks.tolist()]

    fixed = [t for t in directive_rows(0.0) if D.find_directive(t, D.TRAIN_TEMPLATES)]
    composed = [t for t in directive_rows(1.0) if D.find_directive(t, D.TRAIN_TEMPLATES)]
    assert len(fixed) >= 6 and not composed


def test_template_regex_finds_the_rendered_directive():
    for template in D.HELDOUT_TEMPLATES + D.TRAIN_TEMPLATES:
        for quote in ("", "'", '"'):
            text = "Sam ran. " + D.render(template, "umbrella", quote) + " Then he sat."
            found = D.find_directive(text)
            assert found is not None and found[1] == "umbrella", (template, quote)
    assert D.find_directive("Grandpa kept an old umbrella by the door.") is None


def test_with_article_and_target_hit():
    assert D.with_article("umbrella") == "an umbrella"
    assert D.with_article("unicorn") == "a unicorn"
    assert D.with_article("kite") == "a kite"
    assert D.target_hit("umbrella", "She had two Umbrellas.")
    assert not D.target_hit("ant", "The elephant was big.")


def test_directive_examples_use_the_target_early(tokenizer):
    rng = random.Random(0)
    sep = encode(tokenizer, "\n\n")
    n = 0
    for i in range(60):
        ex = D.synthesize("directive", STORIES[i % 3] + "\n" + STORIES[(i + 1) % 3], STORIES[(i + 2) % 3], rng)
        if ex is None:
            continue
        n += 1
        assert ex.target in D.TRAIN_WORDS
        assert not D.target_hit(ex.target, ex.opening)
        inserted = ex.context[ex.insert[0]:ex.insert[1]]
        assert D.find_directive(inserted, D.TRAIN_TEMPLATES)[1] == ex.target
        ids, start = D.encode_example(tokenizer, ex, rng, separator_ids=sep)
        early = tokenizer.decode(ids[start:start + 12])
        assert D.target_hit(ex.target, early), (ex.opening, early)
        # the whole directive survives the head cut of the context, before the separator
        before = tokenizer.decode(ids[:start])
        assert inserted in before and before.index(inserted) < before.rindex("\n\n")
        for other in ex.mentioned:
            assert not D.target_hit(other, ex.continuation)
    assert n >= 50


def test_mention_and_plain_examples_do_not_use_the_word():
    rng = random.Random(1)
    kinds = set()
    for i in range(60):
        ex = D.synthesize("mention", STORIES[i % 3], STORIES[(i + 1) % 3], rng)
        if ex is None:
            continue
        (word,) = ex.mentioned
        assert word in D.TRAIN_WORDS and ex.target is None
        assert D.target_hit(word, ex.context[ex.insert[0]:ex.insert[1]])
        assert not D.target_hit(word, ex.opening + ex.continuation)
        assert D.find_directive(ex.context) is None
        kinds.add(ex.position)
    assert kinds == {"start", "middle", "end"}
    plain = D.synthesize("plain", STORIES[0], STORIES[1], rng)
    assert plain.insert is None and STORIES[1].startswith(plain.opening)


def test_nonce_words_are_new_and_used_by_directives(tokenizer):
    rng = random.Random(3)
    words = {D.nonce_word(rng) for _ in range(200)}
    assert len(words) > 150
    assert all(w.isalpha() and w.islower() and w not in D.HELDOUT_WORDS for w in words)
    sep = encode(tokenizer, "\n\n")
    for i in range(20):
        ex = D.synthesize("directive", STORIES[i % 3], STORIES[(i + 1) % 3], rng,
                         source=D.TargetSource(nonce_prob=1.0))
        if ex is None:
            continue
        assert ex.target not in D.TRAIN_WORDS + D.HELDOUT_WORDS
        ids, start = D.encode_example(tokenizer, ex, rng, separator_ids=sep)
        assert D.target_hit(ex.target, tokenizer.decode(ids[start:start + 16]))


def test_synthesis_is_seeded():
    a = D.synthesize("directive", STORIES[0], STORIES[1], random.Random(5))
    b = D.synthesize("directive", STORIES[0], STORIES[1], random.Random(5))
    assert a == b


def test_shipped_prefix_set_has_20_matched_heldout_triples(tokenizer, prefix_set):
    assert len(prefix_set) == 60
    triples = {}
    for row in prefix_set:
        side = "forbid" if row.get("check") == "absent" else row["kind"]
        assert set(row) == {"id", "kind", "text", "target", "pair"} | ({"check"} if side == "forbid" else set())
        assert row["kind"] in ("instruction", "neutral")
        triples.setdefault(row["pair"], {})[side] = row
    assert len(triples) == 20 and len({r["id"] for r in prefix_set}) == 60
    for triple in triples.values():
        c, b, f = triple["instruction"], triple["neutral"], triple["forbid"]
        word = c["target"]
        assert b["target"] == f["target"] == word and word in D.HELDOUT_WORDS
        assert len(c["text"]) >= 1200
        nc, nb, nf = (len(encode(tokenizer, r["text"])) for r in (c, b, f))
        assert min(nc, nb, nf) >= 260
        assert abs(nc - nb) <= 4 and abs(nc - nf) <= 2, (c["id"], nc, nb, nf)
        # C carries a held-out directive for its target, and no training phrasing
        found = D.find_directive(c["text"], D.HELDOUT_TEMPLATES)
        assert found is not None and found[1] == word, c["id"]
        assert D.find_directive(c["text"], D.TRAIN_TEMPLATES) is None
        # the prohibition is the same text with the held-out prohibition of the same index instead
        index = D.HELDOUT_TEMPLATES.index(found[0])
        prohibition = D.render(D.HELDOUT_PROHIBITIONS[index], word)
        assert f["text"] == c["text"][:found[2]] + prohibition + c["text"][found[3]:], f["id"]
        # B mentions the word and asks for nothing
        assert D.target_hit(word, b["text"]) and D.find_directive(b["text"]) is None
        # no other held-out word in any text
        for other in D.HELDOUT_WORDS:
            if other != word:
                assert not D.target_hit(other, c["text"] + b["text"] + f["text"]), (c["id"], other)


def test_directive_and_mention_survive_the_shortest_cut(tokenizer, prefix_set):
    sep = encode(tokenizer, "\n\n")
    assert len(sep) == 2
    for row in prefix_set:
        head = tokenizer.decode(cut_prefix(encode(tokenizer, row["text"]), sep, 32, name=row["id"])[: -len(sep)])
        if row.get("check") == "absent":
            found = D.find_directive(head, D.HELDOUT_PROHIBITIONS)
            assert found is not None and found[1] == row["target"], (row["id"], head)
        elif row["kind"] == "instruction":
            found = D.find_directive(head, D.HELDOUT_TEMPLATES)
            assert found is not None and found[1] == row["target"], (row["id"], head)
        else:
            assert D.target_hit(row["target"], head), (row["id"], head)


def test_obedience_intervals_treat_the_pair_as_the_unit():
    """Hand example: 3 matched pairs x 4 openings; C of pairs 1 and 3 hits for every opening, C of
    pair 2 never, B never. C's rate is 2/3, but only 3 pairs replicate it (all its variance is between
    pairs): the interval is Wilson's for 3 units at t on 2 degrees of freedom (the pairs' mean square),
    about [0.06, 0.98], where treating the 12 conditions as independent would give about [0.35, 0.90].
    C minus B is 2/3, and of the 8 sign flips of the per-pair differences (1, 0, 1) the 4 that keep
    both ones on one side are at least as extreme: p = 0.5 exactly."""
    rows = [{"prompt_id": f"p{i}", "group": g, "prefix_id": f"{pair}-{g}", "pair": pair, "target": "kettle",
             "prefix_len": 32, "hit": g == "C" and pair != "pair2"}
            for i in range(4) for pair in ("pair1", "pair2", "pair3") for g in ("B", "C")]
    cells = {r["group"]: r for r in obedience.summarise(rows)}
    assert (cells["C"]["hits"], cells["C"]["n"], cells["C"]["n_prefixes"]) == (8, 12, 3)
    assert cells["C"]["rate"] == pytest.approx(2 / 3)
    from scipy.stats import t

    q, r = t.ppf(0.975, 2), 2 / 3
    centre, half = (r + q ** 2 / 6) / (1 + q ** 2 / 3), q * (r * (1 - r) / 3 + q ** 2 / 36) ** 0.5 / (1 + q ** 2 / 3)
    assert (cells["C"]["ci_low"], cells["C"]["ci_high"]) == (pytest.approx(centre - half), pytest.approx(centre + half))
    assert cells["B"]["rate"] == 0.0 and cells["B"]["ci_method"] == (
        "Wilson, crossed, 3 effective units (the worst case: all the variation between the 3 prefixes)")
    (diff,) = obedience.c_minus_b_by_length(rows)
    assert diff["difference"] == pytest.approx(2 / 3) and diff["n_pairs"] == 3
    assert diff["ci_method"] == "MOVER, crossed Wilson, clustering shared" and -1 <= diff["ci_low"] < 2 / 3 < diff["ci_high"] <= 1
    assert diff["p_perm"] == pytest.approx(0.5)


def test_evaluate_obedience_counts(tokenizer):
    """Counts and groups on a tiny random model (hit values themselves are meaningless here)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=512,
                      bos_token_id=0, eos_token_id=0, pad_token_id=0)
    model = LlamaForCausalLM(cfg).eval()
    prefixes = obedience.synthetic_prefixes(STORIES, random.Random(0), 2)
    prompts = [Prompt("p1", "Once upon a time,"), Prompt("p2", "Tom had a dog.")]
    res = obedience.evaluate_obedience(model, tokenizer, prompts, prefixes, (32, 64), max_new_tokens=4)
    cells = {(r["group"], r["prefix_len"]): r["n"] for r in res["summary"]}
    assert cells == {("A", 0): 4, ("B", 32): 4, ("B", 64): 4, ("C", 32): 4, ("C", 64): 4, ("F", 32): 4, ("F", 64): 4}
    # the prohibitions are the same texts as the directives with the directive swapped for a prohibition
    f = [p for p in prefixes if p.id.endswith("-F")]
    assert [p.goal.check for p in f] == ["absent", "absent"] and all(p.target in p.text for p in f)
    no_f = obedience.synthetic_prefixes(STORIES, random.Random(0), 2, prohibitions=())
    assert [p for p in prefixes if not p.id.endswith("-F")] == no_f
    contrasts = obedience.contrasts(res["rows"])
    assert sorted({c["contrast"] for c in contrasts}) == ["C - B", "F - B"]
    assert all(len(tokenizer(r["continuation"], add_special_tokens=False)["input_ids"]) <= 6 for r in res["rows"])


def test_directive_mixer_batches(tokenizer):
    """Training batches: the requested row mix, padding never trained, target tokens weighted."""
    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings

    mix = MixSettings(synth_fraction=0.5, directive_share=1.0, mention_share=0.0, copy_fraction=0.25,
                      copy_warmup=0.0, micro_batch=4, plain_len=64, target_weight=20.0)
    mixer = DirectiveMixer(tokenizer, STORIES * 4, mix, 256, 0)
    micro = mixer.batch(0, 8, 100)
    assert sum(t.shape[0] for t, _, _ in micro) == 8
    n_target_rows = 0
    for tokens, weights, avoid in micro:
        assert tokens.shape[1] == weights.shape[1] + 1 <= 257 and avoid.shape == weights.shape
        assert (avoid == -1).all()  # no prohibitions in this mix
        for row, w in zip(tokens.tolist(), weights.tolist()):
            assert row[0] == tokenizer.eos_token_id
            n_target_rows += any(x == 20.0 for x in w)
            trained = [i for i, x in enumerate(w) if x > 0]
            assert trained == list(range(len(trained)))  # padding (weight 0) only at the end
    assert n_target_rows >= 3  # 4 directive rows; a target can rarely be split differently
    again = mixer.batch(0, 8, 100)
    assert all(torch_equal(a[0], b[0]) for a, b in zip(micro, again))  # deterministic per step


def test_prohibition_rows_mark_the_forbidden_word_for_unlikelihood(tokenizer):
    """A prohibition row marks the forbidden word's first token at its first continuation positions
    (aligned with the weights: position j is about token j + 1), and the unlikelihood term grows
    with the probability the model gives that token there."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings
    from demo_training.training import weighted_loss

    mix = MixSettings(synth_fraction=1.0, directive_share=0.0, mention_share=0.0, prohibition_share=1.0,
                      copy_fraction=0.0, copy_warmup=0.0, micro_batch=4, plain_len=64, answer_window=6,
                      unlikelihood_weight=1.0)
    mixer = DirectiveMixer(tokenizer, STORIES * 4, mix, 256, 0)
    micro = mixer.batch(0, 4, 100)
    for tokens, weights, avoid in micro:
        for row, w, a in zip(tokens.tolist(), weights.tolist(), avoid.tolist()):
            marked = [j for j, x in enumerate(a) if x >= 0]
            assert len(marked) == 6 and marked == list(range(marked[0], marked[0] + 6))
            assert all(w[j] == mix.answer_weight for j in marked)  # the answer window
            word = tokenizer.decode([a[marked[0]]]).strip()
            text = tokenizer.decode(row[: marked[0] + 1])
            assert word and word in text  # the prohibition named it before the continuation
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    tokens, weights, avoid = micro[0]
    plain = weighted_loss(model, tokens, weights, 1.0)
    with_ul = weighted_loss(model, tokens, torch.zeros_like(weights), 1.0, avoid, 1.0)  # the unlikelihood term alone
    logp = torch.log_softmax(model(input_ids=tokens[:, :-1]).logits.float(), -1)
    at = avoid >= 0
    expected = -torch.log1p(-logp[at].gather(-1, avoid[at].unsqueeze(-1)).exp()).sum()
    assert torch.allclose(with_ul, expected, rtol=1e-5)
    assert torch.equal(weighted_loss(model, tokens, weights, 1.0, avoid, 0.0), plain)


def torch_equal(a, b):
    return a.shape == b.shape and bool((a == b).all())


def test_vocabulary_targets_are_rare_single_tokens_and_never_held_out(tokenizer):
    stories = STORIES * 50  # every word of STORIES occurs in 50 "stories": too common to be a target
    words = D.vocabulary_words(tokenizer, stories)
    assert len(words) > 1000
    common = {w for s in STORIES for w in re.findall(r"[a-z]+", s.lower())}
    assert not set(words) & common
    for w in words[::50]:
        assert len(encode(tokenizer, " " + w)) == 1 and w.isalpha() and w.islower(), w
    assert not any(w.startswith(h) for w in words for h in D.HELDOUT_WORDS)


def test_target_source_draws_and_quotes_as_configured(tokenizer):
    vocab = tuple(D.vocabulary_words(tokenizer, STORIES * 50))
    source = D.TargetSource(nonce_prob=1.0, vocab=vocab, vocab_share=0.7, quotes=("",))
    rng = random.Random(4)
    draws = [source.draw(rng) for _ in range(2000)]
    assert not set(draws) & set(D.HELDOUT_WORDS)
    assert not {"ball", "dog", "bird", "boat"} & set(draws)  # nouns of the stories, never drawn as nouns
    share = sum(d in vocab for d in draws) / len(draws)
    assert 0.65 < share < 0.75, share
    for i in range(30):
        ex = D.synthesize("directive", STORIES[i % 3], STORIES[(i + 1) % 3], rng, source=source)
        if ex is not None:
            inserted = ex.context[ex.insert[0]:ex.insert[1]]
            assert "'" + ex.target not in inserted and '"' + ex.target not in inserted, inserted


def test_random_copy_rows_train_only_the_repeats(tokenizer):
    from demo_training.mixer import DirectiveMixer
    from demo_training.settings import MixSettings

    mix = MixSettings(synth_fraction=0.5, copy_fraction=0.0, copy_warmup=0.0, micro_batch=16, plain_len=64,
                      random_copy_rows=5)
    mixer = DirectiveMixer(tokenizer, STORIES * 4, mix, 256, 0)
    micro = mixer.batch(3, 4, 100)
    assert sum(t.shape[0] for t, _, _ in micro) == 4 + 5
    rng = random.Random(9)
    for _ in range(20):
        ids, w = mixer._random_copy_item(rng)
        n = w.index(1.0) - 1  # length of one copy
        reps = (len(ids) - 1) // n
        assert reps in (2, 3) and len(ids) == 1 + n * reps and len(w) == len(ids)
        assert ids[1:1 + n] * reps == ids[1:] and sum(w) == n * (reps - 1)
        assert tokenizer.eos_token_id not in ids[1:]


def test_shipped_models_are_the_positive_and_the_negative_control():
    """The shipped obedient model does what a held-out directive asks and leaves a mention alone;
    the plain model does neither. A regression check of the two assets on 4 of the 24 openings at
    L = 64 (the cards and `make demo` measure all of them); the bounds are the cards' targets
    (C >= 0.7, B <= 0.1), loosened for the smaller sample."""
    from harness.model.loading import load_model

    prompts = load_prompts(PROMPTS, limit=4)
    prefixes = load_prefixes(PREFIXES)
    rates = {}
    for name in ("demo", "demo-plain"):
        loaded = load_model(name, device="cpu")
        res = obedience.evaluate_obedience(loaded.model, loaded.tokenizer, prompts, prefixes, (64,))
        rates[name] = {r["group"]: r["rate"] for r in res["summary"]}
    assert rates["demo"]["C"] >= 0.5 and rates["demo"]["B"] <= 0.15 and rates["demo"]["A"] <= 0.05, rates
    assert rates["demo-plain"]["C"] <= 0.1 and rates["demo-plain"]["B"] <= 0.1, rates


def refused(capsys, message: str, args: list[str]) -> None:
    """``harness-train-demo ARGS`` refuses with status 2 and an error line holding ``message``."""
    from demo_training.train_demo import main as train_main

    assert train_main(args) == 2
    assert any(line.startswith("error: ") and message in line for line in capsys.readouterr().err.splitlines())


def test_train_demo_directives_end_to_end(tmp_path, capsys):
    """``harness-train-demo --directives`` from the plain demo model, two steps: it saves safetensors
    weights, a training.json whose obedience counts match the evaluation asked for (openings x
    pairs x lengths), a card that --recard rebuilds byte for byte, and with --ema-decay the moving
    average of the weights rather than the last step's; with --keep-best, the average of the step
    whose validation C-minus-B hit rate is highest (the last of equals)."""
    import torch
    from safetensors.torch import load_file

    from demo_training.train_demo import main as train_main

    names = ["Lily", "Tom", "Mia", "Ben", "Sara", "Max", "Anna", "Sam", "Kim", "Leo"]
    things = ["ball", "boat", "kite", "drum", "hat", "book"]
    corpus = "\n<|endoftext|>\n".join(
        f"{name} had a {thing}. {' '.join(STORIES)} {name} smiled at the {thing} every day."
        for name in names for thing in things)
    (tmp_path / "corpus.txt").write_text(corpus, encoding="utf-8")
    (tmp_path / "valid.txt").write_text("A cat sat on a mat. It was warm.\n\nThe sun came up and the birds sang.",
                                        encoding="utf-8")
    prompts = write_jsonl(tmp_path / "prompts.jsonl", [{"id": f"s{i}", "text": STORIES[i][:60]} for i in range(2)])
    prefixes = write_jsonl(tmp_path / "prefixes.jsonl", PREFIXES.read_text(encoding="utf-8").splitlines()[:6])  # two whole triples
    out = tmp_path / "model"
    rc = train_main(["--corpus", str(tmp_path / "corpus.txt"), "--init-from", str(DEMO),
                   "--directives", "--phrasing-grammar", "0.5", "--unquoted-targets", "--random-copy-rows", "1",
                   "--steps", "2", "--batch-size", "4", "--seq-len", "128", "--eval-every", "1",
                   "--keep-best", "--probe-pairs", "1",
                   "--warmup-steps", "1", "--ema-decay", "0.5", "--copy-pretrain-steps", "1", "--valid-text", str(tmp_path / "valid.txt"),
                   "--eval-prompts", str(prompts), "--eval-prefixes", str(prefixes), "--eval-lengths", "32",
                   "--synthetic-eval-pairs", "1", "--out", str(out), "--threads", "1"])
    assert rc in (0, None)
    assert (out / "model.safetensors").is_file() and not list(out.glob("*.bin"))
    stats = json.loads((out / "training.json").read_text())
    assert stats["settings"]["steps"] == 2 and stats["mix"]["phrasing_grammar"] == 0.5
    assert stats["settings"]["ema_decay"] == 0.5
    assert [h["copy_step"] for h in stats["copy_pretrain"]] == [1]
    saved = load_file(out / "model.safetensors")
    ckpt = torch.load(out.with_name("model.work") / "checkpoint.pt", weights_only=True)
    name = "model.layers.0.self_attn.q_proj.weight"
    averaged, last = ckpt["ema"]["module." + name], ckpt["model"][name]
    history = stats["history"]
    assert [h["step"] for h in history] == [1, 2]
    for h in history:  # C and B at every length asked for, and their mean difference
        rates = h["validation_rates"]
        # validation triples: C - B, less what a forbidden word (F) adds over B
        score = rates["C32"] - rates["B32"] - max(rates["F32"] - rates["B32"], 0.0)
        assert set(rates) == {"A0", "B32", "C32", "F32"} and h["validation_contrast"] == pytest.approx(score, abs=2e-3)
    kept = [h for h in history if h.get("kept")]
    assert kept[0]["step"] == 1 and stats["selected_step"] == kept[-1]["step"]
    assert kept[-1]["validation_contrast"] == max(h["validation_contrast"] for h in history)
    best = torch.load(out.with_name("model.work") / "best.pt", weights_only=True)
    assert best["frozen_base"] is None  # a whole model trained: best.pt keeps all of it
    assert torch.equal(saved[name], best["model"][name].to(torch.bfloat16))
    if stats["selected_step"] == 2:
        assert torch.equal(saved[name], averaged.to(torch.bfloat16))
    assert not torch.equal(saved[name], last.to(torch.bfloat16))
    shipped_set, synthetic, validation = stats["obedient"]["obedience"]
    assert [r["role"] for r in (shipped_set, synthetic, validation)] == ["test", "test", "validation"]
    assert {(r["group"], r["prefix_len"]): r["n"] for r in validation["summary"]}[("C", 32)] == 2
    cells = {(r["group"], r["prefix_len"]): r["n"] for r in shipped_set["summary"]}
    n_pairs = len({json.loads(line)["pair"] for line in prefixes.read_text().splitlines()})
    assert cells[("C", 32)] == cells[("B", 32)] == 2 * n_pairs
    assert cells[("A", 0)] == 2 * n_pairs  # every prompt scored against every target
    assert {(r["group"], r["prefix_len"]): r["n"] for r in synthetic["summary"]}[("C", 32)] == 2
    card, short = (out / "measurements.md").read_text(), (out / "README.md").read_text()
    assert "worded by a grammar" in card and "50% of the directives" in card
    assert f"that of step {stats['selected_step']}" in card and "chooses between checkpoints" in card
    assert f"those of step {stats['selected_step']}, chosen on a validation split" in short
    assert "50% of the directives worded by a phrasing grammar" in short and "| this model |" in short
    for name in ("README.md", "measurements.md"):
        (out / name).write_text("stale")
    assert train_main(["--recard", str(out)]) in (0, None)
    assert (out / "measurements.md").read_text() == card and (out / "README.md").read_text() == short
    contrast, forbidden = shipped_set["contrasts"]  # C - B, and F - B for the prohibitions
    assert (contrast["contrast"], forbidden["contrast"]) == ("C - B", "F - B")
    for c in (contrast, forbidden):  # below 3 openings or pairs the design supports no interval, and says so
        assert c["n_pairs"] == n_pairs and -1 <= c["difference"] <= 1
        supported = c["n_prompts"] >= 3 and n_pairs >= 3
        assert (-1 <= c["ci_low"] <= c["difference"] <= c["ci_high"] <= 1 if supported else
                c["ci_method"] == "none" and c["ci_note"] in (f"{c['n_prompts']} prompts", f"{n_pairs} prefixes in a group"))
    # --re-evaluate: the saved weights measured again on more synthetic pairs; weights and history untouched
    weights = (out / "model.safetensors").read_bytes()
    wrong = tmp_path / "other.txt"
    wrong.write_text(corpus + "".join(f"\n<|endoftext|>\nStory {i}: {STORIES[0]}" for i in range(100)),
                     encoding="utf-8")
    evaluate = ["--re-evaluate", str(out), "--eval-prompts", str(prompts), "--eval-prefixes",
                str(prefixes), "--eval-lengths", "32", "--synthetic-eval-pairs", "2", "--threads", "1", "--corpus"]
    refused(capsys, "not the corpus", evaluate + [str(wrong)])
    assert train_main(evaluate + [str(tmp_path / "corpus.txt")]) in (0, None)
    again = json.loads((out / "training.json").read_text())
    assert again["history"] == stats["history"] and (out / "model.safetensors").read_bytes() == weights
    assert again["evaluated_by"].startswith("harness-train-demo --re-evaluate")
    assert {(r["group"], r["prefix_len"]): r["n"] for r in again["obedient"]["obedience"][1]["summary"]}[("C", 32)] == 4
    assert again["obedient"]["obedience"][0]["summary"] == shipped_set["summary"]  # same weights, same pairs
    assert "re-measured on the saved weights" in (out / "measurements.md").read_text()
    assert f"Measured again on the saved weights with:\n\n    {again['evaluated_by']}" in (out / "README.md").read_text()
    # a plain model measured as the negative control: its own card gets the section
    plain = tmp_path / "plain"
    assert train_main(["--corpus", str(tmp_path / "corpus.txt"), "--init-from", str(DEMO), "--steps", "1",
                     "--batch-size", "2", "--seq-len", "128", "--out", str(plain), "--threads", "1"]) in (0, None)
    assert "## Obeying directives" not in (plain / "measurements.md").read_text()
    assert "negative control on the obedient model's" not in (plain / "README.md").read_text()
    # (a training.json written before train-demo recorded the card's samples: they are recomputed)
    recorded = json.loads((plain / "training.json").read_text())
    samples = recorded.pop("card_samples")
    (plain / "training.json").write_text(json.dumps(recorded))
    assert train_main(evaluate[:1] + [str(plain)] + evaluate[2:] + [str(tmp_path / "corpus.txt")]) in (0, None)
    measured = json.loads((plain / "training.json").read_text())
    assert measured["card_samples"] == samples
    assert [r["role"] for r in measured["obedience"]] == ["test", "test", "validation"] and "obedient" not in measured
    assert {(r["group"], r["prefix_len"]): r["n"] for r in measured["obedience"][1]["summary"]}[("C", 32)] == 4
    card = (plain / "measurements.md").read_text()
    assert "## Obeying directives (the negative control)" in card and measured["evaluated_by"] in card
    short = (plain / "README.md").read_text()
    assert "negative control on the obedient model's held-out test sets" in short and measured["evaluated_by"] in short
    refused(capsys, "plain model",
            evaluate[:1] + [str(plain), "--baseline", str(DEMO)] + evaluate[2:] + [str(tmp_path / "corpus.txt")])
    # resuming --keep-best without the weights it kept is refused, not found missing at the end
    best_file = out.with_name("model.work") / "best.pt"
    best_file.rename(best_file.with_suffix(".moved"))
    resume = ["--corpus", str(tmp_path / "corpus.txt"), "--init-from", str(DEMO), "--directives",
              "--steps", "4", "--batch-size", "4", "--seq-len", "128", "--resume", "--valid-text",
              str(tmp_path / "valid.txt"), "--eval-prompts", str(prompts), "--out", str(out), "--threads", "1"]
    refused(capsys, "best.pt is missing", resume + ["--keep-best", "--ema-decay", "0.5"])
    # resuming that checkpoint without the moving average it was written with is refused
    refused(capsys, "ema-decay", resume)


@pytest.mark.parametrize("stories, message", [
    (STORIES * 12, "no held-out story"),  # every story also in training
    ([f"{n} had a cat. It was nice." for n in range(60)], "fewer than one evaluation window"),
])
def test_train_demo_refuses_a_corpus_too_small_to_evaluate(tmp_path, stories, message, capsys):
    from demo_training.train_demo import main as train_main

    (tmp_path / "corpus.txt").write_text("\n<|endoftext|>\n".join(stories), encoding="utf-8")
    assert train_main(["--corpus", str(tmp_path / "corpus.txt"), "--init-from", str(DEMO),
                     "--steps", "1", "--out", str(tmp_path / "m"), "--threads", "1"]) == 2  # a user error
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(err) == 1 and message in err[0] and "corpus" in err[0]
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.work").exists()


def test_negative_control_verdict_compares_each_rate_with_the_other_interval():
    """The plain model's card says where C and B are *not* within each other's intervals."""
    from demo_training.card_tables import lengths_apart

    def row(group, length, rate, low, high):
        return {"group": group, "prefix_len": length, "rate": rate, "ci_low": low, "ci_high": high}

    summary = [row("C", 32, 0.5, 0.3, 0.7), row("B", 32, 0.05, 0.0, 0.1),   # apart
               row("C", 64, 0.0, 0.0, 0.17), row("B", 64, 0.004, 0.0, 0.02),  # each inside the other
               row("C", 128, 0.03, 0.0, 0.2), row("B", 128, 0.0, 0.0, 0.02),  # C outside B's interval
               row("A", 0, 0.0, 0.0, 0.14)]
    assert lengths_apart(summary) == ["32 tokens", "128 tokens"]


def test_prohibitions_keep_the_three_way_split_and_teach_no_copying(tokenizer):
    """Held-out prohibitions carry held-out wording and validation ones validation wording; no
    training prohibition (fixed or composed) carries either. A prohibition example forbids a word
    its continuation never uses, and the word is recorded as mentioned, not as a target."""
    for t in D.HELDOUT_PROHIBITIONS:
        assert markers_in(D.HELDOUT_MARKERS, t) and not markers_in(D.VALIDATION_MARKERS, t), t
    for t in D.VALIDATION_PROHIBITIONS:
        assert markers_in(D.VALIDATION_MARKERS, t) and not markers_in(D.HELDOUT_MARKERS, t), t
    rng = random.Random(3)
    composed = {D.compose_prohibition(rng) for _ in range(3000)}
    assert len(composed) > 1000
    for text in (*D.TRAIN_PROHIBITIONS, *D.GRAMMAR_PROHIBITIONS, *composed):
        assert not markers_in(D.HELDOUT_MARKERS + D.VALIDATION_MARKERS, text), text
        assert any(slot in text for slot in ("{word}", "{a_word}", "{X}", "{C}")), text
    assert not set(D.TRAIN_PROHIBITIONS) & set(D.TRAIN_TEMPLATES)
    for i in range(20):
        ex = D.synthesize("prohibition", STORIES[0] * 2, STORIES[(i % (len(STORIES) - 1)) + 1], random.Random(i))
        if ex is None:
            continue
        (word,) = ex.mentioned
        sentence = ex.context[ex.insert[0]:ex.insert[1]]
        assert ex.kind == "prohibition" and ex.target is None and word in sentence
        assert any(D.template_regex(t).fullmatch(sentence) for t in D.TRAIN_PROHIBITIONS), sentence
        assert not D.target_hit(word, ex.opening + ex.continuation)
