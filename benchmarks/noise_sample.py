"""How many conditions does the noise floor need? Its floor from small samples against a large one.

The noise floor (:mod:`harness.measure.noise`) computes a sample of a sweep's B/C conditions again
alone; twice the largest log-probability difference it sees is the margin below which a greedy step
is flagged ``near_tie``. Each sampled condition costs a one-row step-by-step decode, so the sample's
size is most of the noise floor's cost. This script runs each named sweep once with a large sample
(``analysis.noise_fraction=0.25``: 40 of its 160 B/C conditions), then draws 2,000 random subsets of
8 and of 16 of those rows and prints, per size, how often the subset's margin floor equals the full
sample's, the 5th percentile of subset floor / full floor, and the most conditions flagged
``near_tie`` at the full floor that a subset's floor would have missed. Random subsets are the
pessimistic case: the harness's own sample takes one condition from each cell of group, length and
isolation in turn (:func:`harness.measure.noise.noise_sample`).

    python benchmarks/noise_sample.py                    # the GPT-2-small-sized random model (sweep_cost's)
    python benchmarks/noise_sample.py --sweeps smollm2   # SmolLM2-135M-Instruct (make real-models)

About 4 minutes a sweep on one CPU thread.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
DESIGN = ["prompts=stories_en", "prompts.limit=4", "prefixes=default", "prefixes.per_group=5",
          "prefix.lengths=[32,64,128,256]", "prefix.too_short=repeat", "decode.max_new_tokens=32",
          "draw_figures=false", "analysis.noise_fraction=0.25", "analysis.noise_max=40"]
SIZES = (8, 16)
DRAWS = 2000


def sweep_overrides(name: str, workdir: Path) -> list[str]:
    if name == "smollm2":
        return ["model=smollm2-135m-instruct-q4_1", "model.linear_dtype=null", *DESIGN]
    spec = importlib.util.spec_from_file_location("sweep_cost", HERE / "sweep_cost.py")
    sweep_cost = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep_cost)
    model_dir = workdir / "model"
    sweep_cost.write_model(model_dir)
    return [f"model.name_or_path={model_dir}", "model.dtype=float32", *DESIGN]


def floor_of(noise: pd.DataFrame) -> float:
    """The margin floor as the harness computes it (harness.measure.noise.margin_floor)."""
    from harness.measure.noise import margin_floor

    return margin_floor(noise)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", nargs="+", default=["random"], choices=["random", "smollm2"])
    ns = parser.parse_args()
    from harness import compose, run

    rng = np.random.default_rng(0)
    for name in ns.sweeps:
        with tempfile.TemporaryDirectory() as tmp:
            out = run(compose(sweep_overrides(name, Path(tmp))), Path(tmp) / "run", progress=False)
            noise = pd.read_parquet(out / "noise.parquet")
            conditions = pd.read_parquet(out / "conditions.parquet")
        margins = conditions[conditions.group != "A"][["min_margin_a", "min_margin_x"]].min(axis=1).to_numpy()
        full = floor_of(noise)
        flagged = int((margins < full).sum())
        print(f"{name}: {len(noise)} rows; margin floor {full:.3g}; {flagged} of {len(margins)} B/C conditions "
              f"near_tie at it")
        for size in SIZES:
            ratios, missed = [], []
            for _ in range(DRAWS):
                sub = noise.iloc[rng.choice(len(noise), size, replace=False)]
                floor = floor_of(sub)
                ratios.append(floor / full)
                missed.append(flagged - int((margins < floor).sum()))
            ratios = np.array(ratios)
            print(f"  {size:>2} rows: floor equal to the full sample's in {np.mean(ratios == 1):.3f} of {DRAWS} subsets; "
                  f"5th percentile of subset / full {np.quantile(ratios, 0.05):.3f}; near_tie flags missed: "
                  f"at most {max(missed)}, mean {np.mean(missed):.2f}")


if __name__ == "__main__":
    main()
