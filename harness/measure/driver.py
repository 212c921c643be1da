"""The prompt driver: the one loop that runs a list of conditions through an :class:`Engine`.

Per prompt: group A first (it is the reference every B/C condition is measured against), then
the prompt's B/C conditions in batches. Batches are *planned* from the full list of the prompt's
conditions (sorted by input length and isolation, cut into runs of equal length and isolation of
at most ``batch_size``), never from what is left to do, so a resumed sweep recomputes exactly the
batches an uninterrupted one ran and its numbers are identical bit for bit. A batch that raises
is retried one condition at a time, so only the culprit fails (the others are then computed
alone, and their results say so: ``computed_alone``). A prompt whose reference fails fails all of
its conditions. The sweep, ``locate``, ``check-determinism``, the benchmarks and the tests all run
conditions through :func:`drive`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from harness.inputs.conditions import Condition, batchable
from harness.measure.engine import Engine, Reference, Result
from harness.measure.records import condition_label

log = logging.getLogger(__name__)

# on_result(result, reference, computed_alone): called once for every condition computed.
OnResult = Callable[[Result, Reference, bool], None]
OnFailure = Callable[[Condition, Exception], None]


class InjectedFailure(RuntimeError):
    """Raised for conditions listed in ``debug.fail_conditions`` (to exercise failure handling)."""


@dataclass
class DriveOutcome:
    computed: int
    skipped: int  # already done before this call
    failures: list[tuple[Condition, Exception]]


def plan_batches(conditions: list[Condition], batch_size: int) -> list[list[Condition]]:
    """One prompt's B/C conditions as batches that can run together without padding
    (:func:`harness.inputs.conditions.batchable`), at most ``batch_size`` each, in a fixed order."""
    ordered = sorted(conditions, key=lambda c: (len(c.assembled.input_ids), c.isolation.label,
                                                c.assembled.prefix_start, c.assembled.prefix_end))
    out: list[list[Condition]] = []
    for cond in ordered:
        if out and len(out[-1]) < batch_size and batchable(out[-1][0], cond):
            out[-1].append(cond)
        else:
            out.append([cond])
    return out


def drive(engine: Engine, conditions: list[Condition], *, batch_size: int, on_result: OnResult,
          done: Callable[[Condition], bool] = lambda c: False, on_failure: OnFailure | None = None,
          fail_on: frozenset[str] = frozenset(), progress: bool = True, desc: str = "conditions",
          references: dict[str, Reference] | None = None) -> DriveOutcome:
    """Compute every condition of ``conditions`` that is not ``done``; see the module docstring.

    ``conditions`` must hold each prompt's group A condition. ``on_failure`` is called for each
    condition that failed (and it is also returned); ``fail_on`` names conditions (by
    :func:`condition_label`) that raise :class:`InjectedFailure` instead of running.
    ``references`` holds A references already computed (by prompt id): a prompt whose A is
    ``done`` and has one is measured against it instead of computing A again (A always runs
    alone, so it is the same to the bit)."""
    references = references or {}
    by_prompt: dict[str, list[Condition]] = defaultdict(list)
    for cond in conditions:
        by_prompt[cond.prompt_id].append(cond)
    skipped = sum(bool(done(c)) for c in conditions)
    computed, failures = 0, []
    engine.prepare([c for c in conditions if not done(c)])

    def injected(conds: list[Condition]) -> None:
        for c in conds:
            if condition_label(c) in fail_on:
                raise InjectedFailure(f"injected failure for {condition_label(c)} (debug.fail_conditions)")

    def fail(conds: list[Condition], exc: Exception) -> None:
        for c in conds:
            log.error("condition %s failed: %s: %s", condition_label(c), type(exc).__name__, exc)
            failures.append((c, exc))
            if on_failure is not None:
                on_failure(c, exc)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    with tqdm(total=len(conditions), initial=skipped, desc=desc, unit="cond", disable=not progress) as bar:
        for conds in by_prompt.values():
            missing = [c for c in conds if not done(c)]
            if not missing:
                continue
            (a,) = [c for c in conds if c.group == "A"]
            try:
                injected([a])
                if a in missing or a.prompt_id not in references:
                    ref, a_result = engine.reference(a)
                else:
                    ref = references[a.prompt_id]
            except Exception as exc:  # noqa: BLE001 - one prompt's failure must not end the sweep
                fail(missing, exc)
                bar.update(len(missing))
                continue
            if a in missing:
                on_result(a_result, ref, False)
                computed += 1
                bar.update()
            pending = [(batch, False) for batch in plan_batches([c for c in conds if c.group != "A"], batch_size)
                       if any(c in missing for c in batch)]
            while pending:
                batch, alone = pending.pop(0)
                try:
                    injected(batch)
                    results = engine.conditions(ref, batch)
                except Exception as exc:  # noqa: BLE001
                    if len(batch) > 1:  # find the culprit (or fit in memory): retry one at a time
                        log.warning("a batch of %d failed (%s: %s); retrying its conditions one at a time",
                                    len(batch), type(exc).__name__, exc)
                        pending[:0] = [([c], True) for c in batch if c in missing]
                        continue
                    fail(batch, exc)
                    bar.update(1)
                    continue
                for r in results:
                    if r.condition in missing:
                        on_result(r, ref, alone)
                        computed += 1
                        bar.update()
    return DriveOutcome(computed, skipped, failures)
