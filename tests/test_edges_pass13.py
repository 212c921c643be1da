"""The thirteenth adversarial pass's cases (issue 67), found on 594ce29: 249 new cases over every
command, 0 lost, 13 silent, 4 tracebacks, 8 misleading (its table: the pass's notes in git)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.cli import main
from tests.inputs.test_corpora import installed
from tests.support import FAST, exit_code, sweep


@pytest.fixture(scope="module")
def delta_run(tmp_path_factory):
    """A run made with its own Δ for edit distance."""
    return sweep(tmp_path_factory.mktemp("pass13") / "delta", *FAST, "prompts.limit=3",
                 "+claims.delta.norm_edit_distance=0.2")


def _claims_delta(page_dir) -> set:
    table = pd.read_parquet(page_dir / "claims.parquet")
    return set(table[table.measure.str.startswith("norm_edit_distance")].delta)


def test_the_deciding_commands_read_the_delta_a_run_was_made_with(delta_run, tmp_path, capsys):
    """#55, #82, #118: claims and plan decided at the registry's Δ whatever the sweep stated (figures
    read the run's), and collect dropped it; a --delta on top replaces it and the page says so."""
    assert main(["claims", str(delta_run), "--out", str(tmp_path / "c1"), "--resamples", "50"]) == 0
    assert _claims_delta(tmp_path / "c1") == {0.2}
    assert main(["claims", str(delta_run), "--out", str(tmp_path / "c2"), "--resamples", "50",
                 "--delta", "norm_edit_distance=0.3"]) == 0
    assert _claims_delta(tmp_path / "c2") == {0.3}
    assert "replaces the Δ of 0.2 the runs were made with" in (tmp_path / "c2" / "claims.md").read_text()
    capsys.readouterr()
    assert main(["plan", str(delta_run)]) == 0
    assert "(attn_kl_mean 0.0500, norm_edit_distance 0.200;" in capsys.readouterr().out
    assert main(["collect", str(delta_run), "--out", str(tmp_path / "col")]) == 0
    assert json.loads((tmp_path / "col" / "manifest.json").read_text())["claims_delta"] == {"norm_edit_distance": 0.2}
    assert main(["claims", str(tmp_path / "col"), "--out", str(tmp_path / "c3"), "--resamples", "50"]) == 0
    assert _claims_delta(tmp_path / "c3") == {0.2}


@pytest.mark.parametrize("args, first", [
    (["claims", "{run}", "--delta", "obeyed=0.1"], "the tests of harness claims read at most kl, attn_kl_mean, "
                                                    "norm_edit_distance; --delta obeyed=... would change nothing"),
    (["plan", "{run}", "--delta", "target_hit=0.2"], "the tests of harness plan read at most kl, attn_kl_mean, "
                                                     "norm_edit_distance"),
    (["plan", "{run}", "--delta", "attn_kl_mean=0.5", "--effect-sds", "0.5"], "--delta and --effect-sds each set"),
    (["claims", "{run}", "--delta", "norm_edit_distance=1e308"], "must be below 1, the largest difference it can show"),
    (["claims", "{run}", "--delta", "norm_edit_distance=0.1", "--delta", "norm_edit_distance=0.2"],
     "--delta norm_edit_distance= is given more than once (0.1, 0.2): give each measure's Δ once"),  # pass 16, #2
])
def test_a_delta_that_would_change_nothing_or_cannot_be_reached_is_refused(delta_run, tmp_path, capsys, args, first):
    """#46 (a Δ of 1e308 for a proportion, printed as 309 digits), #48 and #80 (a --delta for a
    measure the command does not test, ignored), #75 (--delta dropped beside --effect-sds)."""
    args = [a.format(run=delta_run) for a in args] + ["--out", str(tmp_path / "page")]
    assert exit_code(args) == 2
    assert first in capsys.readouterr().err
    assert not (tmp_path / "page" / "claims.md").exists()


@pytest.mark.parametrize("args, first", [
    (["kv-size", "layers=32", "kv_heads=8", "head_dim=128", "seq_len=nan"], "seq_len must be a positive whole number"),
    (["kv-size", "layers=1e30", "kv_heads=8", "head_dim=128"], "layers must be a positive whole number (e.g. layers=32), got '1e30'"),
    (["claims", "{run}", "--resamples", "100000000"], "--resamples: must be at most 1,000,000, got 100,000,000"),
    (["causal-heads", "{run}", "--draws", "0"], "--draws: must be at least 1, got 0"),
])
def test_numbers_out_of_range_are_refused_in_one_line_naming_the_option(delta_run, tmp_path, capsys, args, first):
    """#152, #153 (int()'s 'invalid literal' text, the key not named), #223 (a traceback and exit 3),
    #173 (--draws 0 accepted: the page's random-head control silently empty)."""
    args = [a.format(run=delta_run) for a in args] + (["--out", str(tmp_path / "page")] if "{run}" in args[1] else [])
    assert exit_code(args) == 2
    err = capsys.readouterr().err
    assert first in err and "Traceback" not in err


def test_a_file_or_a_missing_path_given_for_a_run_is_named_as_such(delta_run, tmp_path, capsys):
    """#22 (corpus-report RUN/manifest.json blamed the --out made from the file's name), #240 and
    #242 (resume of a file or of a missing path: 'no .hydra/overrides.yaml'), #195 (build-prefixes
    --out RUN/x.jsonl called the file's folder '--out' and asked for a directory)."""
    manifest = delta_run / "manifest.json"
    for args, first in ((["corpus-report", str(manifest)], f"{manifest} is a file, not a run directory: give the "
                                                            f"directory it is in ({delta_run})"),
                        (["claims", str(manifest)], "is a file, not a run directory"),
                        (["resume", str(manifest)], "is a file, not a run directory"),
                        (["resume", str(tmp_path / "nonexist")], "nonexist does not exist: give a run directory")):
        assert exit_code(args) == 2
        err = capsys.readouterr().err
        assert first in err and "overrides.yaml" not in err and "--out" not in err
    (tmp_path / "corpus.txt").write_text("one paragraph of text here.\n\nanother paragraph of text.\n\nthird one.\n")
    assert exit_code(["build-prefixes", "neutral", "--corpus", str(tmp_path / "corpus.txt"), "--n", "2",
                       "--out", str(delta_run / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"would be written inside {delta_run}, a run directory; give a file outside it" in err
    assert not (delta_run / "x.jsonl").exists()


def test_runs_that_did_not_finish_say_how_in_every_reader(tmp_path, capfd):
    """#89 (collect of an interrupted run: 'no tables found'), #101 (a run that failed after its
    conditions: '0 of 42 conditions failed', its recorded error never shown), #104 (resume of a run
    with an unreadable manifest advised `harness resume` and --trust-damaged, which resume lacks)."""
    from harness.io import write_sealed_json

    run = sweep(tmp_path / "run", *FAST)
    status = json.loads((run / "status.json").read_text())
    write_sealed_json({**{k: v for k, v in status.items() if not k.startswith("checksum")}, "status": "failed",
                       "error": "boom in the noise floor", "failed": []}, run / "status.json")
    assert exit_code(["claims", str(run), "--out", str(tmp_path / "c")]) == 2
    err = capfd.readouterr().err
    assert "failed after its conditions (boom in the noise floor)" in err and "0 of" not in err
    (run / "status.json").unlink()
    for name in ("conditions.parquet", "attention.parquet"):
        (run / name).unlink()
    assert exit_code(["collect", str(run), "--out", str(tmp_path / "col")]) == 2
    assert f"did not finish (no status.json); finish it with `harness resume {run}`" in capfd.readouterr().err
    assert exit_code(["resume", str(run)]) == 0
    (run / "manifest.json").write_text("{not json")
    capfd.readouterr()
    assert exit_code(["resume", str(run)]) == 0
    said = "".join(capfd.readouterr())
    assert "--trust-damaged" not in said and "this sweep rewrites it" in said
    assert json.loads((run / "manifest.json").read_text())["tables"]


def test_claims_on_runs_where_no_claim_can_be_tested_is_refused(tmp_path, capsys):
    """#245: an A/B-only run printed 'wrote 6 files' with exit 0, every claim 'Not tested' inside the
    page; corpus-report, detect and causal-heads refuse the same run in one line."""
    run = sweep(tmp_path / "ab", *FAST, "groups=[A,B]")
    assert exit_code(["claims", str(run), "--out", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert "no claim can be tested on these runs" in err and "claim 3 needs groups B and C" in err
    assert not (tmp_path / "page").exists()


@pytest.mark.skipif(not (installed("agentdojo") and installed("spikee")),
                    reason="agentdojo and spikee are not installed (make corpora; CI installs them)")
def test_corpus_report_reads_one_benchmark_and_a_bank_of_its_model(tmp_path, capsys):
    """#17 (agentdojo and spikee runs pooled into one 'attacker's string' row, two judges) and #236
    (a --bank of another model set beside the benchmark's claim 3 without a word): both refused,
    before the page's directory is claimed."""
    common = ["model=tiny", "decode.max_new_tokens=4", "prompts.limit=2", "draw_figures=false",
              "prefixes.per_group=2", "prefix.lengths=[512]", "prefix.too_short=skip"]
    agentdojo = sweep(tmp_path / "ad", *common, "prefixes=agentdojo", "+prefixes.templates=[direct]")
    spikee = sweep(tmp_path / "sp", *common, "prefixes=spikee")
    bank = sweep(tmp_path / "bank", "model=tiny-gpt2", *FAST[1:], "decode.max_new_tokens=4")
    for args, first in (([str(agentdojo), str(spikee)], "these runs drew from 2 benchmarks (agentdojo, spikee)"),
                        ([str(agentdojo), "--bank", str(bank)], "share no model with the benchmark's")):
        assert exit_code(["corpus-report", *args, "--out", str(tmp_path / "page")]) == 2
        assert first in capsys.readouterr().err
        assert not (tmp_path / "page").exists()


def test_detect_refuses_benign_inputs_with_no_attack_run_at_their_length(tmp_path, monkeypatch, capsys):
    """#36: a spikee-fp-like run (groups A, B) at a length no attack run has was scored, then left out
    of the over-defence table without a word."""
    import harness.runs.detect as detect

    attacks = sweep(tmp_path / "attacks", *FAST)
    benign = sweep(tmp_path / "benign", *FAST, "groups=[A,B]", "prefix.lengths=[32]")

    def not_reached(*args, **kwargs):
        raise AssertionError("the model scored the inputs of runs detect refuses")

    monkeypatch.setattr(detect, "measure_runs", not_reached)
    assert exit_code(["detect", str(attacks), str(benign), "--out", str(tmp_path / "page")]) == 2
    err = capsys.readouterr().err
    assert f"{benign} has benign inputs at 32 tokens" in err and "no run here has attacks there" in err
    assert not (tmp_path / "page").exists()


def test_a_python_without_vllm_is_refused_before_anything_loads(tmp_path, capsys):
    """#146: the harness's own Python as backend.python started a worker that died on `import vllm`,
    whose traceback was printed as the error, and left a run directory behind."""
    import sys

    run = tmp_path / "vl"
    assert exit_code(["sweep", "model=demo", "prefix.lengths=[8]", "prompts.limit=1", "draw_figures=false",
                       "experiment=vllm-outputs", f"backend.python={sys.executable}", f"hydra.run.dir={run}"]) == 2
    err = capsys.readouterr().err
    assert f"{sys.executable} runs but has no vllm package" in err and "Traceback" not in err
    assert not run.exists()


def test_the_detectors_heads_table_says_how_each_chose_its_heads():
    """Pass 13, #28 (noted as ok): one column 'k' held Attention Tracker's SD multiplier (0) and the
    capture detector's head count, printed alike ('1.00')."""
    import numpy as np

    from harness.reporting.detection import _chosen_by

    assert _chosen_by("focus_score", 0.0) == "B - C gap past 0 SD"
    assert _chosen_by("capture_heads", 1.0) == "top 1 by C - B"
    assert _chosen_by("capture_all", np.nan) == "-"
