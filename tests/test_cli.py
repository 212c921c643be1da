"""The command line end to end, in a fresh process, on the built-in tiny model."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.tables import CONDITION_COLUMNS, TIMING_COLUMNS

from .conftest import write_jsonl

FAST = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2"]


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run1")
    result = harness("sweep", *FAST, f"hydra.run.dir={out}", cwd=out)
    assert result.returncode == 0, result.stderr
    return out, result


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
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["name_or_path"] == "builtin:tiny-llama"
    assert manifest["seed"] == 0 and manifest["determinism"]["torch_deterministic_algorithms"]
    assert manifest["config"]["prefix"]["lengths"] == [8, 24]
    from harness.tables import sha256_file

    assert manifest["tables"]["conditions.parquet"] == sha256_file(out / "conditions.parquet")
    assert str(out) in result.stdout  # the log says where the run directory is


def test_same_command_twice_gives_identical_tables(first_run, tmp_path):
    out1, _ = first_run
    result = harness("sweep", *FAST, f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    a = pd.read_parquet(out1 / "conditions.parquet").drop(columns=TIMING_COLUMNS)
    b = pd.read_parquet(tmp_path / "conditions.parquet").drop(columns=TIMING_COLUMNS)
    pd.testing.assert_frame_equal(a, b)


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
