"""The twelfth adversarial pass's cases (issue 67), found on 1d0eace: 325 new cases, 0 lost, 18
silent, 25 tracebacks, 8 misleading, most in the analysis API; these are the ones answered so far."""

from __future__ import annotations

import pytest

import harness as H
from harness.errors import HarnessError
from tests.support import FAST, sweep


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    return H.load_run(sweep(tmp_path_factory.mktemp("pass12") / "base", *FAST, "prompts.limit=3"))


def test_a_by_column_twice_the_measure_as_by_or_no_by_is_refused_in_one_line(tables):
    """#022, #023, #025, #028, #074, #075, #077, #080, #120, #122, #123, #125, #129: pandas's
    'cannot insert model, already exists', a TypeError for None, or frames with two 'model' columns."""
    c = tables.conditions
    cases = [
        (lambda: H.contrast(c, "output_kl", by=["model", "model"]), "by names 'model' twice"),
        (lambda: H.drift_summary(c, by=["group", "group"]), "by names 'group' twice"),
        (lambda: H.step_profile(c, by=["group", "group"]), "by names 'group' twice"),
        (lambda: H.survival(c, by=["group", "group"]), "by names 'group' twice"),
        (lambda: H.ceiling(c, by=["model", "model"]), "by names 'model' twice"),
        (lambda: H.two_way_bootstrap(c, "output_kl", by=["model", "model"]), "by names 'model' twice"),
        (lambda: H.drift_summary(c, "prefix_len"), "by names the measure 'prefix_len' itself"),
        (lambda: H.drift_summary(c, "output_kl", by=["output_kl"]), "by names the measure 'output_kl' itself"),
        (lambda: H.drift_summary(c, by=None), "by must name columns"),
        (lambda: H.compare_groups(c, "output_kl", by=None, power=False), "by must name columns"),
        (lambda: H.compare_groups(c, "output_kl", by=["group"], power=False), "by may not name 'group'"),
        (lambda: H.compare_groups(c, "output_kl", by=["prefix_id"], power=False), "by may not name 'prefix_id'"),
        (lambda: H.compare_groups(c, "edit_distance", rate=True, power=False), "booleans or 0/1"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_paths_and_notes_of_the_wrong_type_are_refused_before_anything_is_written(tables, tmp_path):
    """#166, #167, #178, #179, #182 (figures written before the title was refused), #183, #186
    (notes split into letters), #205."""
    c, a = tables.conditions, tables.attention
    for call, message in [(lambda: H.load_run(None), "load_run takes one run directory's path"),
                          (lambda: H.load_run(["x"]), "load_run takes one run directory's path"),
                          (lambda: H.load_runs([None]), "load_runs takes run directories' paths"),
                          (lambda: H.collect(["x"], None), "collect takes run directories' paths"),
                          (lambda: H.write_outputs(c, a, None), "out_dir must be a directory's path"),
                          (lambda: H.write_outputs(c, a, tmp_path / "w", title=None), "title must be text"),
                          (lambda: H.write_outputs(c, a, tmp_path / "w", notes="hello"), "notes a list")]:
        with pytest.raises(HarnessError, match=message):
            call()
    assert not (tmp_path / "w").exists()
    with pytest.raises(ValueError, match="notes a list of sentences"):
        H.report_markdown(c, a, [], notes="hello")
