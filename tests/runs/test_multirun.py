"""How many jobs a multirun launches (harness.runs.multirun), read from Hydra's multirun.yaml."""

import pytest
import yaml

from harness.runs.multirun import expected_jobs, unstarted, unstarted_notes


def record(sweep_dir, task, params=None):
    sweep_dir.mkdir(parents=True, exist_ok=True)
    config = {"hydra": {"overrides": {"task": task}, "sweeper": {"params": params}}, "seed": 0}
    (sweep_dir / "multirun.yaml").write_text(yaml.safe_dump(config))
    return sweep_dir


@pytest.mark.parametrize("task, params, jobs", [
    (["model=tiny", "seed=0,1,2", "prefix.lengths=[8,24]"], None, 3),  # a list is one value, not a sweep
    (["seed=range(0,4)", "model=tiny,demo"], None, 8),
    (["model=tiny"], {"seed": "0,1"}, 2),
    (["model=tiny"], None, 1)])
def test_the_jobs_a_multirun_launches_are_the_product_of_its_sweeps(tmp_path, task, params, jobs):
    assert expected_jobs(record(tmp_path / "sweep", task, params)) == jobs


def test_a_sweep_directory_says_which_jobs_never_started(tmp_path):
    sweep_dir = record(tmp_path / "sweep", ["seed=0,1,2"])
    (sweep_dir / "0" / ".hydra").mkdir(parents=True)
    assert "is a multirun of 3 jobs (multirun.yaml), of which 1 exist: 2 never started" in unstarted(sweep_dir)
    assert unstarted_notes([sweep_dir / "0"]) == [unstarted(sweep_dir)]
    for job in ("1", "2"):
        (sweep_dir / job / ".hydra").mkdir(parents=True)
    assert unstarted(sweep_dir) is None and unstarted_notes([sweep_dir / "0"]) == []
    assert expected_jobs(tmp_path / "nothing") is None and unstarted_notes([tmp_path / "run"]) == []
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "multirun.yaml").write_text("hydra: [")
    assert expected_jobs(tmp_path / "bad") is None
