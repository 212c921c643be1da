"""The noise floor: how much the run's own numerics move its numbers, measured on X conditions.

The run computes B/C conditions in batches (``batch_size``); a batch has other kernel shapes than
one condition alone, so its float rounding differs. A sample of the run's B/C conditions, sized
to the run (:func:`noise_size`) and spread over it (:func:`noise_sample`), is computed again
alone, and compared with the sweep's own batched results of the same conditions like any drift:
the continuations (edit distance), the output distributions along A's continuation (KL, and the
largest log-probability difference), and the attention statistics the tables report. Drift no
larger than this cannot be told apart from numerical noise. Only the alone side costs extra: the
batched side is what the sweep computed anyway.

The alone side is always the step-by-step path (``decode.path=stepwise``, batch size 1) with the
linear layers at their weights' full precision: the reference computation. When the sweep lowered
the linear layers' products (``model.linear_dtype``, :mod:`harness.model.linear_precision`), the
floor therefore measures that rounding too, with every prompt's A computed again at full precision
along the sweep's own A continuation (teacher-forced, not decoded again: its step log-probabilities
and attention rows are then compared at the same tokens). When the sweep read its continuations off the teacher-forced pass
(``decode.path=teacher_forced``), the noise floor also compares the step-by-step decode's
log-probabilities with the sweep's teacher-forced ones at every step where both follow A's
continuation (``logp_max_diff_decode``): the rounding between one multi-token pass and one pass
per token, which is what can flip a greedy choice there.

The largest log-probability difference also bounds how far noise can move a greedy step's
top-1 minus top-2 logit margin (by twice that difference): a condition whose continuation came
within that margin of a tie (``min_margin`` in the conditions table) may differ from A only
because of rounding, and is flagged ``near_tie``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.inputs.conditions import Condition
from harness.measure.metrics import output_drift, output_metric_functions

if TYPE_CHECKING:  # the floor's computation brings torch; sizing a sample (harness plan's price) needs none
    from harness.measure.engine import Engine, Reference, Result

NOISE_STATISTICS = ["norm_edit_distance", "output_kl", "attn_kl_mean", "attn_kl_shared_mean", "attn_capture_mean",
                    "attn_prefix_mass_mean"]


def noise_size(n_conditions: int, fraction: float, minimum: int, maximum: int, cells: int = 1) -> int:
    """How many B/C conditions the noise floor computes again alone: ``fraction`` of the run's
    ``n_conditions`` up to ``maximum``, and at least ``minimum`` and one from each of its ``cells``
    (group, length and isolation setting: the kernel shapes whose rounding differs, which
    :func:`noise_sample` visits in turn). That floor is itself at most ``maximum`` and at most a
    quarter of the conditions: each is computed alone, step by step, and in a small pilot it would
    otherwise cost as much again as the sweep (a ``fraction`` asked for is taken whole)."""
    quarter = max(1, -(-n_conditions // 4))
    floor = min(max(minimum, min(cells, maximum)), quarter)
    return min(n_conditions, max(floor, min(maximum, round(fraction * n_conditions))))


def noise_cell(condition: Condition) -> tuple:
    """The cell a B/C condition's noise is sampled in: its group, length and isolation setting."""
    return condition.group, condition.prefix_len, condition.isolation


def noise_cells(conditions: list[Condition]) -> int:
    """How many cells (:func:`noise_cell`) the B/C ``conditions`` fill."""
    return len({noise_cell(c) for c in conditions if c.group != "A"})


def noise_sample(conditions: list[Condition], n: int) -> list[Condition]:
    """``n`` B/C conditions spread over the sweep: taken in turn from each cell of group, length and
    isolation setting (so every one has its share, where every k-th in the sweep's order could land
    on one length and one setting), and within a cell evenly over its order (across prompts and
    prefixes); each preceded by its prompt's A."""
    others = [c for c in conditions if c.group != "A"]
    if not others or n < 1:
        return []
    cells: dict = {}
    for c in others:
        cells.setdefault(noise_cell(c), []).append(c)
    groups, take = list(cells.values()), [0] * len(cells)
    for turn in range(min(n, len(others))):  # one from each cell in turn, skipping cells already used up
        k = next(k for k in ((turn + j) % len(groups) for j in range(len(groups))) if take[k] < len(groups[k]))
        take[k] += 1
    # evenly within a cell, each cell's picks shifted by its place among the cells: one pick a cell
    # lands on another prompt in each cell, not on every cell's first (or middle) prompt
    chosen = {members[int((((j + 0.5) / m + k / len(groups)) % 1.0) * len(members))]
              for k, (members, m) in enumerate(zip(groups, take)) for j in range(m)}
    prompts = {c.prompt_id for c in chosen}
    return [c for c in conditions if c in chosen or (c.group == "A" and c.prompt_id in prompts)]


def measure_noise_floor(engine: Engine, conditions: list[Condition], sample: list[Condition], batch_size: int,
                        model_label: str, batched: dict[Condition, Result] | None = None,
                        progress: bool = True, references: dict[str, Reference] | None = None) -> pd.DataFrame:
    """One row per sampled B/C condition: its result as the sweep batched it against the same
    condition computed alone (see the module docstring).

    ``batched`` holds the sweep's own results of sampled conditions, computed in their planned
    batches this run (kept in memory: they carry the step log-probabilities a stored result
    does not); any sampled condition missing from it (reused from an earlier run, or computed
    alone after its batch failed) is computed again in its whole planned batch, so its rounding
    is the sweep's. Only the alone side is always computed here, against the prompt's A from
    ``references`` (the sweep's own, by prompt id) where it has one."""
    from harness.measure.attention_metrics import token_kl
    from harness.measure.driver import drive
    from harness.measure.records import condition_keys, headline_attention

    batched, sweeps_a = dict(batched or {}), dict(references or {})
    missing = {c for c in sample if c.group != "A" and c not in batched}

    def keep_batched(result: Result, ref: Reference, _) -> None:
        sweeps_a[ref.condition.prompt_id] = ref
        if result.condition in missing:
            batched[result.condition] = result

    if missing:
        prompts = {c.prompt_id for c in missing}
        drive(engine, [c for c in conditions if c.prompt_id in prompts], batch_size=batch_size,
              done=lambda c: c not in missing and c.group != "A", on_result=keep_batched,
              progress=progress, desc=f"noise floor (batch {batch_size})")
    alone: dict[Condition, Result] = {}
    read_off = engine.decode_path == "teacher_forced"
    if engine.linear_dtype:  # every A again at full precision, along the sweep's own A continuation
        references = {}
        reference = engine.variant(decode_path="stepwise", keep_decode_logp=read_off, exact=True, expected_later=(),
                                   forced_a={p: ref.continuation for p, ref in sweeps_a.items()})
    else:  # a prompt whose A the sweep computed this run reuses it; the others' A is computed again
        references = references or {}
        reference = engine.variant(decode_path="stepwise", keep_decode_logp=read_off, expected_later=())
    a_ids: dict[str, tuple[int, ...]] = {}  # each prompt's A continuation

    def keep(result: Result, ref: Reference, _) -> None:
        alone[result.condition] = result
        a_ids[ref.condition.prompt_id] = ref.continuation.ids

    drive(reference, sample, batch_size=1, on_result=keep,
          done=lambda c: c.group == "A" and c.prompt_id in references, references=references, progress=progress,
          desc="noise floor (alone)")
    comparison = f"batch_{engine.linear_dtype}_products_vs_alone_exact" if engine.linear_dtype else "batch_vs_alone"
    rows = []
    for cond in sample:
        if cond.group == "A" or cond not in batched or cond not in alone:
            continue
        together, single = batched[cond], alone[cond]
        a, b = headline_attention(together.attention, together.n_queries), headline_attention(single.attention,
                                                                                              single.n_queries)
        has_steps = together.step_logp is not None and len(together.step_logp)
        rows.append({
            **condition_keys(model_label, cond),
            "comparison": comparison,  # what the two computations compared were
            "batch_size": batch_size,
            **(output_drift(together.continuation.ids, single.continuation.ids) if together.continuation is not None
               else {name: None for name in output_metric_functions()}),
            "output_kl": float(token_kl(single.step_logp, together.step_logp).mean()) if has_steps else None,
            "logp_max_diff": float((single.step_logp - together.step_logp).abs().max()) if has_steps else None,
            **({"logp_max_diff_decode": _decode_difference(single, together, a_ids[cond.prompt_id])}
               if read_off else {}),
            **{k: abs(a[k] - b[k]) if a[k] is not None else None for k in NOISE_STATISTICS if k.startswith("attn_")},
        })
    df = pd.DataFrame(rows)
    if not df.empty:
        for col in ("model", "prompt_id", "group", "prefix_id", "placement", "isolation", "comparison"):
            df[col] = df[col].astype("category")
    return df


def _decode_difference(alone: Result, together: Result, y_a: tuple[int, ...]) -> float | None:
    """The largest log-probability difference between the step-by-step decode (``alone``) and the
    teacher-forced pass along A's continuation ``y_a`` (``together``) over the steps where both
    predict from ``y_a``: up to and including the first step the decode leaves it."""
    if alone.decode_logp is None or together.step_logp is None or not len(together.step_logp):
        return None
    own = alone.continuation.ids
    left = next((t for t, (x, a) in enumerate(zip(own, y_a)) if x != a), min(len(own), len(y_a)))
    steps = min(len(alone.decode_logp), len(together.step_logp), left + 1)
    if steps < 1:
        return None
    return float((alone.decode_logp[:steps] - together.step_logp[:steps]).abs().max())


def margin_floor(noise: pd.DataFrame | None) -> float | None:
    """How far numerical noise moved a top-1 minus top-2 logit margin at most: twice the largest
    log-probability difference measured, between batched and alone passes and (for continuations
    read off the teacher-forced pass) between that pass and a step-by-step decode; None when no
    noise floor was measured."""
    if noise is None or noise.empty:
        return None
    columns = [c for c in ("logp_max_diff", "logp_max_diff_decode") if c in noise]
    if noise[columns].isna().all().all():
        return None
    return 2.0 * float(np.nanmax(noise[columns].to_numpy(dtype=float)))


def flag_near_ties(conditions: pd.DataFrame, floor: float | None) -> pd.DataFrame:
    """``near_tie``: the condition's or its A's greedy path came within the noise floor of a tie."""
    if floor is None:
        return conditions.assign(near_tie=pd.array([pd.NA] * len(conditions), dtype="boolean"))
    margin = conditions[["min_margin_a", "min_margin_x"]].min(axis=1)
    return conditions.assign(near_tie=(margin < floor).astype("boolean"))
