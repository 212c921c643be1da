"""Conditions into table rows: the one loop that ``harness sweep``, ``locate``,
``check-determinism`` and ``causal-heads`` share.

:func:`compute` runs an experiment's conditions through the driver
(:func:`harness.measure.driver.drive`), turns each result into its conditions-table row
(:func:`harness.measure.records.condition_record`), and, given a :class:`ResultStore`, saves each
row as it finishes, reuses every row stored before under the same content key, records failures,
and reads every row back from the store (a run's tables are always rebuilt from its stored files).
What a caller does beyond that (a heartbeat, keeping the batched results the noise floor compares)
goes in ``on_result``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.inputs.conditions import Condition
from harness.measure.driver import OnFailure, OnResult
from harness.measure.records import condition_keys, condition_label, condition_record
from harness.runs.store import ResultStore, StoredResult


@dataclass
class Computed:
    """What :func:`compute` gives back: every condition's row (``rows``, in the order of the
    conditions given; those that failed, or have no stored row, are absent), the content keys, and
    what was computed, reused and failed."""

    rows: dict[Condition, StoredResult]
    keys: dict[Condition, str]
    computed: int
    reused: int
    failures: list[tuple[Condition, Exception]] = field(default_factory=list)

    @property
    def records(self) -> list[dict]:
        return [row.record for row in self.rows.values()]


def compute(exp, conditions: list[Condition], *, store: ResultStore | None = None,
            extra: Callable[[Condition], dict] | None = None, on_result: OnResult | None = None,
            on_failure: OnFailure | None = None, on_start: Callable[[int], None] | None = None,
            batch_size: int | None = None, fail_on: frozenset[str] = frozenset(), progress: bool = True,
            desc: str = "conditions") -> Computed:
    """Compute ``conditions`` (each prompt's A among them) on ``exp`` (an
    :class:`~harness.runs.experiment.Experiment`); see the module docstring. ``extra(condition)``
    adds columns to a row; ``on_start(n)`` hears how many stored rows are reused, before anything
    runs; ``batch_size`` overrides the experiment's."""
    keys = exp.keys(conditions)
    good = store.verify(keys.values()) if store is not None else set()
    if on_start is not None:
        on_start(sum(keys[c] in good for c in conditions))
    rows: dict[Condition, StoredResult] = {}

    def save(result, ref, alone: bool) -> None:
        cond = result.condition
        record = condition_record(exp.model_label, result, ref.continuation, exp.tokenizer, alone)
        if extra is not None:
            record.update(extra(cond))
        if store is not None:
            store.save(keys[cond], record, result.attention, result.n_queries)
        else:
            rows[cond] = StoredResult(record, result.attention, result.n_queries)
        if on_result is not None:
            on_result(result, ref, alone)

    def failed(cond: Condition, exc: Exception) -> None:
        if store is not None:
            store.record_failure(keys[cond], {"condition": condition_label(cond),
                                              **condition_keys(exp.model_label, cond)}, exc)
        if on_failure is not None:
            on_failure(cond, exc)

    outcome = exp.drive(conditions, on_result=save, done=lambda c: keys[c] in good, on_failure=failed,
                        fail_on=fail_on, progress=progress, desc=desc,
                        **({"batch_size": batch_size} if batch_size else {}))
    if store is not None:  # every row as stored, computed now or before
        rows = {c: store.load(keys[c]) for c in conditions if store.has(keys[c])}
    else:
        rows = {c: rows[c] for c in conditions if c in rows}
    return Computed(rows, keys, outcome.computed, outcome.skipped, outcome.failures)
