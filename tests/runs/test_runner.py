"""A sweep end to end, in-process: the documented tables, reproducibility, switches, user errors."""

import json

import pandas as pd
import pytest

from harness.errors import HarnessError
from harness.io import sha256_file
from harness.runs.schema import ATTENTION_COLUMNS, CONDITION_COLUMNS, TIMING_COLUMNS
from tests.support import FAST, sweep, write_jsonl


def test_sweep_writes_documented_tables(tiny_run):
    out = tiny_run
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
    assert not df.computed_alone.any()
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
    assert manifest["model"]["attn_implementation"] == "sdpa" and manifest["model"]["probe"] == "harness_probe_sdpa"
    assert manifest["seed"] == 0 and manifest["determinism"]["torch_deterministic_algorithms"]
    assert manifest["config"]["prefix"]["lengths"] == [8, 24] and manifest["special_tokens_in_data"] == "text"
    for name in ("conditions.parquet", "attention.parquet", "noise.parquet"):
        assert manifest["tables"][name] == sha256_file(out / name)
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "complete" and status["conditions"] == 42
    assert (out / "report.md").is_file() and (out / "sweep.log").stat().st_size > 0
    assert (out / ".hydra" / "overrides.yaml").read_text().count("model=tiny") == 1


def test_same_config_twice_gives_identical_tables(tiny_run, tmp_path):
    sweep(tmp_path, *FAST)
    for name, drop in (("conditions.parquet", TIMING_COLUMNS), ("attention.parquet", []), ("noise.parquet", [])):
        pd.testing.assert_frame_equal(pd.read_parquet(tiny_run / name).drop(columns=drop),
                                      pd.read_parquet(tmp_path / name).drop(columns=drop), check_exact=True)


def test_attention_analysis_can_be_switched_off(tmp_path, tiny_run):
    sweep(tmp_path, *FAST, "analysis.attention=false")
    assert not (tmp_path / "attention.parquet").exists()
    df = pd.read_parquet(tmp_path / "conditions.parquet")
    assert df.attn_kl_mean.isna().all()
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["model"]["attn_implementation"] == "sdpa"  # no probe installed when nothing needs it
    with_probe = pd.read_parquet(tiny_run / "conditions.parquet")  # behaviour is unaffected by the probe
    assert df.continuation_ids.map(list).tolist() == with_probe.continuation_ids.map(list).tolist()


def test_a_one_prompt_sweep_keeps_only_the_heads_its_noise_floor_reads_again(tmp_path):
    """A head is kept while a later condition needs it: in a one-prompt sweep, only the noise floor's
    sampled conditions read theirs again (kept for it, not recomputed), and the batch size does not
    change a result."""
    sweep(tmp_path / "auto", *FAST, "prompts.limit=1")
    cache = json.loads((tmp_path / "auto" / "manifest.json").read_text())["prefix_cache"]
    sampled = len(pd.read_parquet(tmp_path / "auto" / "noise.parquet"))
    assert sampled > 0 and cache["heads_reused"] == sampled and cache["heads_computed"] == 20  # 10 prefixes x 2
    sweep(tmp_path / "one", *FAST, "prompts.limit=1", "batch_size=1")
    for name, drop in (("conditions.parquet", TIMING_COLUMNS), ("attention.parquet", [])):
        pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "auto" / name).drop(columns=drop),
                                      pd.read_parquet(tmp_path / "one" / name).drop(columns=drop), check_exact=False,
                                      rtol=1e-4, atol=1e-6)


def test_prefix_cache_changes_speed_not_results(tiny_run, tmp_path):
    reused = json.loads((tiny_run / "manifest.json").read_text())["prefix_cache"]
    assert reused["heads_reused"] >= 20  # the second prompt reused the first one's 10 prefixes x 2 lengths
    sweep(tmp_path, *FAST, "prefix_cache_mb=0")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["prefix_cache"]["heads_reused"] == 0 and manifest["prefix_cache"]["kept_bytes"] == 0
    for name, drop in (("conditions.parquet", TIMING_COLUMNS), ("attention.parquet", [])):
        pd.testing.assert_frame_equal(pd.read_parquet(tiny_run / name).drop(columns=drop),
                                      pd.read_parquet(tmp_path / name).drop(columns=drop), check_exact=True)
    # not a result setting: the same run directory resumes with it changed, recomputing nothing
    sweep(tmp_path, *FAST)
    assert json.loads((tmp_path / "manifest.json").read_text())["computed_this_run"] == 0


def test_prefix_subset_is_reproducible(tmp_path):
    run = sweep(tmp_path / "first", "model=tiny", "prefix.lengths=[8]", "decode.max_new_tokens=2", "prompts.limit=1",
                "prefixes.per_group=3", "analysis.noise_floor=false", "draw_figures=false")
    df = pd.read_parquet(run / "conditions.parquet")
    assert df.groupby("group", observed=True).prefix_id.nunique().to_dict() == {"A": 0, "B": 3, "C": 3}
    again = sweep(tmp_path / "again", "model=tiny", "prefix.lengths=[8]", "decode.max_new_tokens=2", "prompts.limit=1",
                  "prefixes.per_group=3", "analysis.noise_floor=false", "draw_figures=false")
    assert set(pd.read_parquet(again / "conditions.parquet").prefix_id.dropna()) == set(df.prefix_id.dropna())


@pytest.mark.parametrize("overrides, fragments", [
    (["model.name_or_path=no-such-org/no-such-model"], ["no-such-org/no-such-model", "not available"]),
    (["prefix.lengths=[0]"], ["prefix.lengths", "positive"]),
    (["prefix.lengths=[]"], ["prefix.lengths is empty"]),
    (["prefix_cache_mb=-1"], ["prefix_cache_mb"]),
    (["analysis.noise_min=0"], ["analysis.noise_min"]),
    (["isolation=[]"], ["isolation is empty"]),
    (["locate.coarse=[]"], ["locate.coarse"]),
    (["+decode.max_tokens=8"], ["max_tokens"]),
    (["prefix.lengths=[1000]", "decode.max_new_tokens=64"], ["context window of 1024"]),
])
def test_user_errors_are_one_line_and_touch_nothing(tmp_path, overrides, fragments):
    run_dir = tmp_path / "run"
    with pytest.raises(HarnessError) as info:
        sweep(run_dir, *FAST, *overrides)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert not (run_dir / "conditions.parquet").exists()


def test_bad_input_files_name_the_file(tmp_path):
    short = write_jsonl(tmp_path / "short.jsonl", [{"id": "tiny-ad", "kind": "neutral", "text": "Buy now."},
                                                   {"id": "x", "kind": "instruction", "text": "Obey." * 40}])
    with pytest.raises(HarnessError, match="'tiny-ad'.*too short for length 24"):
        sweep(tmp_path / "a", *FAST, f"prefixes.path={short}")
    empty = write_jsonl(tmp_path / "empty.jsonl", [])
    with pytest.raises(HarnessError, match="empty.jsonl.*no entries"):
        sweep(tmp_path / "b", *FAST, f"prompts.path={empty}")
    bad = write_jsonl(tmp_path / "bad.jsonl", ['{"id": "a", "text": "fine"}', "{oops"])
    with pytest.raises(HarnessError, match="bad.jsonl:2"):
        sweep(tmp_path / "c", *FAST, f"prompts.path={bad}")
