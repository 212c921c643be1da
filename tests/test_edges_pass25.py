"""The twenty-fifth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
f557857): an --out of other settings written over, an interrupted multirun read as whole, advice
below the harness's own minimum design, and messages that named the wrong cause."""

from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize("first, second, differ", [
    (["claims", "--resamples", "50"], ["claims", "--resamples", "50", "--delta", "attn_kl_mean=0.1"],
     "delta the runs' own there, attn_kl_mean=0.1 here"),
    (["detect", "--seed", "0"], ["detect", "--seed", "3"], "seed 0 there, 3 here")])
def test_an_out_of_other_settings_is_refused_not_replaced(tiny_run, tmp_path, capsys, first, second, differ):
    """#93/#94 (lost): `detect --seed 3` over a --seed 0 page and `claims` at another Δ over a page
    replaced it (rc 0); a rerun with the same settings still writes over its own output."""
    out = tmp_path / "out"
    command = lambda words: [words[0], str(tiny_run), "--out", str(out), *words[1:]]  # noqa: E731
    assert main(command(first)) == 0
    page = next(out.glob("*.md")).read_text()
    capsys.readouterr()
    assert main(command(second)) == 2
    err = capsys.readouterr().err
    assert f"made with other settings ({differ}); give another directory (nothing is overwritten)" in err
    assert next(out.glob("*.md")).read_text() == page
    assert main(command(first)) == 0
