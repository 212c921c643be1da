"""Fault injection for the run directory's last gaps: a table changed after the run wrote it, a
result file damaged in ways numpy reports with unusual exceptions, a sweep that cannot start
pointed at a finished run, and a damaged result nobody may move. Each is refused or repaired in one
line, never read silently and never a traceback. (The hub-commit content key is tested in
tests/model/test_loading.py; collect across settings in tests/runs/test_sweeps.py.)"""

import json
import os
import shutil
import tokenize

import numpy as np
import pandas as pd
import pytest

import harness as H
from harness.cli import main
from harness.errors import HarnessError
from harness.runs import store as store_module
from harness.runs.rundir import RunDir
from harness.runs.store import ResultStore
from tests.support import FAST, sweep


def snapshot(run):
    skip = ("sweep.log", ".lock")  # a log of the attempt, and the lock's holder
    return {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name not in skip}


@pytest.fixture
def run_copy(tiny_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    return copy


def nudge_a_value(path):
    """0.75 -> 0.7501 in one cell: a readable table that is not the one the run wrote."""
    df = pd.read_parquet(path)
    df.loc[df.index[-1], "norm_edit_distance"] += 1e-4
    df.to_parquet(path, index=False)


def test_a_changed_table_is_refused_by_every_reader_unless_trusted(run_copy, tmp_path, capsys):
    nudge_a_value(run_copy / "conditions.parquet")
    for argv in (["figures", str(run_copy)], ["claims", str(run_copy), "--out", str(tmp_path / "c")],
                 ["collect", str(run_copy), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "conditions.parquet is not the table this run wrote" in err and err.count("\n") == 1, argv
    with pytest.raises(HarnessError, match="not the table this run wrote"):
        H.load_run(run_copy)
    tables = H.load_run(run_copy, trust_damaged=True)
    assert len(tables.conditions) == len(pd.read_parquet(run_copy / "conditions.parquet"))
    assert main(["figures", str(run_copy), "--trust-damaged"]) == 0


def test_a_damaged_attention_or_noise_table_is_refused_too(run_copy):
    for name in (RunDir.ATTENTION, RunDir.NOISE):
        path = run_copy / name
        if not path.is_file():
            continue
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(HarnessError, match=f"{name} is not the table this run wrote"):
            RunDir(run_copy).table(name)


def test_resume_rebuilds_a_changed_table_from_the_results(run_copy):
    nudge_a_value(run_copy / "conditions.parquet")
    overrides = [o for o in RunDir(run_copy).overrides() if not o.startswith("hydra.run.dir=")]
    sweep(run_copy, *overrides)
    H.load_run(run_copy)  # the manifest and the table agree again


@pytest.mark.parametrize("error", [NotImplementedError("That compression method is not supported"),
                                   RuntimeError("File is encrypted, password required for extraction"),
                                   tokenize.TokenError("unterminated string literal"),
                                   MemoryError(), IndexError("list index out of range")])
def test_any_failure_reading_a_result_is_a_damaged_result(tmp_path, monkeypatch, error, caplog):
    store = ResultStore(tmp_path)
    record = {"x": 1}
    for key in ("k1", "k2"):
        store.save(key, record, {"task": {"kl": np.ones((2, 2))}}, {"task": 3})
    real = np.load

    def failing(path, *a, **k):
        if "k1" in str(path):
            raise error
        return real(path, *a, **k)

    monkeypatch.setattr(store_module.np, "load", failing)
    assert store.verify(["k1", "k2"]) == {"k2"}
    assert (tmp_path / "quarantine" / "k1.npz").is_file() and not store.has("k1")
    assert any("k1.npz" in r.message and type(error).__name__ in r.message for r in caplog.records)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions: the refusal cannot happen")
def test_a_damaged_result_that_cannot_be_moved_is_one_line(tmp_path):
    store = ResultStore(tmp_path)
    store.save("k1", {"x": 1}, {"task": {"kl": np.ones((2, 2))}}, {"task": 3})
    (tmp_path / "results" / "k1.npz").write_bytes(b"garbage")
    os.chmod(tmp_path / "results", 0o555)
    try:
        with pytest.raises(HarnessError, match="cannot be moved to .* make .* writable, or delete the file"):
            store.verify(["k1"])
    finally:
        os.chmod(tmp_path / "results", 0o755)


@pytest.mark.parametrize("on_existing", ["resume", "fresh"])
def test_a_sweep_that_cannot_start_leaves_a_finished_run_as_it_was(run_copy, on_existing):
    """A missing model with on_existing=resume used to rewrite .hydra/ and the fingerprint (the run's
    own command was then refused); with fresh, it deleted the results before the model failed."""
    before = snapshot(run_copy)
    overrides = [o for o in RunDir(run_copy).overrides() if not o.startswith(("hydra.run.dir=", "model"))]
    with pytest.raises(HarnessError, match="not available"):
        sweep(run_copy, *overrides, "model.name_or_path=/no/such/model", f"on_existing={on_existing}")
    assert snapshot(run_copy) == before
    sweep(run_copy, *FAST)  # the run's own command is still its own
    assert json.loads((run_copy / "status.json").read_text())["status"] == "complete"


def test_a_new_run_that_cannot_start_says_why_and_can_be_resumed(tmp_path, capsys):
    run = tmp_path / "run"
    with pytest.raises(HarnessError):
        sweep(run, "model.name_or_path=/no/such/model", *FAST[1:])
    status = json.loads((run / "status.json").read_text())
    assert status["status"] == "error" and "not available" in status["error"]
    assert "model.name_or_path=/no/such/model" in RunDir(run).overrides()
    assert not (run / RunDir.FINGERPRINT).exists()


# -- tracebacks where a line belongs ----------------------------------------------------------

def one_line_error(capsys, argv) -> str:
    capsys.readouterr()
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in err, err  # (transformers' progress bars may precede it)
    return errors[0]


def test_a_run_directory_that_cannot_be_one_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "run")
    assert "is a file" in one_line_error(capsys, ["sweep", *FAST, "hydra.run.dir=a-file"])
    assert "does not exist" in one_line_error(capsys, ["sweep", *FAST, "hydra.run.dir=dangling"])
    assert "cannot create the run directory" in one_line_error(capsys, ["sweep", *FAST, "hydra.run.dir=a-file/run"])


@pytest.mark.parametrize("text, expected", [
    ("name_or_path: [unclosed\n  bad: : yaml\n", r"bad.yaml:2:\d+: not valid YAML"),
    (b"name_or_path: \xff\xfe\n", "not UTF-8 text")])
def test_a_broken_file_in_a_config_dir_is_one_line(tmp_path, capsys, monkeypatch, text, expected):
    import re

    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "model").mkdir(parents=True)
    path = tmp_path / "conf" / "model" / "bad.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    err = one_line_error(capsys, ["sweep", "--config-dir", "conf", "model=bad", "hydra.run.dir=run"])
    assert re.search(expected, err), err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("damage", ["truncated", "random bytes"])
def test_damaged_safetensors_weights_are_one_line_and_the_status_says_so(tmp_path, capsys, monkeypatch, damage):
    from harness.model.builtin import build_tiny

    monkeypatch.chdir(tmp_path)
    model, tok = build_tiny("llama")
    model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:3000] if damage == "truncated" else os.urandom(100_000))
    err = one_line_error(capsys, ["sweep", *FAST, f"model.name_or_path={tmp_path / 'm'}", "hydra.run.dir=run"])
    assert "safetensors weights" in err and "damaged" in err
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "error"


def test_a_huge_prefix_length_is_refused_before_anything_is_built(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, ["sweep", *FAST, "prefix.lengths=[1000000000000]", "prefix.too_short=repeat",
                                  "hydra.run.dir=run"])
    assert "exceeds the model's context window of 1024" in err


def test_a_prompts_path_that_is_a_directory_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = one_line_error(capsys, ["sweep", *FAST, f"prompts.path={tmp_path}", "hydra.run.dir=run"])
    assert "is a directory: give a JSONL file" in err


def test_resume_finds_a_run_whose_path_has_a_comma_spaces_and_accents(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run, été 1"
    assert main(["sweep", *FAST, "prompts.limit=1", "prefix.lengths=[8]", f"hydra.run.dir='{run}'"]) == 0
    (run / "conditions.parquet").unlink()
    (run / "status.json").unlink()
    assert main(["resume", str(run)]) == 0
    assert json.loads((run / "status.json").read_text())["status"] == "complete"
    assert len(list((tmp_path).iterdir())) == 1  # no second directory cut at the comma


def test_a_run_of_an_earlier_version_is_one_line_for_figures_and_check_determinism(run_copy, capsys):
    """Tables of harness 0.1 lack placement, capture, kl_shared (figures used to fail with a KeyError,
    check-determinism with an AttributeError)."""
    from harness.io import sha256_file

    cond = pd.read_parquet(run_copy / "conditions.parquet").drop(columns=["placement"])
    cond.to_parquet(run_copy / "conditions.parquet", index=False)
    att = pd.read_parquet(run_copy / "attention.parquet").drop(columns=["capture", "kl_shared"])
    att.to_parquet(run_copy / "attention.parquet", index=False)
    manifest = RunDir(run_copy).manifest()  # as an earlier version wrote it: no checksum of its own
    manifest["tables"] = {name: sha256_file(run_copy / name) for name in manifest["tables"]}
    manifest["result_fingerprint"]["schema"] = 1
    (run_copy / "manifest.json").write_text(json.dumps(manifest))
    for argv in (["figures", str(run_copy)], ["check-determinism", str(run_copy)]):
        err = one_line_error(capsys, argv)
        assert "earlier version of the harness" in err and "on_existing=resume" in err, err


def test_a_writer_that_breaks_while_the_disk_refuses_is_one_line(tmp_path):
    """matplotlib's PDF writer on a full disk: ENOSPC, then an AttributeError from its cleanup."""
    from harness.io import atomic_write

    def full_disk(tmp):
        try:
            raise OSError(28, "No space left on device")
        except OSError:
            raise AttributeError("'Stream' object has no attribute 'pos'")  # noqa: B904 - as matplotlib does

    with pytest.raises(HarnessError, match=r"cannot write .*fig.pdf: No space left on device"):
        atomic_write(tmp_path / "fig.pdf", full_disk)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(AttributeError):  # a plain bug stays a bug
        atomic_write(tmp_path / "x", lambda tmp: None.pos)


def test_sigterm_during_locate_keeps_the_lengths_already_evaluated(tmp_path, capsys, monkeypatch):
    from harness.cli import Terminated
    from harness.runs.experiment import Experiment

    monkeypatch.chdir(tmp_path)
    real, calls = Experiment.drive, []

    def drive(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # the signal arrives while the third length is computed
            raise Terminated()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Experiment, "drive", drive)
    code = main(["locate", "model=tiny", "prompts.limit=2", f"prefixes.path={FAST[4].split('=', 1)[1]}",
                 "locate.coarse=[8,16,32]", "decode.max_new_tokens=3", "hydra.run.dir=loc"])
    assert code == 143
    err = capsys.readouterr().err
    assert "terminated during the search: the 2 length(s) evaluated so far are in" in err
    table = pd.read_parquet(tmp_path / "loc" / "locate.partial.parquet")
    assert sorted(table.prefix_len) == [8, 16] and table.in_interval.isna().all()


def test_a_run_directory_the_file_system_refuses_is_one_line(tmp_path, monkeypatch):
    """Disk full or read-only while the run directory is claimed (the lock cannot be written)."""
    import errno

    from harness.runs import lock as lock_module

    def refuse(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lock_module.os, "write", refuse)
    with pytest.raises(HarnessError, match="cannot write to the run directory .*No space left on device"):
        with RunDir(tmp_path / "run").claim("x", "auto"):
            pass
    monkeypatch.setattr(lock_module.os, "open", lambda *a, **k: refuse())
    with pytest.raises(HarnessError, match="cannot write to .*run2: No space left on device; give a new sweep another run directory"):
        with RunDir(tmp_path / "run2").claim("x", "auto"):
            pass


def test_a_rerun_that_computes_nothing_reuses_the_noise_floor(run_copy, caplog):
    """Resuming a finished run used to measure the noise floor again (40 s on a tiny run under load)."""
    import logging

    before = pd.read_parquet(run_copy / "noise.parquet")
    with caplog.at_level(logging.INFO):
        sweep(run_copy, *FAST)
    assert any("the noise table measured with them" in r.message for r in caplog.records)
    pd.testing.assert_frame_equal(pd.read_parquet(run_copy / "noise.parquet"), before)
    status = json.loads((run_copy / "status.json").read_text())
    assert status["status"] == "complete"  # reused, as the log says: its time is not a test's (2.5 s under load)


def test_a_run_of_the_release_before_backends_resumes_with_one_command(run_copy, capsys):
    """The previous release's format: no ``backend`` in the config it saved nor in its fingerprint,
    no input files recorded. ``harness resume RUN`` takes it as it is (the keys added since take
    their defaults, which do what that release did), reuses every result and rewrites the tables
    identically; it used to ask for an impossible override, then refuse --accept-changes."""
    import yaml

    from harness.config import NOT_RESULT_KEYS
    from harness.io import open_text_seal, write_sealed_json, write_sealed_text
    from harness.runs.store import fingerprint

    run = RunDir(run_copy)
    config = yaml.safe_load(open_text_seal((run_copy / ".hydra" / "config.yaml").read_text())[0])
    del config["backend"]
    write_sealed_text(yaml.safe_dump(config, sort_keys=False), run_copy / ".hydra" / "config.yaml")
    write_sealed_json({"config": fingerprint({k: v for k, v in config.items() if k not in NOT_RESULT_KEYS})},
                      run_copy / "run_fingerprint.json")
    manifest = run.manifest()
    for key in ("backend", "inputs"):
        manifest.pop(key)
    manifest["config"] = config
    write_sealed_json(manifest, run_copy / "manifest.json")
    before = pd.read_parquet(run_copy / "conditions.parquet")

    capsys.readouterr()
    assert main(["resume", str(run_copy)]) == 0
    assert "added since, at their defaults: backend." in capsys.readouterr().err
    after = run.manifest()
    assert after["computed_this_run"] == 0 and after["reused"] == len(before)
    assert after["inputs"]["prefixes"]["path"].endswith("prefixes_small.jsonl")  # recorded from now on
    pd.testing.assert_frame_equal(pd.read_parquet(run_copy / "conditions.parquet"), before)


def test_a_config_dir_given_one_level_too_deep_or_an_experiment_without_its_header_is_one_line(tmp_path, capsys,
                                                                                              monkeypatch):
    """Pass 6 #122, #124: --config-dir naming conf/experiment itself, and an experiment file without
    `# @package _global_`, got Hydra's 'no such config' and "Key 'experiment' not in 'RunConfig'"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "conf" / "experiment").mkdir(parents=True)
    mine = tmp_path / "conf" / "experiment" / "mine.yaml"
    mine.write_text("# @package _global_\nseed: 3\n")
    err = one_line_error(capsys, ["sweep", "--config-dir", "conf/experiment", "experiment=mine", "hydra.run.dir=run"])
    assert "holds experiment configs themselves" in err and "--config-dir conf" in err
    mine.write_text("# my experiment\nseed: 3\n")
    err = one_line_error(capsys, ["sweep", "--config-dir", "conf", "experiment=mine", "hydra.run.dir=run"])
    assert "mine.yaml" in err and "`# @package _global_`" in err
    assert not (tmp_path / "run").exists()
    mine.write_text("# my experiment\n# @package _global_\nseed: 3\n")  # below a comment: Hydra does not read it
    assert "`# @package _global_`" in one_line_error(capsys, ["sweep", "--config-dir", "conf", "experiment=mine"])
    mine.write_text("\n# @package _global_\n# my experiment\nseed: 3\n")
    assert main(["sweep", "--config-dir", "conf", "experiment=mine", *FAST, "--cfg", "job"]) == 0
    assert "seed: 3" in capsys.readouterr().out
