"""The command line itself, in fresh processes: its one-line errors and exit statuses, Hydra's
composition errors (in forked processes, see :mod:`tests.forked`), usage through `python -m
harness`. A whole sweep through the installed `harness` command is in test_install."""

import os
import subprocess
import sys

import pytest

from harness.cli import COMMANDS
from tests.forked import run_forked as harness
from tests.support import FAST, run_harness, sweep

pytestmark = pytest.mark.slow


def _expect_error(result, *fragments):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: "), last
    for fragment in fragments:
        assert fragment in last, last


def test_user_errors_exit_2_with_one_line(tmp_path):
    run = [f"hydra.run.dir={tmp_path / 'run'}"]
    _expect_error(harness("sweep", *FAST, "model.name_or_path=no-such-org/no-such-model", *run, cwd=tmp_path),
                  "no-such-org/no-such-model", "not available")
    _expect_error(harness("sweep", *FAST, "prefix.lengths=[]", *run, cwd=tmp_path), "prefix.lengths is empty")
    _expect_error(harness("check-determinism", str(tmp_path), "--sample", "2", cwd=tmp_path), "not a run directory")


def test_hydra_composition_errors_exit_2(tmp_path):
    typo = harness("sweep", "model=tiny", "decode.max_new_tokenz=3", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert typo.returncode == 2 and "max_new_tokenz" in typo.stderr + typo.stdout
    choice = harness("sweep", "model=tiny", "prefix.too_short=repat", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert choice.returncode == 2 and "repat" in choice.stderr and "repeat" in choice.stderr  # names the choices
    assert "Traceback" not in choice.stderr
    bad_sample = harness("check-determinism", str(tmp_path), "--sample", "-3", cwd=tmp_path)
    assert bad_sample.returncode == 2 and "must be at least 1" in bad_sample.stderr


def test_usage_and_unknown_command(tmp_path):
    assert "sweep" in run_harness("--help", cwd=tmp_path).stdout
    assert run_harness("frobnicate", cwd=tmp_path).returncode == 2


def test_a_config_mistake_is_reported_before_torch_loads(tmp_path):
    # a plain process: the fork server has torch imported already
    probe = ("import sys; from harness.cli import main; "
             "code = main(['sweep', 'model=tiny', 'decode.max_new_tokenz=3', 'hydra.run.dir=run']); "
             "print(code, 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.stdout.split() == ["2", "False"], (result.stdout, result.stderr)
    assert "max_new_tokenz" in result.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["claims", "{run}", "--resamples", "20", "--out", "{out}"],
                                     ["plan", "{run}", "--out", "{out}", "--target", "0.5"]])
def test_the_commands_that_read_tables_do_not_load_torch(command, tmp_path):
    """claims and plan read tables alone; torch and transformers are seconds of every start (pass 32's
    nit: claims took 5.1 s where 2.4 s are its own). A 3-prompt pilot: one plan can price."""
    run = sweep(tmp_path / "pilot", *[o for o in FAST if not o.startswith("prompts.limit=")], "prompts.limit=3")
    argv = [a.replace("{run}", str(run)).replace("{out}", str(tmp_path / "out")) for a in command]
    probe = (f"import sys; from harness.cli import main; code = main({argv!r}); "
             f"print(code, 'torch' in sys.modules, 'transformers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.stdout.split()[-3:] == ["0", "False", "False"], (result.stdout[-500:], result.stderr[-2000:])


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_commands_help_works_in_a_fresh_process(command, tmp_path):
    done = run_harness(command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage" in done.stdout.lower() or command in done.stdout
    assert "Traceback" not in done.stderr


def test_a_reader_that_closes_the_pipe_early_is_no_error():
    """``harness cache-timing --help | head -1`` printed an internal error (BrokenPipeError)."""
    result = subprocess.run(["bash", "-c", f"set -o pipefail; {sys.executable} -m harness cache-timing --help | "
                             f"head -c 1 >/dev/null; {sys.executable} -m harness --help | head -c 1 >/dev/null"],
                            capture_output=True, text=True, timeout=120)
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
