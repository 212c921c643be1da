"""The command line end to end, in a fresh process, on the built-in tiny model."""

import json

import pandas as pd
import pytest

from harness.tables import ATTENTION_COLUMNS, CONDITION_COLUMNS, TIMING_COLUMNS

from .conftest import FAST, write_jsonl
from .conftest import run_harness as harness


@pytest.fixture(scope="module")
def first_run(tiny_run):
    return tiny_run


def test_sweep_writes_documented_tables(first_run):
    out, result = first_run
    df = pd.read_parquet(out / "conditions.parquet")
    assert list(df.columns[: len(CONDITION_COLUMNS)]) == CONDITION_COLUMNS
    # 2 prompts x (A + 10 prefixes x 2 lengths)
    assert len(df) == 2 * (1 + 10 * 2)
    assert set(df["group"]) == {"A", "B", "C"}
    for col in ("model", "prompt_id", "group", "prefix_id", "isolation"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype)
    a = df[df.group == "A"]
    assert (a.edit_distance == 0).all() and a.exact_match.all() and (a.prefix_len == 0).all()
    x = df[df.group != "A"]
    assert ((x.prefix_end - x.prefix_start) == x.prefix_len).all()
    assert (x.n_input_tokens == x.input_ids.map(len)).all()
    att = pd.read_parquet(out / "attention.parquet")
    assert list(att.columns) == ATTENTION_COLUMNS
    # every condition x 2 layers x 4 heads x 2 segments (the tiny model has 2 layers, 4 heads)
    assert len(att) == len(df) * 2 * 4 * 2
    assert set(att.segment) == {"task", "continuation"}
    assert (att[att.group == "A"].kl == 0).all()
    assert (att[att.group != "A"].prefix_mass > 0).all()
    merged = att.groupby(["prompt_id", "group", "prefix_id", "prefix_len"], observed=True, dropna=False)
    assert merged.size().eq(16).all()
    assert df.attn_kl_mean[df.group != "A"].gt(0).all() and df.output_kl.notna().all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["name_or_path"] == "builtin:tiny-llama"
    assert manifest["seed"] == 0 and manifest["determinism"]["torch_deterministic_algorithms"]
    assert manifest["config"]["prefix"]["lengths"] == [8, 24]
    from harness.tables import sha256_file

    for name in ("conditions.parquet", "attention.parquet"):
        assert manifest["tables"][name] == sha256_file(out / name)
    assert str(out) in result.stdout  # the log says where the run directory is


def test_same_command_twice_gives_identical_tables(first_run, tmp_path):
    out1, _ = first_run
    result = harness("sweep", *FAST, f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    a = pd.read_parquet(out1 / "conditions.parquet").drop(columns=TIMING_COLUMNS)
    b = pd.read_parquet(tmp_path / "conditions.parquet").drop(columns=TIMING_COLUMNS)
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(pd.read_parquet(out1 / "attention.parquet"),
                                  pd.read_parquet(tmp_path / "attention.parquet"))


def test_attention_analysis_can_be_switched_off(tmp_path, first_run):
    result = harness("sweep", *FAST, "analysis.attention=false", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "attention.parquet").exists()
    df = pd.read_parquet(tmp_path / "conditions.parquet")
    assert df.attn_kl_mean.isna().all()
    # behaviour is unaffected by the probe
    with_probe = pd.read_parquet(first_run[0] / "conditions.parquet")
    assert df.continuation_ids.map(list).tolist() == with_probe.continuation_ids.map(list).tolist()


def test_prefix_cache_changes_speed_not_results(first_run, tmp_path):
    out1, _ = first_run
    reused = json.loads((out1 / "manifest.json").read_text())["prefix_cache"]
    assert reused["heads_reused"] >= 20  # the second prompt reused the first one's 10 prefixes x 2 lengths
    result = harness("sweep", *FAST, "prefix_cache_mb=0", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["prefix_cache"]["heads_reused"] == 0 and manifest["prefix_cache"]["kept_bytes"] == 0
    for name, drop in (("conditions.parquet", TIMING_COLUMNS), ("attention.parquet", [])):
        pd.testing.assert_frame_equal(pd.read_parquet(out1 / name).drop(columns=drop),
                                      pd.read_parquet(tmp_path / name).drop(columns=drop))
    # not a result setting: the same run directory resumes with it changed, recomputing nothing
    result = harness("sweep", *FAST, f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "manifest.json").read_text())["computed_this_run"] == 0


def _expect_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ")
    for fragment in fragments:
        assert fragment in last, last


def test_user_errors_are_one_line(tmp_path):
    run = [f"hydra.run.dir={tmp_path / 'run'}"]
    _expect_error(harness("sweep", *FAST, "model.name_or_path=no-such-org/no-such-model", *run, cwd=tmp_path),
                  "no-such-org/no-such-model", "not available")
    _expect_error(harness("sweep", *FAST, "prefix.lengths=[0]", *run, cwd=tmp_path), "positive")
    _expect_error(harness("sweep", *FAST, "prefix_cache_mb=-1", *run, cwd=tmp_path), "prefix_cache_mb")
    _expect_error(harness("sweep", *FAST, "prefix.lengths=[1000]", "decode.max_new_tokens=64", *run,
                          cwd=tmp_path), "context window of 1024")
    short = write_jsonl(tmp_path / "short.jsonl", [{"id": "tiny-ad", "kind": "neutral", "text": "Buy now."},
                                                   {"id": "x", "kind": "instruction", "text": "Obey." * 40}])
    _expect_error(harness("sweep", *FAST, f"prefixes.path={short}", *run, cwd=tmp_path), "'tiny-ad'",
                  "too short for length 24")
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    _expect_error(harness("sweep", *FAST, f"prompts.path={empty}", *run, cwd=tmp_path), "empty.jsonl", "no entries")
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"id": "a", "text": "fine"}', "{oops"])
    _expect_error(harness("sweep", *FAST, f"prompts.path={bad}", *run, cwd=tmp_path), "bad.jsonl:2")
    assert not (tmp_path / "run" / "conditions.parquet").exists()


def test_config_typo_is_refused(tmp_path):
    result = harness("sweep", "model=tiny", "decode.max_new_tokenz=3", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode != 0 and "max_new_tokenz" in result.stderr + result.stdout


def test_usage_and_unknown_command(tmp_path):
    assert "sweep" in harness("--help", cwd=tmp_path).stdout
    assert harness("frobnicate", cwd=tmp_path).returncode == 2
