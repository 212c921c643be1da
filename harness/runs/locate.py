"""``harness locate``: the prefix-length interval where drift rises fastest.

A coarse sweep over ``locate.coarse`` lengths picks the consecutive pair with the largest rise in
mean drift; bisection then halves that bracket, keeping the half with the larger rise (the halves
have equal width, so this is the steeper half), until it is at most ``locate.resolution`` tokens
wide. Every length evaluated is a full set of B/C conditions on every prompt, so each reported
number has a bootstrap CI over prompts, and the rise across the final interval has a paired CI.

:func:`bisect_steepest` is the pure search, driven by any ``evaluate(length) -> per-prompt drift``;
:func:`locate` is the command, which evaluates lengths with an :class:`~harness.runs.experiment.Experiment`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness.analysis.descriptive import mean_interval
from harness.errors import HarnessError
from harness.runs.outdir import LOCATE_JSON, LOCATE_PARTIAL
from harness.numbers import ci
from harness.reporting.edits import owned_outputs

log = logging.getLogger(__name__)


@dataclass
class Interval:
    low: int
    high: int
    rise: float  # mean drift at high minus at low, paired by prompt
    rise_ci: tuple[float, float]


def bisect_steepest(evaluate: Callable[[int], pd.Series], coarse: list[int],
                    resolution: int) -> tuple[Interval, dict[int, pd.Series]]:
    """Search as described in the module docstring. ``evaluate`` returns drift per prompt
    (a Series indexed by prompt id); results are cached, each length is evaluated once."""
    coarse = sorted(set(int(n) for n in coarse))
    if len(coarse) < 2 or coarse[0] <= 0:
        raise HarnessError(f"locate.coarse needs at least two positive lengths, got {coarse}")
    if resolution < 1:
        raise HarnessError(f"locate.resolution must be at least 1, got {resolution}")
    seen: dict[int, pd.Series] = {}

    def mean(n: int) -> float:
        if n not in seen:
            seen[n] = evaluate(n)
            log.info("length %d: mean drift %.4f over %d prompts", n, seen[n].mean(), len(seen[n]))
        return float(seen[n].mean())

    rises = [mean(b) - mean(a) for a, b in zip(coarse, coarse[1:])]
    i = int(np.argmax(rises))
    low, high = coarse[i], coarse[i + 1]
    while high - low > resolution:
        mid = (low + high) // 2
        if mean(mid) - mean(low) >= mean(high) - mean(mid):
            high = mid
        else:
            low = mid
    paired = (seen[high] - seen[low]).dropna()
    return Interval(low, high, float(paired.mean()), mean_interval(paired.to_numpy(), empty_ok=True)), seen


def summary_table(seen: dict[int, pd.Series], interval: Interval | None, metric: str) -> pd.DataFrame:
    """One row per evaluated length: mean drift with its bootstrap CI over prompts, and whether the
    length is inside the located interval (None for a search stopped before it found one)."""
    rows = []
    for n in sorted(seen):
        low, high = mean_interval(seen[n].to_numpy(), empty_ok=True)
        rows.append({"prefix_len": n, "metric": metric, "n_prompts": len(seen[n]), "mean": float(seen[n].mean()),
                     "ci_low": low, "ci_high": high,
                     "in_interval": None if interval is None else interval.low <= n <= interval.high})
    return pd.DataFrame(rows)


class LocateStopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during ``harness locate``; the lengths evaluated so far were written."""

    def __init__(self, path, lengths: int, signal: KeyboardInterrupt):
        super().__init__()
        self.path, self.lengths, self.signal = path, lengths, signal


def locate(cfg, run_dir, progress: bool = True):
    """``harness locate``: evaluate lengths on the configured model and prompts, write
    ``locate.parquet`` and ``locate.json`` into ``run_dir``, and print the interval."""
    from pathlib import Path

    from harness.inputs.isolation import Isolation
    from harness.io import write_json, write_parquet
    from harness.runs.compute import compute
    from harness.runs.environment import now_iso
    from harness.runs.experiment import Experiment

    run_dir, spec = Path(run_dir), cfg.locate
    # a locate directory holds one search: a finished one (or a sweep's run) is not written over
    if (run_dir / LOCATE_JSON).exists() and cfg.on_existing.value != "fresh":
        raise HarnessError(f"{run_dir} holds a finished locate search (locate.json); choose another hydra.run.dir, "
                           f"or pass on_existing=fresh to replace it")
    if (run_dir / "conditions.parquet").exists() or (run_dir / "run_fingerprint.json").exists():
        raise HarnessError(f"{run_dir} is a sweep's run directory; locate writes a directory of its own: choose "
                           f"another hydra.run.dir")
    metric = spec.metric.value
    groups = ["A", *sorted(g.value for g in spec.groups)]
    if metric.startswith("attn_") and not cfg.analysis.attention:
        raise HarnessError(f"locate.metric={metric} is an attention measure, and analysis.attention=false turns "
                           f"attention off: drop one of them")
    if metric.endswith("edit_distance") and cfg.decode.path.value == "none":
        raise HarnessError(f"locate.metric={metric} compares continuations, and decode.path=none decodes none: use "
                           f"locate.metric=output_kl or attn_kl_mean, or another decode.path")
    ignored = []  # a sweep's keys, given to locate: said, not silently dropped
    if sorted(g.value for g in cfg.groups) != ["A", "B", "C"]:
        ignored.append(f"groups={[g.value for g in cfg.groups]} (it evaluates locate.groups={groups[1:]})")
    if [m.value for m in cfg.isolation] != ["none"]:
        ignored.append(f"isolation={[m.value for m in cfg.isolation]} (it searches plain concatenation)")
    if list(cfg.prefix.lengths) != [32, 64, 128, 256]:  # config.yaml's: an experiment's or the user's
        ignored.append(f"prefix.lengths={list(cfg.prefix.lengths)} (it evaluates locate.coarse={list(spec.coarse)} "
                       f"and bisects from there)")
    if ignored:
        log.warning("locate does not read the sweep's %s", "; ".join(ignored))
    exp = Experiment.build(cfg, attention=metric.startswith("attn_"), lengths=list(spec.coarse), groups=groups,
                           settings=[Isolation()])
    if len(exp.prompts) < 2:  # one prompt: a rise with an interval of nan to nan
        raise HarnessError(f"locate's interval resamples prompts, and {len(exp.prompts)} prompt gives none: give at "
                           f"least 2 (prompts.limit)")

    evaluated: dict[int, pd.Series] = {}

    def evaluate(length: int) -> pd.Series:
        done = compute(exp, exp.conditions_at(lengths=[length], groups=groups, settings=[Isolation()]),
                       progress=progress, desc=f"length {length}")
        if done.failures:
            cond, exc = done.failures[0]
            raise HarnessError(f"locate: a condition failed at length {length} ({type(exc).__name__}: {exc})")
        values: dict[str, list[float]] = {}
        for record in done.records:
            if record["group"] != "A":
                values.setdefault(record["prompt_id"], []).append(record[metric])
        evaluated[length] = pd.Series({pid: float(np.mean(v)) for pid, v in values.items()})
        return evaluated[length]

    try:
        interval, seen = bisect_steepest(evaluate, list(spec.coarse), spec.resolution)
    except KeyboardInterrupt as exc:  # keep what was computed: a long search is not lost to a signal
        partial = run_dir / LOCATE_PARTIAL
        if evaluated:
            write_parquet(summary_table(evaluated, None, metric), partial)
        raise LocateStopped(partial if evaluated else None, len(evaluated), exc) from None
    table = summary_table(seen, interval, metric)
    with owned_outputs(run_dir):  # a search run again (fresh) keeps a table the user changed as locate.edited.parquet
        write_parquet(table, run_dir / "locate.parquet")
        (run_dir / LOCATE_PARTIAL).unlink(missing_ok=True)  # an interrupted search's, now searched again
        write_json({"model": exp.model_label, "resolved_revision": exp.loaded.resolved_revision, "metric": metric,
                    "groups": groups[1:], "prompts": len(exp.prompts), "interval": [interval.low, interval.high],
                    "rise": interval.rise, "rise_ci95": list(interval.rise_ci), "coarse": list(spec.coarse),
                    "resolution": spec.resolution, "finished": now_iso()}, run_dir / LOCATE_JSON)
    lo, hi = (table.set_index("prefix_len").loc[n] for n in (interval.low, interval.high))
    rises = "rises fastest" if interval.rise > 0 else "rises at no step here; its steepest step is"
    print(f"{metric} {rises} between prefix lengths {interval.low} and {interval.high} tokens "
          f"({exp.model_label}, {len(exp.prompts)} prompts, groups {'+'.join(groups[1:])}):\n"
          f"  at {interval.low}: {ci(lo['mean'], lo.ci_low, lo.ci_high)} (95% CI)\n"
          f"  at {interval.high}: {ci(hi['mean'], hi.ci_low, hi.ci_high)} (95% CI)\n"
          f"  rise: {ci(interval.rise, *interval.rise_ci)} (95% CI, paired by prompt)\n"
          f"table: {(run_dir / 'locate.parquet').resolve()}")
    return run_dir
