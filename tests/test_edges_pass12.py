"""The twelfth adversarial pass's cases (issue 67), found on 1d0eace: 325 new cases, 0 lost, 18
silent, 25 tracebacks, 8 misleading, most in the analysis API. Still open: plan and claims over two
runs of different banks and lengths (#277, #278), answered at the end."""

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
        (lambda: H.drift_summary(c, "prefix_len"), "value must name a measure, got 'prefix_len'"),
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


def test_the_rest_of_the_analysis_api_refuses_in_one_line(tables):
    """#027, #064, #071, #087, #091, #096, #112, #119, #121, #132, #143, #213, #223: a design column as
    the measure (a 'layer profile' of head indices), an index argument out of range, a table lacking
    the column a function reads (raw KeyErrors, or an empty frame with no word), a by column the summary
    overwrites, numbers stored as objects called 'not numbers'."""
    import numpy as np

    c, a = tables.conditions, tables.attention
    cases = [
        (lambda: H.head_contrasts(a, tables_joined=0), "tables_joined must be a whole number of at least 1"),
        (lambda: H.head_contrasts(a, seed=-3), "seed must be a whole number of at least 0"),
        (lambda: H.head_contrasts(a, value="layer"), "value must name a measure, got 'layer'"),
        (lambda: H.layer_profile(a, value="head"), "value must name a measure, got 'head'"),
        (lambda: H.drift_summary(c, "beta"), "value must name a measure, got 'beta'"),
        (lambda: H.isolation_summary(c.drop(columns=["isolation"]), "output_kl"), "must have the column isolation"),
        (lambda: H.survival(c.drop(columns=["first_divergence"])), "must have the column first_divergence"),
        (lambda: H.drift_summary(c.assign(mean=1.0), "output_kl", by=["mean"]), "a column the summary writes"),
        (lambda: H.hit_rates(c.drop(columns=["target_hit"])), "got 'target_hit'"),
        (lambda: H.obey_rates(c.drop(columns=["obeyed"])), "got 'obeyed'"),
        (lambda: H.bootstrap_ci(np.array([[1.0, 2.0], [3.0, 4.0]])), "one-dimensional"),
        (lambda: H.benjamini_hochberg("0.1"), "one-dimensional sequence of p-values"),
        (lambda: H.drift_summary(c.assign(output_kl=c.output_kl.astype("object")), "output_kl"),
         "holds numbers stored as objects"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_a_table_given_as_another_kind_is_refused_before_anything_is_drawn(tables, tmp_path):
    """#158, #159, #160, #184, #188, #189: the conditions table as noise= was drawn from without a word;
    as ceiling=, forest= or contrasts= (or the attention table as noise=) an AttributeError; manifests=[1, 2]
    one from deep inside."""
    c, a = tables.conditions, tables.attention
    for call, message in [
        (lambda: H.make_figures(c, a, noise=c), "noise must be the run's noise table"),
        (lambda: H.make_figures(c, a, ceiling=c), "ceiling must be the ceiling table"),
        (lambda: H.make_figures(c, a, forest=c), "forest must be figure 0's table"),
        (lambda: H.report_markdown(c, a, [], contrasts=c), "contrasts must be the C - B table"),
        (lambda: H.report_markdown(c, a, [], noise=a), "noise must be the run's noise table"),
    ]:
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(HarnessError, match="manifests must be a list of the runs' manifests"):
        H.write_outputs(c, a, tmp_path / "out", manifests=[1, 2])
    assert not (tmp_path / "out").exists()


def test_compose_and_the_readers_refuse_what_they_would_have_taken_wrongly(tables, tmp_path):
    """#190, #198, #202, #163, #227: an unknown model was Hydra's own exception, a config_dir that does
    not exist only a warning, trust_damaged='no' (true) read a damaged table, and a comparison with a
    group the table lacks gave rows of nothing without a word."""
    with pytest.raises(HarnessError, match="model=nope: no such model config .*demo"):
        H.compose(["model=nope"])
    with pytest.raises(HarnessError, match="is not a directory"):
        H.compose(config_dir=tmp_path / "missing")
    with pytest.raises(HarnessError, match="trust_damaged must be True or False, got 'no'"):
        H.load_runs([tables.manifest and tmp_path / "anything"], trust_damaged="no")
    c = tables.conditions
    with pytest.warns(UserWarning, match="no rows of group 'B'"):
        H.compare_groups(c[c.group != "B"], "output_kl", power=False)
    with pytest.warns(UserWarning, match="no rows of group 'C'"):
        H.compare_groups(c.assign(group=c.group.astype(str).str.lower()), "output_kl", power=False)


def test_detect_refuses_a_run_without_group_b_before_the_model_computes_anything(tmp_path, monkeypatch, capsys):
    """Pass 12: detect loaded the model and scored every input before saying the runs hold no group B."""
    import harness.runs.detect as detect
    from harness.cli import main

    run = sweep(tmp_path / "ac", *FAST, "groups=[A,C]")

    def not_reached(*args, **kwargs):
        raise AssertionError("the model scored the inputs of a run detect refuses")

    monkeypatch.setattr(detect, "measure_runs", not_reached)
    assert main(["detect", str(run), "--out", str(tmp_path / "page")]) == 2
    assert "the runs hold no group B input" in capsys.readouterr().err
    assert not (tmp_path / "page").exists()


def test_plan_and_claims_over_runs_of_lengths_they_do_not_share_say_so(tmp_path, capsys):
    """#277 (plan blamed a prefix-level SD of 0) and #278 (claims pooled two banks at 8/24 and 32 tokens
    into one claim-3 row, and numpy's 'Mean of empty slice' reached the terminal)."""
    import warnings

    from harness.cli import main

    runs = [str(sweep(tmp_path / "short", *FAST, "prompts.limit=3")),
            str(sweep(tmp_path / "long", *[o for o in FAST if not o.startswith("prefixes.path")], "prompts.limit=3",
                      "prefixes=stories_directives", "prefixes.per_group=2", "prefix.lengths=[32]"))]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        assert main(["plan", *runs]) == 2
        err = capsys.readouterr().err
        assert "share none" in err and "SD of 0" not in err
        assert main(["claims", *runs, "--out", str(tmp_path / "page")]) == 2  # pass 13: nothing testable, refused
    err = capsys.readouterr().err
    assert "no claim can be tested on these runs" in err and "share none" in err
    assert not (tmp_path / "page").exists()
