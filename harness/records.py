"""Condition records: how one condition's measurements become one row of the tables.

The one place that knows the key columns of a condition, its label in messages, the
conditions-table row, the per-condition headline of the attention metrics, and the noise-floor
row. The runner, ``locate``, ``check-determinism`` and ``collect`` all use these.
"""

from __future__ import annotations

import numpy as np

from .assembly import Condition
from .decoding import Continuation
from .engine import Result
from .metrics import output_drift
from .texts import KIND_OF_GROUP


def condition_keys(model_label: str, cond: Condition) -> dict:
    """The key columns of a condition (what identifies its row)."""
    return {
        "model": model_label,
        "prompt_id": cond.prompt_id,
        "group": cond.group,
        "prefix_id": cond.prefix_id,
        "prefix_len": cond.prefix_len,
        "isolation": cond.isolation.mode,
        "beta": cond.isolation.beta,
    }


def condition_label(cond: Condition) -> str:
    """``prompt_id/prefix_id/prefix_len[/isolation]`` (``prompt_id/A`` for A): how conditions are
    named in logs, failures and ``debug.fail_conditions``."""
    if cond.group == "A":
        return f"{cond.prompt_id}/A"
    iso = "" if cond.isolation.mode == "none" else f"/{cond.isolation.label}"
    return f"{cond.prompt_id}/{cond.prefix_id}/{cond.prefix_len}{iso}"


def headline_attention(block: dict[str, dict[str, np.ndarray]], n_queries: dict[str, int]) -> dict:
    """Per-condition summary of attention drift: means over layers and heads, segments weighted by
    their query rows (the one aggregation rule), and the layer with the largest mean KL."""
    if not block:
        return {"attn_kl_mean": None, "attn_kl_peak_layer": None, "attn_js_mean": None,
                "attn_prefix_mass_mean": None}
    weights = {s: n_queries[s] for s in block}
    total = sum(weights.values())

    def mean_of(metric):  # [layers] query-weighted over segments, mean over heads
        return sum(block[s][metric].mean(axis=1) * weights[s] for s in block) / total

    kl_by_layer = mean_of("kl")
    return {
        "attn_kl_mean": float(kl_by_layer.mean()),
        "attn_kl_peak_layer": int(np.argmax(kl_by_layer)),
        "attn_js_mean": float(mean_of("js").mean()),
        "attn_prefix_mass_mean": float(mean_of("prefix_mass").mean()),
    }


def condition_record(model_label: str, result: Result, y_a: Continuation, tokenizer) -> dict:
    """The conditions-table row of one condition, measured against A's continuation ``y_a``."""
    cond, y_x, a = result.condition, result.continuation, result.condition.assembled
    return {
        **condition_keys(model_label, cond),
        "prefix_kind": KIND_OF_GROUP[cond.group],
        **output_drift(y_x.ids, y_a.ids),
        "continuation_text": tokenizer.decode(list(y_x.ids)),
        "continuation_ids": list(y_x.ids),
        "n_continuation_tokens": len(y_x.ids),
        "stopped_on_eos": y_x.stopped_on_eos,
        "input_ids": list(a.input_ids),
        "n_input_tokens": len(a.input_ids),
        "prefix_start": a.prefix_start,
        "prefix_end": a.prefix_end,
        "task_start": a.task_start,
        "task_end": a.task_end,
        "output_kl": result.output_kl,
        **headline_attention(result.attention, result.n_queries),
        "seconds": result.seconds,
    }


def noise_record(model_label: str, probe: str, result: Result, y_a: Continuation) -> dict:
    """A noise-floor row: A against itself under one numerical ``probe`` (batch, no_cache)."""
    drift = output_drift(result.continuation.ids, y_a.ids)
    att = result.attention

    def worst(metric):
        return max((float(np.max(block[metric])) for block in att.values()), default=None)

    return {"model": model_label, "prompt_id": result.condition.prompt_id, "probe": probe,
            "edit_distance": drift["edit_distance"], "norm_edit_distance": drift["norm_edit_distance"],
            "output_kl": result.output_kl,
            "attn_kl_mean": headline_attention(att, result.n_queries)["attn_kl_mean"],
            "attn_kl_max": worst("kl"), "attn_js_max": worst("js"), "score_rmse_max": worst("score_rmse")}

