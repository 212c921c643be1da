"""The ninth adversarial pass's cases (issue 67), found while it ran on 7a4badd."""

from __future__ import annotations

import pytest

import harness as H
from tests.support import FAST, one_line_error, sweep


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return sweep(tmp_path_factory.mktemp("pass9") / "base", *FAST)


def test_a_measure_given_as_a_list_is_refused_in_one_line(base):
    """A list as ``value`` raised 'unhashable type: list' from pandas."""
    with pytest.raises(ValueError, match=r"value must name a column of the table, got \['output_kl'\]"):
        H.compare_groups(H.load_run(base).conditions, ["output_kl"], power=False)


@pytest.mark.parametrize("subdir", ["", "."])
def test_jobs_in_the_multiruns_own_top_directory_are_refused(tmp_path, capsys, subdir):
    """An empty hydra.sweep.subdir put every job in one directory ('1 of 0 job(s) ... incomplete')."""
    line = one_line_error(capsys, ["sweep", "-m", *FAST, "prompts.limit=1", "prefix.lengths=[8]", "seed=0,1",
                                   f"hydra.sweep.dir={tmp_path / 'ms'}", f"hydra.sweep.subdir={subdir}"])
    assert "must name a directory of each job's own inside hydra.sweep.dir" in line
    assert not (tmp_path / "ms").exists()
