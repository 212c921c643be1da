"""Did a sweep cost what its plan priced? Each prompt's conditions against the plan's price for them.

``harness plan`` prices a design from the pilot's measured seconds per A and per B/C condition
(its page's "Cost, measured on the pilot" table). A sweep's conditions table records the seconds of
every condition, so each prompt's cost can be set beside its price: where most prompts cost what
was priced and a few cost many times more, the cores were shared while those ran (another job, a
machine swapping) and the price held; where every prompt costs more, the price was wrong. Also
prints the run's phases (status.json) beside the conditions they served.

    python benchmarks/plan_kept.py outputs/study/smollm2-system --seconds-a 0.616 --seconds-bc 0.0974

The prompts are printed in the sweep's order (the order they were computed in).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def per_prompt(conditions: pd.DataFrame, seconds_a: float, seconds_bc: float) -> pd.DataFrame:
    """One row per prompt, in the order the sweep computed them: its conditions' seconds, the plan's
    price for them, and their ratio."""
    order = list(dict.fromkeys(conditions.prompt_id.astype(str)))
    grouped = conditions.assign(prompt_id=conditions.prompt_id.astype(str),
                                is_a=conditions.group.astype(str) == "A").groupby("prompt_id")
    table = pd.DataFrame({"seconds": grouped.seconds.sum(), "n_a": grouped.is_a.sum(),
                          "n_bc": grouped.is_a.size() - grouped.is_a.sum()}).reindex(order)
    table["priced"] = table.n_a * seconds_a + table.n_bc * seconds_bc
    table["ratio"] = table.seconds / table.priced
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a finished run directory")
    parser.add_argument("--seconds-a", type=float, required=True, help="the plan's seconds per A condition")
    parser.add_argument("--seconds-bc", type=float, required=True, help="the plan's seconds per B/C condition")
    parser.add_argument("--slow", type=float, default=2.0, help="a prompt this many times its price is 'slow'")
    args = parser.parse_args()
    conditions = pd.read_parquet(args.run / "conditions.parquet", columns=["prompt_id", "group", "seconds"])
    table = per_prompt(conditions, args.seconds_a, args.seconds_bc)
    slow = table.ratio > args.slow
    print(table.round(3).to_string())
    print(f"\n{len(table)} prompts: seconds / price, median {table.ratio.median():.2f} "
          f"(quartiles {table.ratio.quantile(0.25):.2f}-{table.ratio.quantile(0.75):.2f})")
    print(f"all prompts: {table.seconds.sum():.0f} s against {table.priced.sum():.0f} s priced "
          f"({table.seconds.sum() / table.priced.sum():.2f}x)")
    print(f"{int(slow.sum())} prompts over {args.slow:g}x their price: {table.seconds[slow].sum():.0f} s; the other "
          f"{int((~slow).sum())}: {table.seconds[~slow].sum():.0f} s against {table.priced[~slow].sum():.0f} s priced "
          f"({table.seconds[~slow].sum() / table.priced[~slow].sum():.2f}x)")
    status = json.loads((args.run / "status.json").read_text())
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in status.get("seconds", {}).items())
    print(f"phases of its last sweep ({len(conditions)} conditions in the tables): {phases}")


if __name__ == "__main__":
    main()
