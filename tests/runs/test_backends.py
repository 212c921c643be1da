"""Backends are a registry (issue 68): each one definition declaring what it can do, the config's
refusals read from those declarations (one rule for all), ``backend=NAME`` a config group, and a
backend registered from outside the package (an entry point of a distribution) runs a sweep.
CONTRIBUTING.md's worked example is the stand-in: installed as written, in a temporary folder."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from harness import plugins
from harness.config import compose, validate
from harness.errors import HarnessError
from harness.model import backends
from harness.model.backends import BACKENDS, Backend, Capabilities, backend_problems, register_backend
from harness.plugins import load_plugins
from harness.runs.reading import load_run
from tests.support import FAST, contributing_example, stand_in_vllm_python, sweep

OUTPUTS_ONLY = ["analysis.attention=false", "analysis.noise_floor=false"]


@pytest.fixture
def one_by_one(tmp_path, monkeypatch):
    """CONTRIBUTING.md's backend, as a distribution with an entry point, loaded as the registry loads plug-ins."""
    code, entry = contributing_example("**A backend**"), contributing_example("", "toml")
    site = tmp_path / "site"
    site.mkdir()
    (site / "my_backend.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = site / "my_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-backend\nVersion: 1.0\n")
    group = re.search(r'\[project\.entry-points\."(.*?)"\]', entry).group(1)
    (info / "entry_points.txt").write_text(f"[{group}]\n" + entry.split("]\n", 1)[1].replace('"', ""))
    monkeypatch.syspath_prepend(str(site))
    plugins._harness_entry_points.cache_clear()  # the registries read the installed entry points once
    assert "one-by-one" in load_plugins("backends")
    yield BACKENDS["one-by-one"]
    BACKENDS.pop("one-by-one", None)
    plugins._harness_entry_points.cache_clear()


def test_a_backend_registered_from_outside_runs_a_sweep(one_by_one, tmp_path):
    run = sweep(tmp_path / "run", *FAST, "backend.name=one-by-one", *OUTPUTS_ONLY)
    tables = load_run(run)
    assert tables.attention is None and len(tables.conditions) == 42
    assert tables.conditions.attn_kl_mean.isna().all() and tables.conditions.output_kl.isna().all()
    assert tables.conditions.continuation_ids.map(len).gt(0).any()
    assert tables.manifest["backend"] == {"name": "one-by-one", "version": "1"}
    fingerprint = tables.manifest["result_fingerprint"]
    assert fingerprint["backend"] == "one-by-one 1" and fingerprint["decode_path"] == "one-by-one"
    # another engine's results are other results: the harness engine's run of the same design reuses none
    harness = sweep(tmp_path / "harness", *FAST, *OUTPUTS_ONLY)
    assert load_run(harness).manifest["backend"] == {"name": "harness"}
    ids = pd.merge(tables.conditions, load_run(harness).conditions, on=["prompt_id", "group", "prefix_id", "prefix_len"])
    assert len(ids) == 42  # the same conditions


def test_what_a_backend_cannot_do_is_refused_from_its_declaration(one_by_one):
    with pytest.raises(HarnessError, match="backend=one-by-one measures outputs only"):
        validate(compose(["backend.name=one-by-one"]))
    problems = backend_problems("one-by-one", None, attention=False, noise_floor=False, isolation=["mask"],
                                linear_dtype="bfloat16", adapter="x")
    assert len(problems) == 3 and "isolation=[none]" in problems[0]
    assert backend_problems("harness", None, attention=True, noise_floor=True, isolation=["mask"],
                            linear_dtype="bfloat16", adapter="x") == []


def test_backend_equals_name_is_a_config_group_and_an_unknown_backend_is_one_line():
    a_python = f"backend.python={stand_in_vllm_python()}"  # stands for the vLLM environment: checked before anything loads
    assert validate(compose(["backend=vllm", *OUTPUTS_ONLY, a_python])).backend.name == "vllm"
    assert validate(compose(["experiment=vllm-outputs", a_python])).backend.name == "vllm"
    with pytest.raises(HarnessError, match="needs a Python with vLLM installed; /nowhere/python is not one"):
        validate(compose(["experiment=vllm-outputs", "backend.python=/nowhere/python"]))
    assert validate(compose([])).backend.name == "harness"
    with pytest.raises(HarnessError, match="backend 'nosuch' is not registered"):
        validate(compose(["backend.name=nosuch"]))


def test_a_name_is_registered_once_and_a_plugin_that_breaks_is_one_line(monkeypatch):
    with pytest.raises(HarnessError, match="already registered"):
        register_backend(Backend("vllm", "another", Capabilities(), start="x:y"))

    class Point:
        name, value, group = "broken", "nowhere:register", "prefix_harness.backends"

        def load(self):
            raise ImportError("No module named 'nowhere'")

    monkeypatch.setattr(plugins, "_harness_entry_points", lambda: (Point(),))
    with pytest.raises(HarnessError, match="the backends plug-in 'broken' .* failed to register: ImportError"):
        load_plugins("backends")


def test_config_and_experiment_hold_no_backend_special_case():
    """What issue 68 asked: the backends' names appear in the config and experiment.py only as registry use."""
    root = Path(backends.__file__).resolve().parents[1]
    for module in ("config/__init__.py", "config/schema.py", "config/validation.py", "runs/experiment.py"):
        assert "vllm" not in (root / module).read_text(encoding="utf-8").lower(), module


def test_an_engine_that_dies_mid_sweep_leaves_every_finished_condition_stored(one_by_one, tmp_path, monkeypatch):
    """The plug-in's engine raises after a few batches (a worker that died): the run ends with every
    condition finished before stored, and a resume computes only the rest."""
    import my_backend  # the example, installed by the fixture

    from harness.runs.rundir import RunDir

    calls, real = [], my_backend.OneByOne.conditions

    def dying(self, reference, batch):
        calls.append(len(batch))
        if len(calls) > 3:
            raise HarnessError("the engine died (stand-in)")
        return real(self, reference, batch)

    monkeypatch.setattr(my_backend.OneByOne, "conditions", dying)
    design = [*FAST, "backend.name=one-by-one", *OUTPUTS_ONLY]
    with pytest.raises(Exception, match="the engine died|failed"):
        sweep(tmp_path / "run", *design)
    stored = len(list((tmp_path / "run" / "results").glob("*.npz")))
    finished = sum(calls[:3]) + 1  # three batches of B/C conditions and their prompt's A reference
    assert stored >= finished and RunDir(tmp_path / "run").status()["status"] in ("error", "failed")
    monkeypatch.setattr(my_backend.OneByOne, "conditions", real)
    sweep(tmp_path / "run", *design, "on_existing=resume")
    manifest = load_run(tmp_path / "run").manifest
    assert manifest["reused"] == stored and manifest["computed_this_run"] == 42 - stored
