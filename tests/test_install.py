"""The package works once installed: a wheel built from the repository, installed into a fresh
virtual environment, runs a sweep from a directory outside the checkout through its `harness`
command (config tree and data come from the wheel) and gives the tables of the same sweep run
in-process. The wheel holds the harness only: no training code and no training records."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from harness.runs.schema import TIMING_COLUMNS
from tests.support import FAST

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


# What a checkout has besides its sources: the wheel is built from a copy without them, since
# setuptools builds in the source tree and a stale build/lib (say, of harness/demo before it moved
# out) would otherwise end up in the wheel.
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "outputs",
                                     "multirun", ".pytest_cache", ".hypothesis", "*.work")


def test_wheel_installed_outside_the_checkout_runs_a_sweep(tiny_run, tmp_path):
    wheels, source = tmp_path / "wheels", tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(source)], check=True, capture_output=True, text=True)
    (wheel,) = wheels.glob("prefix_harness-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n == "harness/assets/demo-obedient/model.safetensors" for n in names)  # the shipped models ship
    # the trainer is a distribution of its own, and what it recorded while training stays with it
    assert not [n for n in names if n.startswith(("harness/demo/", "demo_training/"))], names
    records = ("training.json", "lineage.json", "later_tests.json", "measurements.md", "directive_recipe.json")
    assert not [n for n in names if n.rsplit("/", 1)[-1] in records]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    # this environment's pip installs into the new one (faster than bootstrapping pip there)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True)
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
    # the installed command line runs the suite's FAST sweep: the same tables as run in-process
    result = subprocess.run([str(venv / "bin" / "harness"), "sweep", *FAST, "hydra.run.dir=run"],
                            cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    run = work / "run"
    assert str(run.resolve()) in result.stdout  # the log says where the run directory is
    for name, drop in (("conditions.parquet", TIMING_COLUMNS), ("attention.parquet", [])):
        pd.testing.assert_frame_equal(pd.read_parquet(tiny_run / name).drop(columns=drop),
                                      pd.read_parquet(run / name).drop(columns=drop), check_exact=True)
    overrides = (run / ".hydra" / "overrides.yaml").read_text()
    assert "model=tiny" in overrides and "hydra.run.dir" not in overrides  # resume names the directory itself
