"""``harness causal-heads`` end to end on a tiny sweep: what it writes, that its identities hold in
its own tables, that it resumes, and that bad input is a one-line error."""

import pandas as pd
import pytest

from harness.cli import main
from harness.runs.causal_heads import causal_heads
from tests.support import FAST, one_line_error, sweep


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("causal") / "run"
    sweep(run_dir, *FAST, "prefixes.per_group=4", "prompts.limit=3")
    return run_dir


def test_causal_heads_writes_its_tables_figure_and_page(tiny_sweep, tmp_path, capsys):
    out = tmp_path / "causal"
    assert main([ "causal-heads", str(tiny_sweep), "--out", str(out), "--k", "1", "2", "--draws", "1"]) == 0
    for name in ("causal_conditions.parquet", "causal_effects.parquet", "head_sets.parquet",
                 "head_ranking.parquet", "causal_heads.md", "figures/causal_heads.png", "causal_heads.json"):
        assert (out / name).is_file(), name
    about = pd.read_json(out / "causal_heads.json", typ="series")
    assert set(about.choosing_prefixes).isdisjoint(about.testing_prefixes)
    rows = pd.read_parquet(out / "causal_conditions.parquet")
    prefixed = rows[rows.group != "A"]
    assert set(prefixed.prefix_id) == set(about.testing_prefixes)  # tested on the half that did not name heads
    assert prefixed.prefix_len.unique().tolist() == [8]  # the run's shortest length by default
    settings = set(prefixed.setting)
    assert {"none", "mask", "mask_heads(top1)", "mask_heads(random2.1)", "only_heads(top2)"} <= settings
    effects = pd.read_parquet(out / "causal_effects.parquet")
    assert set(effects.measure) >= {"output_kl", "norm_edit_distance"}
    none = effects[effects.setting == "none"]
    assert none.removed.isna().all()  # nothing removed from itself
    sets = pd.read_parquet(out / "head_sets.parquet").set_index("head_set")
    ranking = pd.read_parquet(out / "head_ranking.parquet")
    assert [tuple(h) for h in sets.loc["top2", "heads"]] == sorted(
        zip(ranking.layer.head(2).astype(int), ranking["head"].head(2).astype(int)))
    page = (out / "causal_heads.md").read_text()
    # 2 testing prefixes per group give the unmasked effect no interval: no share of it is stated (pass 25, #32)
    assert "it has no interval (" in page and "The shares are left out" in page
    assert "Share of the effect removed" not in page and "Heads as a detector" not in page  # harness detect's now
    assert not (out / "detector.parquet").exists()

    # a rerun resumes from the stored results and gives the same tables
    before = pd.read_parquet(out / "causal_effects.parquet")
    causal_heads(tiny_sweep, out, ks=[1, 2], draws=1, progress=False)
    pd.testing.assert_frame_equal(pd.read_parquet(out / "causal_effects.parquet"), before)

    # pass 24, #54: a test of other settings into the same directory replaced this one without a word
    error = one_line_error(capsys, ["causal-heads", str(tiny_sweep), "--out", str(out), "--ranking-only", "--rank-by",
                                    "kl_shared"])
    assert (out / "causal_effects.parquet").is_file()
    # pass 28, #84: its advice was "the same settings to resume it", which --ranking-only could never follow
    assert "--ranking-only would replace its page and remove its tables" in error and "resume" not in error
    # pass 9, #176: a ranking-only rerun into the same directory left the causal test's tables and
    # figure beside its page, one directory mixing two analyses; pass 26, #238: removing them lost the
    # test, so it is refused and the test stays whole
    page = (out / "causal_heads.md").read_text()
    assert main(["causal-heads", str(tiny_sweep), "--out", str(out), "--ranking-only", "--k", "1", "2",
                 "--draws", "1"]) == 2
    for name in ("causal_conditions.parquet", "causal_effects.parquet", "figures/causal_heads.png",
                 "figures/causal_heads.pdf"):
        assert (out / name).exists(), name
    assert (out / "causal_heads.md").read_text() == page


def test_causal_heads_refuses_bad_input_in_one_line(tiny_sweep, tmp_path, capsys):
    assert main(["causal-heads", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert main(["causal-heads", str(tiny_sweep), "--out", str(tmp_path / "o"), "--length", "99"]) == 2
    assert "not in the run" in capsys.readouterr().err
    assert main(["causal-heads", str(tiny_sweep), "--out", str(tiny_sweep)]) == 2
    assert main(["causal-heads", str(tiny_sweep), "--out", str(tmp_path / "o"), "--rank-by", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "nope" in err


def test_ranking_only_reads_the_run_without_running_the_model(tiny_sweep, tmp_path, capsys):
    out = tmp_path / "ranking"
    assert main(["causal-heads", str(tiny_sweep), "--out", str(out), "--k", "1", "--ranking-only"]) == 0
    assert not (out / "results").exists() and not (out / "causal_effects.parquet").exists()
    assert set(pd.read_parquet(out / "head_sets.parquet").head_set) == {"top1", "random1.1", "random1.2", "random1.3"}
    assert "No causal sweep" in (out / "causal_heads.md").read_text()
    # the old flag says where the detector went
    error = one_line_error(capsys, ["causal-heads", str(tiny_sweep), "--out", str(out), "--detector-only"])
    assert "harness detect RUN --out DIR" in error


def test_random_draws_that_repeat_a_set_are_said_on_the_page(tiny_sweep, tmp_path):
    """Pass 25 #35/#40 (silent): with fewer distinct random sets than --draws, only the console said
    the draws repeat; causal_heads.md listed random2.1 and random2.2 as two draws of one set."""
    out = tmp_path / "ranking"
    assert main(["causal-heads", str(tiny_sweep), "--out", str(out), "--k", "1", "--draws", "12", "--ranking-only"]) == 0
    sets = pd.read_parquet(out / "head_sets.parquet")
    distinct = len({str(h) for h in sets[sets.kind == "random"].heads})
    assert distinct < 12
    assert (f"only {distinct} distinct random set(s) of 1 heads shaped like the top 1 exist in this model: its 12 "
            f"draws repeat them") in (out / "causal_heads.md").read_text()


def test_a_ranking_of_other_settings_is_named_as_a_ranking(tiny_sweep, tmp_path, capsys):
    """Pass 27 #31 (misleading): an --out holding only a --ranking-only ranking was refused as
    holding "a causal test of other settings"."""
    out = tmp_path / "ranking"
    assert main(["causal-heads", str(tiny_sweep), "--out", str(out), "--k", "1", "--ranking-only"]) == 0
    capsys.readouterr()
    assert main(["causal-heads", str(tiny_sweep), "--out", str(out), "--k", "2", "--ranking-only"]) == 2
    assert "holds a head ranking (--ranking-only) of other settings (ks [1] there, [2] here)" in capsys.readouterr().err
