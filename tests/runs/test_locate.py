"""harness locate: the bisection against a known curve, and the command on the demo model."""

import json

import numpy as np
import pandas as pd
import pytest

from harness.errors import HarnessError
from harness.runs.locate import bisect_steepest
from tests.support import SMALL_PREFIXES


def sigmoid_drift(centre: float, width: float = 12.0, prompts: int = 6):
    rng = np.random.default_rng(0)
    offsets = rng.normal(0, 0.02, prompts)
    calls = []

    def evaluate(length: int) -> pd.Series:
        calls.append(length)
        base = 1 / (1 + np.exp(-(length - centre) / width))
        return pd.Series(base + offsets, index=[f"p{i}" for i in range(prompts)])

    return evaluate, calls


@pytest.mark.parametrize("centre", [40.0, 100.0, 190.0])
def test_bisection_brackets_the_steepest_point(centre):
    evaluate, calls = sigmoid_drift(centre)
    interval, seen = bisect_steepest(evaluate, [8, 16, 32, 64, 128, 256], resolution=4)
    assert interval.high - interval.low <= 4
    assert interval.low - 4 <= centre <= interval.high + 4
    assert len(calls) == len(set(calls))  # every length evaluated once
    assert interval.rise > 0 and interval.rise_ci[0] <= interval.rise <= interval.rise_ci[1]


def test_bad_search_settings():
    evaluate, _ = sigmoid_drift(50)
    with pytest.raises(HarnessError, match="two positive"):
        bisect_steepest(evaluate, [32], 4)
    with pytest.raises(HarnessError, match="resolution"):
        bisect_steepest(evaluate, [8, 32], 0)


def test_locate_on_the_demo_model(tmp_path, capsys):
    from harness.config import compose
    from harness.runs.locate import locate

    out = tmp_path / "locate"
    locate(compose(["model=demo", "prompts.limit=3", "locate.coarse=[8,32,128]", "locate.resolution=24",
                    "decode.max_new_tokens=8", f"prefixes.path={SMALL_PREFIXES}"]), out, progress=False)
    assert "rises fastest between prefix lengths" in capsys.readouterr().out
    table = pd.read_parquet(out / "locate.parquet")
    found = json.loads((out / "locate.json").read_text())
    low, high = found["interval"]
    assert high - low <= 24 and {low, high} <= set(table.prefix_len)
    assert {8, 32, 128} <= set(table.prefix_len) and table.n_prompts.eq(3).all()
