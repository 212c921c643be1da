"""A run directory that cannot be corrupted, confused or lied to: self-verifying results, the lock,
the status written last, and the store, tables and keys as units."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from harness.errors import HarnessError
from harness.io import read_table
from harness.runs.rundir import RunDir
from harness.runs.schema import TIMING_COLUMNS
from harness.runs.store import CorruptResult, ResultStore
from tests.support import SMALL_PREFIXES, sweep

SMALL = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2", "draw_figures=false",
         f"prefixes.path={SMALL_PREFIXES}", "analysis.noise_floor=false"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run, and its tables."""
    run = sweep(tmp_path_factory.mktemp("reference"), *SMALL)
    return run, tables(run)


def tables(run):
    return (pd.read_parquet(run / "conditions.parquet").drop(columns=TIMING_COLUMNS),
            pd.read_parquet(run / "attention.parquet"))


def assert_same_tables(a, b):
    for x, y in zip(a, b):
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def _truncate(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _empty(p):
    p.write_bytes(b"")


def _flip(p):
    """Flip one bit in the middle of a stored array's bytes (not in zip bookkeeping that nothing
    reads, where a flip would be harmless)."""
    import zipfile

    with zipfile.ZipFile(p) as z:
        info = z.getinfo("meta.npy")
    data = bytearray(p.read_bytes())
    name_len, extra_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
        int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
    start = info.header_offset + 30 + name_len + extra_len
    data[start + info.compress_size // 2] ^= 0x40
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _empty, _flip])
def test_damaged_results_are_named_quarantined_and_recomputed(reference, tmp_path, damage, caplog):
    ref_run, ref_tables = reference
    run = tmp_path / "run"
    shutil.copytree(ref_run, run)
    victims = sorted((run / "results").glob("*.npz"))[3:5]
    for p in victims:
        damage(p)
    sweep(run, *SMALL)
    m = json.loads((run / "manifest.json").read_text())
    assert m["computed_this_run"] == 2 and m["reused"] == 40
    for p in victims:
        assert any(p.name in r.message and "recomputing" in r.message for r in caplog.records)
        assert (run / "quarantine" / p.name).is_file()
    assert_same_tables(tables(run), ref_tables)
    assert json.loads((run / "status.json").read_text())["status"] == "complete"


def test_a_result_under_another_name_is_not_trusted(reference, tmp_path, caplog):
    ref_run, ref_tables = reference
    run = tmp_path / "run"
    shutil.copytree(ref_run, run)
    files = sorted((run / "results").glob("*.npz"))
    shutil.copyfile(files[0], files[1])  # a valid result, under the wrong condition's key
    sweep(run, *SMALL)
    assert any("holds the result of another condition" in r.message for r in caplog.records)
    assert json.loads((run / "manifest.json").read_text())["computed_this_run"] == 1
    assert_same_tables(tables(run), ref_tables)  # no condition twice, none lost


def test_a_locked_run_directory_is_refused_untouched(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference[0], run)
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    with RunDir(run).claim(json.loads((run / "run_fingerprint.json").read_text())["config"], "auto"):
        after_claim = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}
        with pytest.raises(HarnessError, match=r"another sweep or resume is writing to .* \(pid \d+ on .*since"):
            sweep(run, *SMALL)
        assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"} == after_claim
    assert {p for p in before} == {p for p in after_claim} | {run / ".lock"}


def test_a_damaged_fingerprint_is_a_clear_error(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference[0], run)
    (run / "run_fingerprint.json").write_text("{not json")
    with pytest.raises(HarnessError, match="run_fingerprint.json is unreadable"):
        sweep(run, *SMALL)


def test_status_turns_complete_only_after_the_report(tmp_path, monkeypatch):
    import harness.runs.runner

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(harness.runs.runner, "write_outputs", broken)
    with pytest.raises(OSError):
        sweep(tmp_path, *SMALL[:4], "draw_figures=true", *SMALL[5:])
    status = json.loads((tmp_path / "status.json").read_text())  # never "complete", nor "running" forever
    assert status["status"] == "error" and "No space left on device" in status["error"]
    assert "No space left on device" in RunDir(tmp_path).problem()


def test_unwritable_output_is_one_line(tmp_path):
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)  # a run's folder (Hydra made it), not a folder of the user's
    (run / "conditions.parquet").mkdir()  # a directory where the table must go: the write fails
    with pytest.raises(HarnessError, match=r"cannot write .*conditions.parquet"):
        sweep(run, *SMALL)


# -- units ---------------------------------------------------------------------------------------

def test_store_roundtrip_and_verification(tmp_path):
    store = ResultStore(tmp_path)
    record = {"prompt_id": "p", "output_kl": 0.25, "continuation_ids": [1, 2], "beta": None}
    attention = {"task": {"kl": np.arange(6, dtype=np.float32).reshape(2, 3)}}
    store.save("k1", record, attention, {"task": 3})
    loaded = store.load("k1")
    assert loaded.record == record and loaded.n_queries == {"task": 3}
    np.testing.assert_array_equal(loaded.attention["task"]["kl"], attention["task"]["kl"])
    assert store.verify(["k1", "missing"]) == {"k1"}
    shutil.copyfile(store.path("k1"), store.path("k2"))
    with pytest.raises(CorruptResult, match="another condition"):
        store.load("k2")
    _flip(store.path("k1"))
    with pytest.raises(CorruptResult):
        store.load("k1")
    assert store.verify(["k1", "k2"]) == set()
    assert sorted(p.name for p in (tmp_path / "quarantine").iterdir()) == ["k1.npz", "k2.npz"]


def test_failures_are_recorded_and_cleared_by_a_success(tmp_path):
    store = ResultStore(tmp_path)
    store.record_failure("k", {"condition": "p/x/8"}, RuntimeError("out of memory\nmore detail"))
    assert store.failed() == [{"condition": "p/x/8", "error_type": "RuntimeError", "error": "out of memory"}]
    (tmp_path / "failures" / "bad.json").write_text("{")
    assert len(store.failed()) == 1  # an unreadable record is skipped, not fatal
    store.save("k", {}, {}, {})
    assert not (tmp_path / "failures" / "k.json").exists()


def test_damaged_table_is_a_clear_error(tmp_path):
    path = tmp_path / "conditions.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(path)
    assert read_table(path).a.tolist() == [1, 2]
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(HarnessError, match="conditions.parquet is not a readable parquet table"):
        read_table(path)


def test_condition_keys_change_with_every_input(tiny_run):
    from harness.config import compose
    from harness.runs.experiment import Experiment

    exp = Experiment.build(compose(SMALL))
    keys = exp.keys()
    assert len(set(keys.values())) == len(exp.conditions)  # no two conditions share a key
    before = dict(keys)
    exp.result_fingerprint["max_new_tokens"] += 1
    assert all(exp.keys()[c] != before[c] for c in exp.conditions)
    exp.result_fingerprint["max_new_tokens"] -= 1
    assert exp.keys() == before
