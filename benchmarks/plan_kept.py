"""Did a sweep cost what its plan priced? Each prompt's conditions against the plan's price for them.

``harness plan`` prices a design from the pilot's measured seconds per A and per B/C condition
(its page's "Cost, measured on the pilot" table). A sweep's conditions table records the seconds of
every condition, so each prompt's cost can be set beside its price: where most prompts cost what
was priced and a few cost many times more, the cores were shared while those ran (another job, a
machine swapping) and the price held; where every prompt costs more, the price was wrong. Also
prints the run's phases (status.json) beside the conditions they served.

    python benchmarks/plan_kept.py outputs/study/smollm2-system --seconds-a 0.616 --seconds-bc 0.0974

The plan's prices include the loop around the conditions (storing results, progress: the pilot's
"conditions" phase over the sum of its conditions' seconds), so each prompt's seconds are scaled by the
run's own such factor before they are compared: exact for a run computed in one sweep, and for a
resumed one estimated from the share of its conditions its last sweep computed (the script says
which). The prompts are printed in the sweep's order (the order they were computed in).
"""

from __future__ import annotations

import argparse
import math
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


def loop_factor(conditions: pd.DataFrame, status: dict, manifest: dict) -> tuple[float, str]:
    """The run's conditions phase over the seconds its conditions recorded, and how it was found."""
    phase, total = float(status["seconds"]["conditions"]), float(conditions.seconds.sum())
    computed, reused = manifest.get("computed_this_run"), manifest.get("reused")
    if reused == 0 or not computed:
        return phase / total, "exact: the run was computed in one sweep"
    share = computed / len(conditions)
    estimate = phase / (total * share)
    said = f"its last sweep computed {computed:,} of its {len(conditions):,} conditions"
    if estimate < 1:  # the table's other conditions were timed in an earlier, slower sweep: no share says the loop
        return 1.0, f"unscaled: {said}, and the rest were timed in slower sweeps (the share's estimate is below 1)"
    return estimate, f"estimated: {said}, taken as that share of their seconds"


def price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a price is a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"a price is a number of seconds above 0, got {text}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a finished run directory (a sweep's)")
    parser.add_argument("--seconds-a", type=price, required=True, help="the plan's seconds per A condition")
    parser.add_argument("--seconds-bc", type=price, required=True, help="the plan's seconds per B/C condition")
    parser.add_argument("--slow", type=price, default=2.0, help="a prompt this many times its price is 'slow' (>1)")
    args = parser.parse_args()
    if args.slow <= 1:
        parser.error(f"--slow is a multiple of a prompt's price above 1, got {args.slow:g}")
    from harness.errors import HarnessError
    from harness.runs.rundir import RunDir

    run = RunDir(args.run)
    missing = [name for name in (run.CONDITIONS, run.STATUS, run.MANIFEST) if not run.has(name)]
    if missing:
        parser.error(f"{args.run} is not a finished sweep's run directory (it has no {', '.join(missing)})")
    try:  # each file checked against its checksum, the table against the manifest's sha256
        status, manifest = run.status(), run.manifest()
        conditions = run.table(run.CONDITIONS)[["prompt_id", "group", "seconds"]]
    except HarnessError as exc:
        parser.error(str(exc))
    if status.get("status") != "complete" or not (status.get("seconds") or {}).get("conditions"):
        parser.error(f"{args.run}: its status is {status.get('status')!r}, not complete with a timed conditions phase")
    factor, how = loop_factor(conditions, status, manifest)
    table = per_prompt(conditions.assign(seconds=conditions.seconds * factor), args.seconds_a, args.seconds_bc)
    print(f"each condition's seconds x {factor:.3f}, the run's loop around them ({how})")
    slow = table.ratio > args.slow
    print(table.round(3).to_string())
    print(f"\n{len(table)} prompts: seconds / price, median {table.ratio.median():.2f} "
          f"(quartiles {table.ratio.quantile(0.25):.2f}-{table.ratio.quantile(0.75):.2f})")
    print(f"all prompts: {table.seconds.sum():.0f} s against {table.priced.sum():.0f} s priced "
          f"({table.seconds.sum() / table.priced.sum():.2f}x)")
    rest = (f": {table.seconds[~slow].sum():.0f} s against {table.priced[~slow].sum():.0f} s priced "
            f"({table.seconds[~slow].sum() / table.priced[~slow].sum():.2f}x)" if (~slow).any() else "")
    print(f"{int(slow.sum())} prompts over {args.slow:g}x their price: {table.seconds[slow].sum():.0f} s; the other "
          f"{int((~slow).sum())}{rest}")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in status.get("seconds", {}).items())
    print(f"phases of its last sweep ({len(conditions)} conditions in the tables): {phases}")


if __name__ == "__main__":
    main()
