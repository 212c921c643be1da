"""One rule for every command that reads several runs together (issue #48): ``collect``, ``claims``,
``figures`` and ``causal-heads`` refuse runs whose numbers one table cannot hold silently (another
max_new_tokens, decode path, special-token handling or metric set; for one model other weights,
tokenizer, dtype, linear precision or device) with the same line, and ``--allow-mixed-settings`` lets each of them
through."""

import pytest

from harness.cli import main
from harness.errors import HarnessError
from harness.runs.reading import load_runs
from tests.support import SMALL_PREFIXES, one_line_error, sweep

BASE = ["model=tiny", "prefix.lengths=[8]", "prompts.limit=1", f"prefixes.path={SMALL_PREFIXES}",
        "draw_figures=false", "analysis.noise_floor=false"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Runs of the same prompts and prefixes that differ in one result setting each."""
    root = tmp_path_factory.mktemp("compat")
    made = {}
    for name, setting in {"n4": ["decode.max_new_tokens=4"], "n6": ["decode.max_new_tokens=6"],
                          "stepwise": ["decode.max_new_tokens=4", "decode.path=stepwise"],
                          "none": ["decode.max_new_tokens=4", "decode.path=none"],
                          "bf16": ["decode.max_new_tokens=4", "model.linear_dtype=bfloat16"]}.items():
        made[name] = sweep(root / name, *BASE, *setting)
    return made


def commands(a, b, out):
    return {"collect": ["collect", str(a), str(b), "--out", str(out / "collected"), "--allow-disagreement"],
            "claims": ["claims", str(a), str(b), "--out", str(out / "claims"), "--resamples", "20"],
            "figures": ["figures", str(a), str(b), "--out", str(out / "figures")]}


@pytest.mark.parametrize("pair, setting", [(("n4", "n6"), "max_new_tokens"), (("n4", "stepwise"), "decode_path"),
                                           (("n4", "none"), "decode_path"), (("stepwise", "none"), "decode_path"),
                                           (("n4", "bf16"), "linear_dtype for model builtin:tiny-llama")])
def test_every_reader_of_several_runs_refuses_mixed_settings_alike(runs, pair, setting, tmp_path, capsys):
    a, b = (runs[p] for p in pair)
    lines = {}
    for name, argv in commands(a, b, tmp_path).items():
        lines[name] = one_line_error(capsys, argv)
        assert f"the runs differ in {setting} (" in lines[name] and "--allow-mixed-settings" in lines[name], lines[name]
    with pytest.raises(HarnessError, match=f"the runs differ in {setting}"):
        load_runs([a, b])


def test_allow_mixed_settings_lets_every_reader_through(runs, tmp_path):
    a, b = runs["n4"], runs["n6"]
    conditions, _ = load_runs([a, b], allow_mixed_settings=True)
    assert len(conditions) == len(load_runs([a])[0]) + len(load_runs([b])[0])
    argv = commands(a, b, tmp_path)
    assert main([*argv["collect"], "--allow-mixed-settings"]) == 0
    assert main([*argv["claims"], "--allow-mixed-settings"]) == 0
    # a collected directory keeps the settings of its sources: reading it is the same mix
    collected = tmp_path / "collected"
    with pytest.raises(HarnessError, match="the runs differ in max_new_tokens"):
        load_runs([collected])
    with pytest.raises(HarnessError, match="the runs differ in max_new_tokens"):
        load_runs([collected, runs["stepwise"]], allow_mixed_settings=False)
    # the keys do not hold max_new_tokens: collect kept the first run's copy of each (it said so)
    assert len(load_runs([collected], allow_mixed_settings=True)[0]) == len(load_runs([a])[0])


def test_runs_of_one_setting_read_together_without_a_flag(runs, tmp_path):
    from harness.runs.reading import read_runs  # the tables alone: a run given twice is load_runs' to refuse

    conditions, _ = read_runs([runs["n4"], runs["n4"]])  # read once each, as collect keeps them
    assert len(conditions) == len(load_runs([runs["n4"]])[0])


def test_a_notebook_reads_runs_as_the_commands_do(runs, tmp_path):
    """H.load_runs([RUN, RUN]) returned every condition twice, and load_run of a failed run its
    survivors, without a word (every command refuses both)."""
    import json
    import shutil

    from harness.errors import HarnessError
    from harness.io import open_json_seal, write_sealed_json
    from harness.runs.reading import load_run

    with pytest.raises(HarnessError, match="is given twice"):
        load_runs([runs["n4"], runs["n4"]])
    failed = tmp_path / "failed"
    shutil.copytree(runs["n4"], failed)
    status, _ = open_json_seal(json.loads((failed / "status.json").read_text()))
    write_sealed_json({**status, "status": "failed", "failed": ["x/y/8"]}, failed / "status.json")
    with pytest.raises(HarnessError, match="is a failed run"):
        load_run(failed)
    with pytest.warns(UserWarning, match="conditions failed and are missing"):
        assert len(load_run(failed, allow_failed=True).conditions) == len(load_runs([runs["n4"]])[0])


def test_runs_continued_by_other_engines_or_engine_settings_are_mixed_settings():
    """Two vLLM runs of one model at other dtypes or prefix-cache block sizes round apart, and a
    harness run is not a vLLM run: the rule names the engine (``backend``) for that model."""
    from harness.runs.compat import Settings, mixed_settings, settings_of

    base = {"schema": 3, "model": "m", "max_new_tokens": 8, "decode_path": "vllm", "dtype": "float32"}
    fp32 = settings_of({**base, "backend": "vllm 0.32.0 float32 block 32"})
    bf16 = settings_of({**base, "backend": "vllm 0.32.0 bfloat16 block 32"})
    block = settings_of({**base, "backend": "vllm 0.32.0 float32 block 128"})
    assert mixed_settings([Settings("a", fp32), Settings("b", fp32)]) == []
    for other in (bf16, block):
        (found,) = mixed_settings([Settings("a", fp32), Settings("b", other)])
        assert found.startswith("backend for model m (")
    harness = settings_of({**base, "decode_path": "stepwise"})
    assert "backend" in " ".join(mixed_settings([Settings("a", fp32), Settings("b", harness)]))
