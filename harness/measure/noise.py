"""The noise floor: how much the run's own numerics move its numbers, measured on X conditions.

The run computes B/C conditions in batches (``batch_size``); a batch has other kernel shapes than
one condition alone, so its float rounding differs. For whole planned batches of the first
prompts (up to ``n_conditions`` conditions), every condition is computed both ways, batched
exactly as the sweep batches it and alone, and the two are compared like any drift: the
continuations (edit distance), the output distributions along A's continuation (KL, and the
largest log-probability difference), and the attention statistics the tables report. Drift no
larger than this cannot be told apart from numerical noise.

The largest log-probability difference also bounds how far noise can move a greedy step's
top-1 minus top-2 logit margin (by twice that difference): a condition whose continuation came
within that margin of a tie (``min_margin`` in the conditions table) may differ from A only
because of rounding, and is flagged ``near_tie``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from harness.inputs.conditions import Condition
from harness.measure.attention_metrics import token_kl
from harness.measure.driver import drive, plan_batches
from harness.measure.engine import Engine
from harness.measure.metrics import output_drift
from harness.measure.records import condition_keys, headline_attention

NOISE_STATISTICS = ["norm_edit_distance", "output_kl", "attn_kl_mean", "attn_kl_shared_mean", "attn_capture_mean",
                    "attn_prefix_mass_mean"]


def noise_sample(conditions: list[Condition], batch_size: int, n_prompts: int, n_conditions: int) -> list[Condition]:
    """Whole planned batches of the first ``n_prompts`` prompts, until ``n_conditions`` B/C
    conditions are chosen, with each chosen prompt's A."""
    chosen: list[Condition] = []
    prompts = list(dict.fromkeys(c.prompt_id for c in conditions))[:n_prompts]
    for prompt in prompts:
        mine = [c for c in conditions if c.prompt_id == prompt]
        taken = [b for b in plan_batches([c for c in mine if c.group != "A"], batch_size)]
        picked = []
        for batch in taken:
            if sum(c.group != "A" for c in chosen) + len(picked) >= n_conditions:
                break
            picked += batch
        if picked:
            chosen += [c for c in mine if c.group == "A"] + picked
    return chosen


def measure_noise_floor(engine: Engine, conditions: list[Condition], batch_size: int, n_prompts: int,
                        n_conditions: int, model_label: str, progress: bool = True) -> pd.DataFrame:
    """One row per sampled B/C condition: batched against alone (see the module docstring)."""
    sample = noise_sample(conditions, batch_size, n_prompts, n_conditions)
    runs: dict[int, dict[Condition, object]] = {batch_size: {}, 1: {}}
    for size, out in runs.items():
        drive(engine, sample, batch_size=size, on_result=lambda r, ref, alone, out=out: out.__setitem__(r.condition, r),
              progress=progress, desc=f"noise floor (batch {size})")
    rows = []
    for cond, batched in runs[batch_size].items():
        single = runs[1].get(cond)
        if cond.group == "A" or single is None:
            continue
        a, b = headline_attention(batched.attention, batched.n_queries), headline_attention(single.attention,
                                                                                            single.n_queries)
        has_steps = batched.step_logp is not None and len(batched.step_logp)
        rows.append({
            **condition_keys(model_label, cond),
            "comparison": "batch_vs_alone",  # what the two computations compared were
            "batch_size": batch_size,
            **output_drift(batched.continuation.ids, single.continuation.ids),
            "output_kl": float(token_kl(single.step_logp, batched.step_logp).mean()) if has_steps else None,
            "logp_max_diff": float((single.step_logp - batched.step_logp).abs().max()) if has_steps else None,
            **{k: abs(a[k] - b[k]) if a[k] is not None else None
               for k in ("attn_kl_mean", "attn_kl_shared_mean", "attn_capture_mean", "attn_prefix_mass_mean")},
        })
    df = pd.DataFrame(rows)
    if not df.empty:
        for col in ("model", "prompt_id", "group", "prefix_id", "placement", "isolation", "comparison"):
            df[col] = df[col].astype("category")
    return df


def margin_floor(noise: pd.DataFrame | None) -> float | None:
    """How far numerical noise moved a top-1 minus top-2 logit margin at most: twice the largest
    log-probability difference measured (None when no noise floor was measured)."""
    if noise is None or noise.empty or noise.logp_max_diff.isna().all():
        return None
    return 2.0 * float(np.nanmax(noise.logp_max_diff))


def flag_near_ties(conditions: pd.DataFrame, floor: float | None) -> pd.DataFrame:
    """``near_tie``: the condition's or its A's greedy path came within the noise floor of a tie."""
    if floor is None:
        return conditions.assign(near_tie=pd.array([pd.NA] * len(conditions), dtype="boolean"))
    margin = conditions[["min_margin_a", "min_margin_x"]].min(axis=1)
    return conditions.assign(near_tie=(margin < floor).astype("boolean"))
