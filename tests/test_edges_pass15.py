"""The fifteenth adversarial pass's last cases (issue 67), found on the main of 2026-12-06: the
behaviour tables of the analysis API answered a table they could not rate with an empty frame
(#38-#41), and the API counted a condition twice when a user concatenated a run's table with
itself or with an overlapping run's (#79-#82). The pass's other cases are tested beside the code
they changed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import harness as H
from harness.analysis.checks import or_empty
from tests.analysis.test_obeying import triples


def plain_run() -> pd.DataFrame:
    """A run without targets: A, B and C rows of two prompts, no target word anywhere."""
    rows = []
    for p in ("p0", "p1"):
        rows.append({"model": "m", "prompt_id": p, "group": "A", "prefix_id": None, "prefix_len": 0,
                     "placement": "raw", "isolation": "none", "norm_edit_distance": 0.0, "target_hit": None,
                     "obeyed": None})
        for group in ("B", "C"):
            for k in range(3):
                rows.append({"model": "m", "prompt_id": p, "group": group, "prefix_id": f"{group}{k}", "prefix_len": 8,
                             "placement": "raw", "isolation": "none", "norm_edit_distance": 0.1 * k + (group == "C"),
                             "target_hit": None, "obeyed": None})
    df = pd.DataFrame(rows)
    for col in ("target_hit", "obeyed"):
        df[col] = df[col].astype("boolean")
    return df


@pytest.mark.parametrize("table, first", [
    (H.word_rates, "these conditions hold no row to rate: 0 asked, 0 forbidden, 0 mentioned (of 14 rows, 0 with a "
                   "target word); word rates need"),
    (H.triple_contrasts, "a contrast needs C prefixes asking for (or forbidding) a word and B prefixes mentioning one"),
    (H.obey_rates, "obeyed is empty in all 14 rows"),
    (H.ceiling_table, "no C row of these conditions has an obey result"),
])
def test_a_behaviour_table_on_a_run_without_targets_says_why_it_has_no_rows(table, first):
    """#38-#41: each returned an empty frame without a word, which a notebook reads as 'no hits'."""
    with pytest.raises(ValueError) as e:
        table(plain_run())
    assert first in str(e.value) and "\n" not in str(e.value)
    assert or_empty(table, plain_run()).empty  # the report leaves the section out instead


def test_a_contrast_without_mentions_names_what_the_table_holds():
    """Only C rows with targets: no mentioned side to read them against."""
    asked_only = triples(copier=True).query("group == 'C'")
    with pytest.raises(ValueError, match=r"these conditions hold 12 asked, 12 forbidden, 0 mentioned"):
        H.triple_contrasts(asked_only)


@pytest.mark.parametrize("call", [
    lambda df: H.compare_groups(df, "norm_edit_distance", high="C", low="B"),
    lambda df: H.drift_summary(df, "norm_edit_distance"),
    lambda df: H.word_rates(df),
])
def test_a_table_holding_a_condition_twice_is_refused(call):
    """#79-#82: pd.concat([run.conditions, run.conditions]) halved every interval's width (each
    condition counted twice as another observation) without a word."""
    one = triples(copier=True).assign(norm_edit_distance=0.5)
    call(one)  # a table of one copy each is fine
    with pytest.raises(ValueError, match=r"holds 36 row\(s\) repeating another row exactly .* H.load_runs"):
        call(pd.concat([one, one], ignore_index=True))


def test_copies_with_different_results_need_a_column_saying_whose():
    """Pass 16, #80: pd.concat of a run with a rerun whose output_kl differed pooled both copies of
    every condition without a word (only byte-identical repeats were caught)."""
    one = triples(copier=True).assign(norm_edit_distance=0.5)
    both = pd.concat([one, one.assign(norm_edit_distance=0.25)], ignore_index=True)
    with pytest.raises(ValueError, match=r"holds 36 condition\(s\) twice with different results .* column 'run'"):
        H.compare_groups(both, "norm_edit_distance", high="C", low="B")
    named = pd.concat([one.assign(run="first"), one.assign(run="rerun", norm_edit_distance=0.25)], ignore_index=True)
    assert not H.compare_groups(named, "norm_edit_distance", high="C", low="B").empty


def test_rate_summary_and_head_contrasts_and_decide_refuse_what_they_cannot_mean():
    """Pass 16: #33/#39 rate_summary(conditions, 'obeyed') on a run without targets returned an empty
    frame; #44 head_contrasts(conditions) blamed the measure 'kl' instead of the table; #59/#60
    decide(0.5, 0.1, 0.05) (low above high) said 'supported' and a negative Δ was taken."""
    from harness.analysis.verdicts import decide

    with pytest.raises(ValueError, match="obeyed is empty in all 14 rows"):
        H.rate_summary(plain_run(), hit="obeyed")
    with pytest.raises(ValueError, match=r"has no layer, head \(this looks like a conditions table"):
        H.head_contrasts(plain_run())
    with pytest.raises(ValueError, match="low end must not lie above its high end"):
        decide(0.5, 0.1, 0.05)
    with pytest.raises(ValueError, match="must be a positive finite number, got -0.05"):
        decide(-0.01, 0.01, -0.05)
    assert decide(-0.01, 0.01, 0.05) == "no effect as large as Δ"
    assert decide(-0.01, 0.01, float("nan")) == decide(-0.01, 0.01, None)  # a measure without a Δ


@pytest.mark.parametrize("call", [
    lambda df: H.compare_groups(df, "norm_edit_distance", high="B", low="A"),
    lambda df: H.two_way_bootstrap(df, "norm_edit_distance", high="C", low="A", n_resamples=50),
    lambda df: H.prefix_permutation_test(df, "norm_edit_distance", high="A", low="B"),
])
def test_a_split_by_length_is_refused_with_the_reason(call):
    """Pass 16, #70: compare_groups(high='B', low='A') gave a row per length saying '0 prompts',
    although both groups had them: A sits at prefix_len 0 and paired with no length."""
    with pytest.raises(ValueError, match=r"A has no prefix length \(its rows sit at prefix_len 0\)"):
        call(plain_run())
    by_model = H.compare_groups(plain_run(), "norm_edit_distance", high="B", low="A", by=["model"])
    assert by_model.n_prompts.tolist() == [2]


def test_an_unreadable_override_is_one_line(tmp_path, capsys):
    """Pass 16, #100: a run directory with a non-ASCII letter gave Hydra's LexerNoViableAltException
    block, which never says to quote the value."""
    from tests.support import exit_code

    run = tmp_path / "run"
    assert exit_code(["sweep", "model=tiny", "decode.max_new_tokens=(6)", f"hydra.run.dir={run}"]) == 2
    err = capsys.readouterr().err
    assert "decode.max_new_tokens=(6): the override grammar cannot read this value: write it as " \
        "decode.max_new_tokens=6" in err  # pass 17, #2: quoting it made it text, which the key refuses
    assert len(err.strip().splitlines()) == 1 and "Exception" not in err and not run.exists()


def test_an_override_given_twice_says_which_applies():
    """Pass 16, #97 (prompts.limit=2 ... prompts.limit=3 ran 3 prompts without a word) and pass 17,
    #215 (H.compose said nothing either). A script's base overrides with a change on top is a common
    way to write a command, so it is said (on the command line as one 'warning:' line), not refused."""
    with pytest.warns(UserWarning, match=r"prompts.limit is given 2 times \(prompts.limit=2 and prompts.limit=3\): "
                                         r"the last, prompts.limit=3, applies"):
        cfg = H.compose(["model=tiny", "prompts.limit=2", "prompts.limit=3"])
    assert cfg.prompts.limit == 3


def test_a_run_directory_with_a_space_and_a_non_ascii_letter_works_quoted(tmp_path):
    from harness.cli import main

    run = tmp_path / "r 1 ü"
    assert main(["sweep", "model=tiny", "prompts.limit=1", "prefix.lengths=[8]", "decode.max_new_tokens=2",
                 "draw_figures=false", f'hydra.run.dir="{run}"']) == 0
    assert (run / "conditions.parquet").is_file()


def test_a_corpus_with_a_byte_order_mark_builds_clean_prefixes(tmp_path):
    """Pass 16, #132: a UTF-8 corpus saved with a BOM kept U+FEFF at the start of the first prefix."""
    import json

    from harness.cli import main

    paragraphs = [f"Paragraph {i} of a plain corpus, with sentences long enough to make one chunk of prose here."
                  for i in range(6)]
    corpus = tmp_path / "bom.txt"
    corpus.write_bytes("\ufeff".encode() + "\n\n".join(paragraphs).encode())
    out = tmp_path / "bank.jsonl"
    assert main(["build-prefixes", "neutral", "--corpus", str(corpus), "--n", "6", "--min-chars", "40",
                 "--out", str(out)]) == 0
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first["text"].startswith("Paragraph 0") and "\ufeff" not in out.read_text(encoding="utf-8")


def test_a_report_without_a_noise_floor_says_so(tmp_path):
    """Pass 16, #252: the report of an analysis.noise_floor=false run dropped the section without a
    word, though every comparison elsewhere is read against it."""
    from harness.cli import main
    from tests.support import FAST, sweep

    run = sweep(tmp_path / "run", *FAST, "analysis.noise_floor=false")
    assert main(["figures", str(run), "--out", str(tmp_path / "page")]) == 0
    page = (tmp_path / "page" / "report.md").read_text(encoding="utf-8")
    assert "## Numerical noise floor\n\nNo noise table was read for this page (a run made with " \
           "`analysis.noise_floor=false`" in page


def test_a_reader_given_a_multirun_names_its_jobs_and_collect(tmp_path, capsys):
    """Pass 16, #268: claims on a multirun's directory said 'not a run directory: give a sweep's'
    though it is one, without naming its jobs or harness collect."""
    from harness.cli import main
    from tests.support import FAST, exit_code

    sweep_dir = tmp_path / "mr"
    assert main(["sweep", "-m", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep_dir}"]) == 0
    capsys.readouterr()
    assert exit_code(["claims", str(sweep_dir), "--resamples", "20"]) == 2
    err = capsys.readouterr().err
    assert f"{sweep_dir} is a multirun (-m), whose jobs are the runs: give them ({sweep_dir / '0'} {sweep_dir / '1'})" \
        in err and f"harness collect {sweep_dir} --out DIR" in err


def run_and_edited_copy(tmp_path):
    """A run, a copy of it whose C rows' output KL was multiplied by 100 afterwards, and how many C
    rows the copy changed."""
    import shutil

    from tests.support import FAST, sweep

    run = sweep(tmp_path / "r2", *FAST)
    copy = tmp_path / "r2t"
    shutil.copytree(run, copy)
    table = pd.read_parquet(copy / "conditions.parquet")
    table.loc[table.group == "C", "output_kl"] *= 100
    table.to_parquet(copy / "conditions.parquet")
    return run, copy, int((table.group == "C").sum())


def test_an_edited_copy_read_beside_its_original_is_not_called_the_very_same_table(tmp_path, capsys):
    """Pass 16, #265: a copy whose conditions were edited was refused as holding 'the very
    conditions table' of its original, though 252 rows differed."""
    from tests.support import exit_code

    run, copy, _ = run_and_edited_copy(tmp_path)
    capsys.readouterr()
    assert exit_code(["figures", str(run), str(copy), "--trust-damaged", "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert f"{copy} and {run} are one run" in err and f"{copy}'s table has been changed since it was written" in err
    assert "very conditions table" not in err


def test_pages_drawn_from_edited_or_disagreeing_tables_say_so(tmp_path):
    """Pass 16, #238-#240: a set collected with --trust-damaged --allow-disagreement (one edited
    source, its copies disagreeing) read like a clean run in claims and figures, and a report drawn
    from an edited table with --trust-damaged never said so."""
    import json

    from harness.cli import main

    run, copy, n_c = run_and_edited_copy(tmp_path)

    col = tmp_path / "col"
    assert main(["collect", str(run), str(copy), "--trust-damaged", "--allow-disagreement", "--out", str(col)]) == 0
    assert json.loads((col / "manifest.json").read_text())["damaged_sources"] == [str(copy.resolve())]
    assert main(["figures", str(col), "--out", str(tmp_path / "fig")]) == 0
    page = (tmp_path / "fig" / "report.md").read_text(encoding="utf-8")
    assert f"was collected with {n_c} condition(s) whose copies in different runs had different results" in page
    assert "whose tables had been changed since they were written (--trust-damaged)" in page

    assert main(["figures", str(copy), "--trust-damaged", "--out", str(tmp_path / "figt")]) == 0
    page = (tmp_path / "figt" / "report.md").read_text(encoding="utf-8")
    assert "read anyway (--trust-damaged): the numbers drawn from it are not all the run's own" in page


def test_an_auroc_from_two_attacks_prints_no_interval_and_says_why():
    """Pass 16, #234: detect on 2 attacks and 4 benign inputs printed AUROC '0.75 [0.75, 1.00]' as a
    95% interval: the range of a bootstrap over 2 units."""
    from harness.analysis.detection import evaluate
    from harness.numbers import ci

    rows = [{"prompt_id": p, "group": g, "unit": f"{g}{k}", "score": s + 0.1 * k + 0.01 * i}
            for i, p in enumerate(["p0", "p1", "p2"]) for g, n, s in (("C", 2, 1.0), ("B", 4, 0.9)) for k in range(n)]
    out = evaluate(pd.DataFrame(rows), {}, n_resamples=200)
    assert np.isfinite(out["auroc"]) and "auroc_low" not in out
    assert out["auroc_note"] == "2 attack and 4 benign prefixes; an interval needs 3 prompts and 3 prefixes a group"
    assert ci(out["auroc"], np.nan, np.nan, note=out["auroc_note"]).endswith(", no interval (2 attack and 4 benign "
                                                                             "prefixes; an interval needs 3 prompts "
                                                                             "and 3 prefixes a group)")
    more = [{**r, "unit": r["unit"] + "x"} for r in rows if r["group"] == "C"]
    assert "auroc_note" not in evaluate(pd.DataFrame(rows + more), {}, n_resamples=200)


def test_a_pilot_that_already_reaches_the_target_costs_nothing_more(tmp_path, capsys):
    """Pass 16, #21: plan --budget-minutes 0.001 said no design fits the budget for the attention
    tests, pricing 3 x 31 at 0.09 min, though the pilot's own 3 x 42 reached power 1.0 there and
    needs no rerun at all."""
    from harness.cli import main
    from tests.support import sweep

    run = sweep(tmp_path / "r2", "model=tiny", "prompts.limit=3", "prefix.lengths=[8,24]", "decode.max_new_tokens=6",
                "draw_figures=false")
    capsys.readouterr()
    assert main(["plan", str(run), "--budget-minutes", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "| every attention test | 3 | 42 | 0 |" in out
    assert "Chosen: `prompts.limit=3 prefixes.per_group=42`" in out and "0 minutes still to spend" in out


def test_resume_keeps_a_table_the_user_changed(tmp_path):
    """Pass 17, #238 (lost): resume on a run whose conditions.parquet had a column of notes added
    overwrote it without a word."""
    from harness.cli import main
    from tests.support import FAST, sweep

    run = sweep(tmp_path / "run", *FAST)
    table = pd.read_parquet(run / "conditions.parquet").assign(my_notes="looked at this")
    table.to_parquet(run / "conditions.parquet")
    assert main(["resume", str(run)]) == 0
    kept = pd.read_parquet(run / "conditions.edited.parquet")
    assert (kept.my_notes == "looked at this").all()
    assert "my_notes" not in pd.read_parquet(run / "conditions.parquet").columns
    assert main(["resume", str(run)]) == 0 and not (run / "conditions.edited-2.parquet").exists()  # nothing new to keep


def test_resume_refuses_to_start_over(tmp_path, capsys):
    """Pass 17, #180: 'harness resume RUN on_existing=fresh' deleted and recomputed every stored
    result, against what resume promises."""
    from tests.support import FAST, exit_code, sweep

    run = sweep(tmp_path / "run", *FAST)
    before = sorted(p.name for p in (run / "results").iterdir())
    assert exit_code(["resume", str(run), "on_existing=fresh"]) == 2
    err = capsys.readouterr().err
    assert "harness resume keeps every stored result that still applies, so on_existing=fresh contradicts it" in err
    assert sorted(p.name for p in (run / "results").iterdir()) == before


@pytest.mark.parametrize("args", [
    ["claims", "RUN", "--out", "a", "--out", "b"],
    ["plan", "RUN", "--target", "0.8", "--target=0.9"],
])
def test_an_option_given_twice_is_refused(capsys, args):
    """Pass 17, #13 and #17: --out (or --target) given twice used the last without a word."""
    from tests.support import exit_code

    assert exit_code(args) == 2
    assert "is given 2 times: give it once" in capsys.readouterr().err


def test_copies_named_by_run_are_said_to_count_twice_unless_split_by_run():
    """Pass 17, #191/#192: with the 'run' column the repeated-condition check asks for, compare_groups
    pooled both runs' copies (a mean of the two runs, a narrower interval) without a word."""
    import warnings

    one = triples(copier=True).assign(norm_edit_distance=0.5)
    named = pd.concat([one.assign(run="first"), one.assign(run="rerun", norm_edit_distance=0.25)], ignore_index=True)
    with pytest.warns(UserWarning, match=r"holds 36 condition\(s\) once per run \(column 'run'\).*add 'run' to by"):
        H.compare_groups(named, "norm_edit_distance", high="C", low="B")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        split = H.compare_groups(named, "norm_edit_distance", high="C", low="B", by=["model", "prefix_len", "run"])
    assert sorted(split.run) == ["first", "rerun"]


def test_a_warning_on_the_command_line_is_one_line():
    """Pass 17, #139: causal-heads printed compare_groups' UserWarning with its file, line and source."""
    from tests.support import fake_command_stderr

    body = "    warnings.warn('something the user should know', UserWarning)\n    return 0\n"
    assert fake_command_stderr(body) == "warning: something the user should know\n"


def test_api_misuses_of_pass_17_are_one_line_value_errors():
    """Pass 17: #205 H.ceiling on one prompt's A returned an empty frame; #158 deltas_for given a
    list raised AttributeError; #244 report_markdown(conditions, attention, noise) raised pandas'
    'truth value of a DataFrame is ambiguous'."""
    from harness.analysis import deltas_for
    from harness.reporting.report import report_markdown

    a_only = plain_run().query("group == 'A' and prompt_id == 'p0'").assign(continuation_ids=[[1, 2, 3]])
    with pytest.raises(ValueError, match=r"no cell here holds A for 2 prompts \(1 prompt\(s\) with A in 1 rows\)"):
        H.ceiling(a_only)
    with pytest.raises(ValueError, match=r"overrides must map each measure to its Δ, e.g."):
        deltas_for([("norm_edit_distance", 0.1)])
    with pytest.raises(ValueError, match=r"figure_files \(the third argument\) must be a list .* \(noise=\.\.\.\)"):
        report_markdown(plain_run(), None, pd.DataFrame({"x": [1]}))


def test_a_huge_delta_has_power_one_without_a_numpy_warning():
    """Pass 17, #73: --delta attn_kl_mean=1e308 printed numpy's overflow RuntimeWarning."""
    import warnings

    from harness.analysis.power import design_power

    components = {"interaction": 0.0, "resid_high": 0.01, "resid_low": 0.01, "prefix_high": 0.1, "prefix_low": 0.1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert design_power(components, 3, 10, 1e308) == 1.0


def test_collect_refuses_a_run_given_twice(tmp_path, capsys):
    """Pass 17, #196: collect r2 r2/ ./r2 said 'collected 3 runs' and explained the repeats as group A
    in every job; every other reader refuses a run given twice."""
    from tests.support import FAST, exit_code, sweep

    run = sweep(tmp_path / "r2", *FAST)
    assert exit_code(["collect", str(run), f"{run}/", "--out", str(tmp_path / "col")]) == 2
    assert "is given twice" in capsys.readouterr().err and not (tmp_path / "col").exists()


def test_an_empty_argument_is_refused(capsys):
    """Pass 17, #209: harness plan "" was reported as '.', a path the user never typed."""
    from tests.support import exit_code

    assert exit_code(["plan", ""]) == 2
    assert "was given an empty argument (an unset shell variable?)" in capsys.readouterr().err


def test_head_contrasts_on_an_empty_table_says_it_is_empty():
    """Pass 17, #151: head_contrasts on an attention table filtered to nothing blamed the default segment."""
    empty = pd.DataFrame(columns=["model", "group", "prompt_id", "prefix_id", "prefix_len", "layer", "head", "segment",
                                  "n_queries", "kl", "capture"])
    with pytest.raises(ValueError, match=r"attention is an empty table \(filtered to nothing\?\)"):
        H.head_contrasts(empty)


def test_kv_size_of_a_missing_directory_says_it_does_not_exist(tmp_path, capsys):
    """Pass 17, #110: kv-size model=/nonexistent/dir blamed the hub cache and being offline."""
    from tests.support import exit_code

    assert exit_code(["kv-size", f"model={tmp_path / 'nosuch'}"]) == 2
    assert f"model={tmp_path / 'nosuch'} does not exist (no such directory)" in capsys.readouterr().err


def test_locate_refuses_a_coarse_length_given_twice(tmp_path, capsys):
    """Pass 17, #115: locate.coarse=[8,8,16] was accepted (the design line counted 8 twice)."""
    from tests.support import exit_code

    assert exit_code(["locate", "model=tiny", "locate.coarse=[8,8,16]", f"hydra.run.dir={tmp_path / 'loc'}"]) == 2
    assert "locate.coarse lists a length twice: [8, 8, 16]" in capsys.readouterr().err


def test_a_mapping_set_whole_says_how_to_set_its_entries(capsys):
    """Pass 17, #97/#102: claims.delta={...} was refused as 'not a config key', though --cfg job lists it."""
    from tests.support import exit_code

    assert exit_code(["sweep", "model=tiny", "claims.delta={norm_edit_distance:0.1}", "--cfg", "job"]) == 2
    assert "claims.delta is a mapping of its own entries: set each with +claims.delta.NAME=VALUE" \
        in capsys.readouterr().err


def test_two_models_under_different_settings_are_refused_for_the_true_reason():
    """Pass 17, #61-#63: claims on two models at 6 and 8 new tokens was refused because 'no column
    says which is which', though the model column does; the reason is that their numbers would not
    be comparable."""
    from harness.errors import HarnessError
    from harness.runs.compat import Settings, check_compatible

    def run(model, tokens):
        return Settings(model, {"schema": 1, "model": model, "max_new_tokens": tokens})

    with pytest.raises(HarnessError, match=r"max_new_tokens \(6 in a vs 8 in b\): the models' numbers on one page "
                                           r"would not be comparable"):
        check_compatible([run("a", 6), run("b", 8)])
    with pytest.raises(HarnessError, match="one table would mix them without a column saying which is which"):
        check_compatible([run("a", 6), run("a", 8)])


def test_resume_of_a_run_with_a_broken_manifest_does_not_speak_of_a_flag_never_given(tmp_path, caplog, recwarn):
    """Pass 17, #49: resuming a run whose manifest.json was broken first said 'read anyway
    (--trust-damaged)', a flag the user never gave, before the right message."""
    import logging

    from harness.cli import main
    from tests.support import FAST, sweep

    run = sweep(tmp_path / "run", *FAST)
    (run / "manifest.json").write_text('{"broken')
    with caplog.at_level(logging.WARNING):
        assert main(["resume", str(run)]) == 0
    assert not [r for r in caplog.records if "--trust-damaged" in r.getMessage()]
    assert not [w for w in recwarn if "--trust-damaged" in str(w.message)]  # the damage is said as a warning


def test_a_page_the_user_edited_in_a_commands_output_is_kept(tmp_path):
    """Pass 18, #229/#230 (lost): claims (and detect, plan, corpus-report, causal-heads) rewrote an
    edited page in their own --out without a word; figures kept its report as report.edited.md."""
    from harness.cli import main
    from tests.support import sweep

    run = sweep(tmp_path / "r2", "model=tiny", "prompts.limit=3", "prefix.lengths=[8,24]", "decode.max_new_tokens=6",
                "draw_figures=false")
    out = tmp_path / "cl"
    assert main(["claims", str(run), "--resamples", "20", "--out", str(out)]) == 0
    with (out / "claims.md").open("a", encoding="utf-8") as page:
        page.write("MY NOTES\n")
    assert main(["claims", str(run), "--resamples", "20", "--out", str(out)]) == 0
    assert "MY NOTES" in (out / "claims.edited.md").read_text(encoding="utf-8")
    assert "MY NOTES" not in (out / "claims.md").read_text(encoding="utf-8")
    assert main(["claims", str(run), "--resamples", "20", "--out", str(out)]) == 0
    assert not (out / "claims.edited-2.md").exists()  # its own page is not an edit


def test_resume_with_an_override_of_its_own_key_does_not_call_it_given_twice(tmp_path):
    """Pass 18, #83: resume RUN 'prefix.lengths=[8]' warned 'prefix.lengths is given 2 times' (the
    user gave it once; the run's own command holds the other), then refused the design change."""
    import warnings

    from tests.support import FAST, exit_code, sweep

    run = sweep(tmp_path / "run", *[o for o in FAST if not o.startswith("prefix.lengths")], "prefix.lengths=[8,24]")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert exit_code(["resume", str(run), "prefix.lengths=[8]"]) == 2  # a design change, refused
