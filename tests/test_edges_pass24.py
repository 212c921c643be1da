"""The twenty-fourth adversarial pass's cases (issue 67), found on the main of 2026-12-07 (snapshot
5c24eb5): a causal test replaced by one of other settings, a collection without its runs' noise
floors, tables with a key renamed, dropped or cast, and a replaced default Δ the page did not name."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest

import harness as H
from harness.errors import HarnessError
from harness.measure.metrics import default_deltas
from harness.runs.causal_heads import _refuse_other_settings
from tests.support import FAST


def test_a_causal_test_of_other_settings_is_not_replaced(tmp_path):
    """#54 (lost): causal-heads with --k 2 into the --out of a --k 1 test replaced its page and tables."""
    out = tmp_path / "o52"
    out.mkdir()
    settings = {"prefix_len": 24, "rank_by": "capture", "segment": "task", "seed": 0, "ks": [1], "draws": 1,
                "converse": True}
    (out / "causal_heads.json").write_text(json.dumps(settings))
    (out / "causal_effects.parquet").write_bytes(b"")  # a causal test's table (a ranking alone has none)
    _refuse_other_settings(out, settings)  # the same settings: a resume
    with pytest.raises(HarnessError, match=r"holds a causal test of other settings \(ks \[1\] there, \[2\] here\): "
                                           r"give another --out \(nothing is overwritten\)"):
        _refuse_other_settings(out, {**settings, "ks": [2]})
    _refuse_other_settings(tmp_path / "new", settings)  # nothing there yet


def test_a_collection_carries_its_runs_noise_floors(tmp_path):
    """#27/#28/a45 (misleading): a collection's report said no noise floor was measured (blaming
    analysis.noise_floor=false) though both jobs had measured one."""
    from harness.cli import main

    sweep_dir = tmp_path / "m1"
    assert main(["sweep", "-m", *FAST, "seed=0,1", f"hydra.sweep.dir={sweep_dir}"]) == 0
    assert main(["collect", str(sweep_dir), "--out", str(tmp_path / "c")]) == 0
    jobs = H.load_noise([sweep_dir / "0", sweep_dir / "1"])
    collected = H.load_noise([tmp_path / "c"])
    assert collected is not None and len(collected) == len(jobs) > 0


def test_tables_with_a_key_dropped_renamed_or_cast(tiny_run):
    """a34 (traceback): no isolation column was a KeyError; a3 (misleading): a renamed prefix_len
    was blamed on concatenated runs; a57 (misleading): prefix_len cast to float was blamed on a filter."""
    conditions, attention = H.load_runs([tiny_run])
    assert len(H.compare_groups(conditions.drop(columns=["isolation"]), "output_kl", n_resamples=50))
    with pytest.raises(ValueError, match=r"has no 'prefix_len' column, one of a condition's keys, so conditions that "
                                         r"differ only in it read as copies"):
        H.compare_groups(conditions.rename(columns={"prefix_len": "length"}), "output_kl", n_resamples=50)
    figures = H.make_figures(conditions.assign(prefix_len=conditions.prefix_len.astype(float)), attention)
    for fig in figures.values():
        plt.close(fig)


def test_a_delta_replacing_the_default_says_so(tiny_run, tmp_path):
    """#16 (silent): `claims --delta attn_kl_mean=0.0001` on a run made at the default Δ did not say
    which Δ it replaced, as docs/statistics.md promises."""
    from harness.cli import main

    assert main(["claims", str(tiny_run), "--delta", "attn_kl_mean=0.0001", "--out", str(tmp_path / "cl")]) == 0
    page = (tmp_path / "cl" / "claims.md").read_text()
    assert (f"--delta attn_kl_mean=0.0001 replaces the Δ of {default_deltas()['attn_kl_mean']:g} the runs were made "
            f"with (the default)") in page


def test_b_s_interval_stays_within_the_values_a_proportion_can_take():
    """#2 (silent, minor): claim 3's detail printed "B's mean 0.431 (interval -0.196 to 1.06)" for an
    edit distance, which lies in 0-1; the interval is clipped there and the page says so."""
    import numpy as np
    import pandas as pd

    from harness.analysis import claims
    from harness.measure.metrics import clipped

    rng = np.random.default_rng(3)
    rows = [{"model": "m", "placement": "raw", "isolation": "none", "beta": np.nan, "group": g, "prompt_id": f"p{p}",
             "prefix_id": f"{g}{x}", "prefix_len": 32, "attn_kl_mean": 0.1,
             "norm_edit_distance": float(x == 0) if g == "B" else rng.uniform(0.2, 0.6)}  # B: one prefix flips all
            for g in "BC" for x in range(3) for p in range(3)]
    noise = pd.DataFrame({"model": ["m"], "norm_edit_distance": [0.0]})
    row = claims.c_versus_b(pd.DataFrame(rows), noise, "norm_edit_distance", n_resamples=50).iloc[0]
    assert "B's mean 0.333 (interval 0 to 1.00, clipped to the values it can take)" in row.detail
    assert clipped("norm_edit_distance", 0.1, 0.4) == (0.1, 0.4, False)
    assert clipped("output_kl", -0.2, 3.0) == (0.0, 3.0, True)
    assert clipped("kl_shared", -0.2, 3.0) == (-0.2, 3.0, False)  # no bounds stated: left alone
    low, high, moved = clipped("norm_edit_distance", float("nan"), float("nan"))
    assert np.isnan(low) and np.isnan(high) and not moved


def test_a_share_of_two_equal_effects_is_zero_not_float_residue():
    """#54b (silent, minor): causal_heads.md printed "-6.66e-16, no interval" for a share that is 0."""
    import numpy as np
    import pandas as pd

    from harness.analysis.causal_heads import share_removed

    rng = np.random.default_rng(0)
    cells = pd.DataFrame([{"prompt_id": f"p{p}", "prefix_id": f"{g}{x}", "group": g} for g in "BC" for x in range(4)
                          for p in range(3)])
    cells["none"] = rng.normal(size=len(cells)) + (cells.group == "C") * 0.7
    residues = []
    for i in range(len(cells)):  # one value moved by one ulp: the same effect in exact arithmetic, give or take
        moved = cells.assign(mask=cells["none"])
        moved.loc[i, "mask"] = np.nextafter(moved.loc[i, "none"], np.inf)
        share, _, _ = share_removed(moved, "none", "mask", n_resamples=20)
        residues.append(share)
    assert all(s == 0.0 for s in residues)
    real = cells.assign(mask=cells["none"] - (cells.group == "C") * 0.07)  # a tenth of the effect removed
    assert share_removed(real, "none", "mask", n_resamples=20)[0] == pytest.approx(0.1 * 0.7 / cells.pipe(
        lambda c: c[c.group == "C"]["none"].mean() - c[c.group == "B"]["none"].mean()))
