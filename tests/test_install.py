"""The package works once installed: a wheel built from the repository, installed into a fresh
virtual environment, runs a sweep from a directory outside the checkout (its config tree, data and
demo model all come from the wheel)."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


def test_wheel_installed_outside_the_checkout_runs_a_sweep(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True, text=True)
    (wheel,) = wheels.glob("prefix_harness-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True)
    # The dependencies (torch, transformers, ...) are this environment's: a .pth line adds its
    # site-packages after the new environment's own, so `harness` itself comes from the wheel.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    where = subprocess.run([str(python), "-c", "import harness; print(harness.__file__)"], cwd=work, env=env,
                           check=True, capture_output=True, text=True).stdout
    assert where.startswith(site), where  # not the checkout
    result = subprocess.run([str(venv / "bin" / "harness"), "sweep", "model=tiny", "experiment=quick",
                             "prefixes.per_group=2", "decode.max_new_tokens=4", "hydra.run.dir=run"],
                            cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    df = pd.read_parquet(work / "run" / "conditions.parquet")
    assert len(df) == 4 * (1 + 4 * 2) and (work / "run" / "report.md").is_file()
