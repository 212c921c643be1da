"""The noise floor: its size and spread, and that reusing the sweep's batched results is exactly
what computing them again would give."""

import json

import pandas as pd

from harness.paths import DATA_DIR
from harness.inputs.conditions import build_conditions
from harness.inputs.texts import load_prefixes, load_prompts
from harness.measure.driver import drive
from harness.measure.engine import Engine
from harness.measure.noise import measure_noise_floor, noise_cells, noise_sample, noise_size
from harness.model.builtin import build_tiny
from harness.model.linear_precision import lower_linears
from harness.model.probe import install_probe
from tests.support import SMALL_PREFIXES, sweep


def test_noise_size_is_a_fraction_with_a_floor_and_a_ceiling():
    assert noise_size(160, 0.1, 8, 40) == 16
    assert noise_size(40, 0.1, 8, 40) == 8  # the floor
    assert noise_size(4000, 0.1, 8, 40) == 40  # the ceiling
    assert noise_size(15, 0.1, 8, 40) == 4  # a small pilot: at most a quarter of its conditions, rounded up
    assert noise_size(2, 0.1, 8, 40) == 1  # and never fewer than one


def test_noise_size_takes_one_condition_from_every_cell():
    assert noise_size(160, 0.05, 8, 40, cells=8) == 8  # the default sweep at 4 prompts: the floor
    assert noise_size(120, 0.05, 8, 40, cells=12) == 12  # 2 groups x 2 lengths x 3 isolation settings
    assert noise_size(4000, 0.05, 8, 40, cells=100) == 40  # the ceiling still holds
    assert noise_size(24, 0.05, 8, 40, cells=12) == 6  # and so does a quarter of a small pilot


def test_a_fraction_asked_for_is_taken_whole():
    """Pass 22 #84 (silent): noise_fraction=1 gave a quarter of the conditions, without a word."""
    assert noise_size(16, 1.0, 16, 16) == 16
    assert noise_size(16, 0.5, 8, 40) == 8
    assert noise_size(16, 0.05, 16, 40) == 4  # a minimum alone stays within a quarter (the runner says so)


def test_noise_cells_counts_group_length_and_isolation():
    _, _, conds = conditions()  # groups B and C at lengths 8 and 16, no isolation
    assert noise_cells(conds) == 4
    assert noise_cells([c for c in conds if c.group == "A"]) == 0


def conditions():
    model, tok = build_tiny("llama", seed=3)
    prompts = load_prompts(DATA_DIR / "prompts_en.jsonl")[:3]
    conds = build_conditions(tok, prompts, load_prefixes(SMALL_PREFIXES), groups=["A", "B", "C"], lengths=[8, 16],
                             separator="\n\n", bos_policy="auto")
    return model, tok, conds


def test_noise_sample_spreads_over_prompts_and_groups_and_brings_each_prompts_a():
    _, _, conds = conditions()  # 3 prompts x 20 B/C conditions
    sample = noise_sample(conds, 6)
    others = [c for c in sample if c.group != "A"]
    assert len(others) == 6 and len({c.prompt_id for c in others}) == 3 and {c.group for c in others} == {"B", "C"}
    assert {c.prompt_id for c in sample if c.group == "A"} == {c.prompt_id for c in others}
    assert sample == [c for c in conds if c in set(sample)]  # in the sweep's order, A before its prompt's others


def test_reusing_the_sweeps_batched_results_equals_computing_them_again():
    model, tok, conds = conditions()
    install_probe(model)
    engine = Engine(model, tok.eos_token_id, 6, attention=True)
    sample = noise_sample(conds, 8)
    kept, references = {}, {}

    def keep(r, ref, alone):
        references[ref.condition.prompt_id] = ref
        if r.condition in set(sample):
            kept[r.condition] = r

    drive(engine, conds, batch_size=4, progress=False, on_result=keep)
    calls = []
    computed_a = engine.reference
    engine.reference = lambda cond: calls.append(cond) or computed_a(cond)
    reused = measure_noise_floor(engine, conds, sample, 4, "m", kept, progress=False, references=references)
    assert calls == []  # the sweep's A of every sampled prompt was reused, none computed again
    recomputed = measure_noise_floor(engine, conds, sample, 4, "m", {}, progress=False)  # as after a resume
    # batched side (each prompt's planned batches) and alone side: A again per sampled prompt
    assert len(calls) == 2 * len({c.prompt_id for c in sample}) >= 4
    assert len(reused) == 8
    pd.testing.assert_frame_equal(reused, recomputed, check_exact=True)


def test_a_resumed_sweep_measures_the_same_noise_floor(tmp_path):
    args = ["model=tiny", "prompts.limit=2", "prefix.lengths=[8,24]", "decode.max_new_tokens=6",
            f"prefixes.path={SMALL_PREFIXES}", "draw_figures=false"]
    first = pd.read_parquet(sweep(tmp_path / "run", *args) / "noise.parquet")
    (tmp_path / "run" / "noise.parquet").unlink()
    again = pd.read_parquet(sweep(tmp_path / "run", *args) / "noise.parquet")  # every result reused from disk
    pd.testing.assert_frame_equal(first, again, check_exact=True)


def test_with_lowered_products_the_floors_alone_side_is_the_full_precision_computation():
    """A sweep whose linear layers multiply in bfloat16: the noise floor's alone side runs them at
    full precision, A included, so what it compares against is bit for bit an unlowered model's
    step-by-step, one-at-a-time results; the difference it measures is the lowering's too."""
    model, tok, conds = conditions()
    install_probe(model)
    plain = Engine(model, tok.eos_token_id, 6, attention=True)
    sample = noise_sample(conds, 6)
    exact = {}
    drive(plain, sample, batch_size=1, progress=False, on_result=lambda r, ref, alone: exact.__setitem__(r.condition, r))
    lower_linears(model, "bfloat16")
    lowered = Engine(model, tok.eos_token_id, 6, attention=True, decode_path="teacher_forced", linear_dtype="bfloat16")
    alone = lowered.variant(decode_path="stepwise", exact=True)
    assert alone.prefix_cache is not lowered.prefix_cache  # heads computed at full precision
    again = {}
    drive(alone, sample, batch_size=1, progress=False, on_result=lambda r, ref, a: again.__setitem__(r.condition, r))
    for cond, want in exact.items():
        got = again[cond]
        assert got.continuation == want.continuation and got.output_kl == want.output_kl
        for segment in want.attention:
            for metric, values in want.attention[segment].items():
                assert (got.attention[segment][metric] == values).all(), (cond, segment, metric)
    floor = measure_noise_floor(lowered, conds, sample, 4, "m", {}, progress=False, references={})
    assert set(floor.comparison) == {"batch_bfloat16_products_vs_alone_exact"}
    assert (floor.logp_max_diff > 0).all()  # the lowering moved every sampled condition's log-probs


def test_a_sweep_with_lowered_products_says_so_and_keys_its_results_apart(tmp_path):
    fast = ["model=tiny", "prompts.limit=1", "prefixes.per_group=2", "prefix.lengths=[8]", "decode.max_new_tokens=4"]
    run = sweep(tmp_path / "run", *fast, "model.linear_dtype=bfloat16")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["model"]["linear_dtype"] == "bfloat16" and manifest["model"]["linear_layers_lowered"] > 0
    assert manifest["result_fingerprint"]["linear_dtype"] == "bfloat16"
    plain = json.loads((sweep(tmp_path / "plain", *fast, "draw_figures=false") / "manifest.json").read_text())
    assert plain["model"]["linear_dtype"] is None and "linear_dtype" not in plain["result_fingerprint"]
    assert "full precision" in (run / "report.md").read_text()


def test_noise_sample_gives_every_length_and_isolation_setting_its_share():
    """Pass 14, #29: 8 of 80 conditions under isolation [none, mask, mask_reset, decay(1), decay(4)] at
    lengths 8 and 24 were all isolation none at length 8 (every k-th of the sweep's order fell there),
    though the report says the sample is spread over the run."""
    from harness.inputs.isolation import Isolation

    _, _, conds = conditions()
    settings = [Isolation(), Isolation("mask"), Isolation("decay", beta=1.0)]
    swept = [c if c.group == "A" else c.__class__(**{**c.__dict__, "isolation": s}) for c in conds
             for s in ([Isolation()] if c.group == "A" else settings)]
    others = [c for c in noise_sample(swept, 12) if c.group != "A"]
    cells = {(c.group, c.prefix_len, c.isolation) for c in others}
    assert len(others) == 12 and len(cells) == 12  # 2 groups x 2 lengths x 3 settings, one each
    assert len({c.prompt_id for c in others}) == 3
