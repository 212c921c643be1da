"""``harness cache-timing`` as a run (harness.runs.cache_timing.run): a run directory like a sweep's
(manifest with every table's sha256, status, .hydra/), resumed by phase after an interruption,
redrawn by ``harness figures``, its tables refused when damaged; the engine is a stand-in with a
synthetic cache and clock (tests/analysis/test_leak.py), so no vLLM is needed."""

from __future__ import annotations

import contextlib
import json

import pytest

from harness.cli import main
from harness.config import compose
from harness.runs.cache_timing import run
from harness.runs.rundir import RunDir
from tests.analysis.test_leak import StandInEngine
from tests.support import one_line_error, stand_in_vllm_python

SMALL = ["model=demo", "timing.lengths=[32,64]", "timing.trials=4", "backend.block_size=32",
         f"backend.python={stand_in_vllm_python()}"]


class Opened:
    """Stand-in engines, counted; ``fail_at``: the engine whose probes raise KeyboardInterrupt."""

    def __init__(self, fail_at: int | None = None):
        self.engines, self.fail_at = [], fail_at

    def __call__(self, location, max_model_len, log_path):
        engine = StandInEngine(seed=len(self.engines))
        engine.vllm_version, engine.dtype = "stand-in", "bfloat16"
        if len(self.engines) == self.fail_at:
            def interrupted(ids, salt=None):
                raise KeyboardInterrupt
            engine.probe = interrupted
        self.engines.append(engine)
        return contextlib.nullcontext(engine)


def timing_run(path, *overrides, opened=None):
    args = ["experiment=cache-timing", *SMALL, *overrides]
    return run(compose(args), path, overrides=args, progress=False, open_worker=opened or Opened())


def test_a_cache_timing_run_is_a_checked_run_directory(tmp_path, capsys):
    path = timing_run(tmp_path / "run")
    rundir = RunDir(path)
    manifest = rundir.manifest()
    assert manifest["kind"] == "cache-timing" and rundir.status()["status"] == "complete"
    assert manifest["engine"]["block_size"] == 32 and manifest["config"]["timing"]["trials"] == 4
    leak = rundir.table("leak.parquet")
    assert len(leak) == 2 * 4 and set(leak.setting) == {"none", "same_salt", "different_salts", "per_tenant_cache"}
    assert len(rundir.table("trials.parquet")) == 2 * 4 * 4 * 2  # lengths x settings x trials x two probes
    for name in ("leak.md", "figures/fig_leak.png", "figures/fig_leak.pdf", ".hydra/overrides.yaml"):
        assert (path / name).is_file(), name
    # a flipped byte in a table is refused in one line, by the loader and by the command
    data = bytearray((path / "leak.parquet").read_bytes())
    data[len(data) // 2] ^= 0x01
    (path / "leak.parquet").write_bytes(bytes(data))
    assert "is not the table this run wrote" in one_line_error(capsys, ["figures", str(path)])
    with pytest.raises(Exception, match="is not the table this run wrote"):
        rundir.table("leak.parquet")


def test_figures_redraws_its_page_and_readers_of_sweeps_name_it(tmp_path, capsys):
    path = timing_run(tmp_path / "run")
    (path / "leak.md").unlink()
    (path / "figures" / "fig_leak.png").unlink()
    assert main(["figures", str(path)]) == 0
    assert (path / "leak.md").is_file() and (path / "figures" / "fig_leak.png").is_file()
    assert main(["figures", str(path), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "leak.md").read_text() == (path / "leak.md").read_text()
    assert "is a harness cache-timing run" in one_line_error(capsys, ["claims", str(path), "--out",
                                                                      str(tmp_path / "c")])


def test_an_interrupted_run_resumes_measuring_only_the_phases_missing(tmp_path):
    """Phase 1 (the shared engine's three settings) is stored as it ends; an interrupt during phase 2
    (per_tenant_cache's own engine) leaves the run interrupted, and a rerun opens the shared engine
    and the attacker's again for phase 2 only."""
    first = Opened(fail_at=1)  # the attacker's engine, opened for per_tenant_cache
    with pytest.raises(KeyboardInterrupt):
        timing_run(tmp_path / "run", opened=first)
    rundir = RunDir(tmp_path / "run")
    assert rundir.status()["status"] == "interrupted"
    assert len(list((tmp_path / "run" / "results").glob("phase-*.parquet"))) == 1
    again = Opened()
    timing_run(tmp_path / "run", opened=again)
    assert len(again.engines) == 2 and rundir.status()["status"] == "complete"
    trials = rundir.table("trials.parquet")
    assert sorted(trials.order.unique()) == list(range(2 * 4 * 4))  # every trial once, in one order
    done = Opened()
    timing_run(tmp_path / "run", opened=done)  # everything stored: no engine starts
    assert done.engines == []


def test_a_run_of_another_configuration_is_refused_not_replaced(tmp_path, capsys):
    path = timing_run(tmp_path / "run")
    before = (path / "leak.parquet").read_bytes()
    with pytest.raises(Exception, match="holds results of a different configuration"):
        timing_run(path, "timing.trials=5")
    assert (path / "leak.parquet").read_bytes() == before


@pytest.mark.parametrize("args, expected", [
    (["timing.trials=1"], "timing.trials must be at least 2"),
    (["timing.lengths=[32,32]"], "timing.lengths must be distinct positive token counts"),
    (["backend.block_size=24"], "backend.block_size must be a multiple of 16"),
    (["timing.settings=[none,bogus]"], "Invalid value 'bogus', expected one of [none, same_salt"),  # Hydra's
    (["backend=harness"], "is not a setting of backend=harness"),  # the vLLM engine's settings, refused
])
def test_bad_settings_are_one_line_and_leave_no_directory(args, expected, tmp_path, capsys):
    run_dir = tmp_path / "never"
    capsys.readouterr()
    assert main(["cache-timing", *SMALL, *args, f"hydra.run.dir={run_dir}"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and not run_dir.exists()


def test_the_spelling_of_earlier_releases_works_once_more_with_a_notice(tmp_path, capsys, monkeypatch):
    """``--model demo --lengths 32 64 --out DIR``: translated, said, and run."""
    import harness.runs.cache_timing as timing

    opened = Opened()
    monkeypatch.setattr(timing, "VllmWorker", lambda location, **kw: opened(location, kw["max_model_len"],
                                                                            kw["log_path"]))
    out = tmp_path / "old"
    assert main(["cache-timing", "--model", "demo", "--lengths", "32", "64", "--trials", "4", "--block-size", "32",
                 "--python", stand_in_vllm_python(), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "is the spelling of earlier releases" in err and "timing.lengths=[32,64]" in err
    assert RunDir(out).manifest()["kind"] == "cache-timing" and len(opened.engines) == 2
    # and `harness resume` reruns it as cache-timing (nothing left to measure)
    assert main(["resume", str(out)]) == 0 and len(opened.engines) == 2
    overrides = json.dumps(RunDir(out).overrides())
    assert "experiment=cache-timing" in overrides


def test_old_options_that_cannot_be_translated_say_the_new_form(tmp_path, capsys):
    assert "model.name_or_path=" in one_line_error(capsys, ["cache-timing", "--model", str(tmp_path), "--out",
                                                            str(tmp_path / "x")])
    assert "timing.trials=VALUE" in one_line_error(capsys, ["cache-timing", "--trials"])
