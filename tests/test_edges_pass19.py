"""The nineteenth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
7489b29): tables and text files in a command's output overwritten after the user edited them,
rows without a key or tables without rows answered without a word, a detector counting one input
twice, Hydra's and OmegaConf's own text reaching a notebook, and remedies that did not work."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

import harness as H
from harness.errors import HarnessError
from tests.support import FAST, one_line_error, sweep


def test_a_table_or_text_file_the_user_edited_in_an_output_is_kept_not_overwritten(tmp_path, caplog):
    """#38/#39/#53: plan's overrides.txt, claims.parquet and a run's contrasts.parquet, edited by the
    user, were overwritten by the next plan, claims or figures without a word (only pages were kept)."""
    from harness.cli import main

    run = sweep(tmp_path / "r", *(o for o in FAST if not o.startswith("prompts.limit=")), "prompts.limit=3")
    assert main(["figures", str(run)]) == 0  # FAST draws none: the report's tables come with the figures
    contrasts = run / "contrasts.parquet"
    pd.read_parquet(contrasts).assign(note="mine").to_parquet(contrasts)
    assert main(["figures", str(run)]) == 0
    assert "note" in pd.read_parquet(run / "contrasts.edited.parquet") and "note" not in pd.read_parquet(contrasts)
    assert "contrasts.parquet had been edited since the harness wrote it: kept as contrasts.edited.parquet" \
        in caplog.text

    out = tmp_path / "plan"
    assert main(["plan", str(run), "--out", str(out)]) == 0
    with (out / "overrides.txt").open("a") as f:
        f.write("mine\n")
    written = (out / "plan_grid.parquet").read_bytes()
    assert main(["plan", str(run), "--out", str(out)]) == 0
    assert (out / "overrides.edited.txt").read_text().endswith("mine\n")
    assert "mine" not in (out / "overrides.txt").read_text()
    assert not (out / "plan_grid.edited.parquet").exists() and (out / "plan_grid.parquet").read_bytes() == written


def test_rows_without_a_prefix_id_and_head_contrasts_rows_without_a_key_are_refused(tiny_run):
    """#101: a C row without a prefix_id counted as one more random prefix in compare_groups;
    #114/#104/#116: head_contrasts took rows without a prompt_id or group."""
    conditions, attention = H.load_runs([tiny_run])
    first_c = conditions.index[conditions.group == "C"][0]
    with pytest.raises(ValueError, match=r"^1 of the table's \d+ rows of a prefixed group \(B, C\) have no "
                                         r"prefix_id, so the crossed analyses would count them as one more prefix"):
        H.compare_groups(conditions.assign(prefix_id=conditions.prefix_id.where(conditions.index != first_c)),
                         "output_kl")
    row = attention.index[attention.group == "C"][0]
    for key in ("prompt_id", "group"):
        holed = attention.assign(**{key: attention[key].astype(object).where(attention.index != row)})
        with pytest.raises(ValueError, match=rf"rows have no {key}, so every summary would leave them out"):
            H.head_contrasts(holed)


@pytest.mark.parametrize("call", [
    lambda c, a: H.drift_summary(c.iloc[:0], "output_kl"),
    lambda c, a: H.drift_summary(c[c.prefix_len == 64], "output_kl"),
    lambda c, a: H.layer_profile(a[a.group == "Z"]),
    lambda c, a: H.survival(c.iloc[:0]),
], ids=["empty", "length-not-run", "group-misspelt", "survival-empty"])
def test_a_summary_of_nothing_says_so(tiny_run, call):
    """#107/#111/#113/#374: a summary of an empty table (a filter that matched nothing) returned an
    empty frame without a word; #105: a measure empty in every row returned rows of NaN."""
    conditions, attention = H.load_runs([tiny_run])
    with pytest.raises(ValueError, match=r"^the table is empty \(filtered to nothing\?\): there is nothing to "
                                         r"summarise$"):
        call(conditions, attention)
    with pytest.raises(ValueError, match=r"^value 'output_kl' is empty in all \d+ rows of the table"):
        H.drift_summary(conditions.assign(output_kl=float("nan")), "output_kl")


def test_detect_scores_an_input_two_runs_hold_once(tmp_path, caplog):
    """#202/#289: two runs holding the same inputs (they differ only in how they continued) had
    each input counted twice by detect, as two observations."""
    from harness.cli import main
    from harness.runs.detect import measure_runs
    from harness.runs.store import ResultStore

    base = [o for o in FAST if not o.startswith("decode.max_new_tokens")]
    one = sweep(tmp_path / "one", *base, "decode.max_new_tokens=2")
    other = sweep(tmp_path / "other", *base, "decode.max_new_tokens=3")
    store = ResultStore(tmp_path / "store")
    alone, _ = measure_runs([one], store, progress=False)
    both, _ = measure_runs([one, other], store, progress=False)
    assert len(both) == len(alone) and set(both.run) == {str(one)}
    assert main(["detect", str(one), str(other), "--out", str(tmp_path / "d")]) == 0
    assert "input(s) appear in more than one of these runs: each is scored once" in caplog.text


def test_figures_for_a_notebook_are_not_kept_by_pyplot_and_a_only_is_refused(tiny_run):
    """#128: drawing the figure set three times in a notebook gave matplotlib's 'More than 20
    figures' warning (pyplot kept every one); #124: conditions of group A alone drew figures with a
    legend warning."""
    import matplotlib.pyplot as plt

    conditions, attention = H.load_runs([tiny_run])
    before = len(plt.get_fignums())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            figures = H.make_figures(conditions, attention, None)
    assert len(plt.get_fignums()) == before and len(figures) >= 5
    with pytest.raises(ValueError, match=r"^conditions hold no group B or C row \(filtered to A\?\)"):
        H.make_figures(conditions[conditions.group == "A"], attention, None)


@pytest.mark.parametrize("overrides, first", [
    (None, "overrides must be a list of KEY=VALUE strings, e.g. ['model=tiny'], got None"),
    (["model=nonexist"], "model=nonexist: no such model config (the configs: "),
    (["-m", "seed=0,1"], "-m: compose takes KEY=VALUE overrides only"),
    (["seed=0,1"], "seed=0,1 sweeps over values, and compose composes one run's config: compose each value"),
    (["seed=nan"], "seed=nan: expected a whole number, got nan"),
    (["prefix.lengths=[8.5]"], "prefix.lengths=[8.5]: expected a whole number, got 8.5"),
], ids=["none", "no-such-model", "multirun-flag", "sweep-values", "nan-seed", "float-length"])
def test_compose_says_what_the_command_line_says(overrides, first):
    """#133: compose(None) was a TypeError; #138/#140/#141: compose passed Hydra's own text through
    (and its remedy, --multirun, which compose has not); #149/#153/#327: OmegaConf's conversion text."""
    with pytest.raises(HarnessError) as caught:
        H.compose(overrides)
    assert str(caught.value).startswith(first), str(caught.value)


def test_the_command_line_says_a_value_of_the_wrong_type_and_a_run_directory_given_twice(capsys):
    """#153: seed=nan on the command line; #49: hydra.run.dir given twice kept the last without a word."""
    assert one_line_error(capsys, ["sweep", "model=tiny", "seed=nan"]) == \
        "error: seed=nan: expected a whole number, got nan"
    from harness.cli import main

    with pytest.warns(UserWarning, match=r"^hydra.run.dir is given 2 times \(hydra.run.dir=/tmp/a and "
                                         r"hydra.run.dir=/tmp/b\): the last, hydra.run.dir=/tmp/b, applies$"):
        assert main(["sweep", "model=tiny", "hydra.run.dir=/tmp/a", "hydra.run.dir=/tmp/b", "--cfg", "job"]) == 0


def test_remedies_name_what_works_where_they_are_read(tmp_path, capsys):
    """#85: load_runs's refusal named the command-line flag; #212: corpus-report --bank before the
    runs blamed missing runs; #284/#288: detect and plan on a multirun advised collect, whose
    output both refuse."""
    from harness.runs.compat import Settings, check_compatible

    values = {"schema": 1, "model": "m", "max_new_tokens": 3}
    with pytest.raises(HarnessError, match=r"or pass allow_mixed_settings=True$"):
        check_compatible([Settings("a", values), Settings("b", {**values, "max_new_tokens": 2})],
                         option="allow_mixed_settings=True")
    assert one_line_error(capsys, ["corpus-report", "--bank", "r1", "ag"]) == (
        "error: harness corpus-report RUN... --bank RUN...: give the benchmark's runs first; --bank takes every run "
        "after it")
    multirun = tmp_path / "mr"
    (multirun / "0" / ".hydra").mkdir(parents=True)
    (multirun / "multirun.yaml").write_text("{}\n")
    (multirun / "0" / "conditions.parquet").write_bytes(b"")
    for command in ("detect", "plan"):
        line = one_line_error(capsys, [command, str(multirun)])
        assert line == f"error: {multirun} is a multirun (-m), whose jobs are the runs: give them ({multirun / '0'})"


def test_a_damaged_table_read_with_trust_damaged_is_said_once(tmp_path):
    """Pass 19's borderline: `claims RUN --trust-damaged` said the table's damage three times (a log
    line each time the table was read, and the note)."""
    from harness.cli import main

    run = sweep(tmp_path / "r", *FAST)
    table = run / "conditions.parquet"
    pd.read_parquet(table).assign(note="x").to_parquet(table)
    with pytest.warns(UserWarning) as caught:
        assert main(["claims", str(run), "--trust-damaged", "--resamples", "20", "--out", str(tmp_path / "c")]) == 0
    damage = [w for w in caught if "is not the table this run wrote" in str(w.message)]
    assert len(damage) == 1 and str(damage[0].message).endswith("read anyway (--trust-damaged)")
