"""Condition records: how one condition's measurements become one row of the tables.

The one place that knows the key columns of a condition, its label in messages, the
conditions-table row, the per-condition headline of the attention metrics, and the noise-floor
row. The runner, ``locate``, ``check-determinism`` and ``collect`` all use these.
"""

from __future__ import annotations

import numpy as np

from harness.inputs.conditions import Condition
from harness.inputs.texts import KIND_OF_GROUP
from harness.measure.engine import Result
from harness.measure.metrics import HEADLINES, output_drift, output_metric_functions
from harness.model.decoding import Continuation


def condition_keys(model_label: str, cond: Condition) -> dict:
    """The key columns of a condition's row: the model, then :meth:`Condition.key`."""
    return {"model": model_label, **cond.key()}


def condition_label(cond: Condition) -> str:
    """``prompt_id/prefix_id/prefix_len[/isolation]`` (``prompt_id/A`` for A): how conditions are
    named in logs, failures and ``debug.fail_conditions``."""
    if cond.group == "A":
        return f"{cond.prompt_id}/A"
    iso = "" if cond.isolation.mode == "none" else f"/{cond.isolation.label}"
    return f"{cond.prompt_id}/{cond.prefix_id}/{cond.prefix_len}{iso}"


def headline_attention(block: dict[str, dict[str, np.ndarray]], n_queries: dict[str, int]) -> dict:
    """Per-condition summary of attention drift, one value per registered headline metric
    (:data:`harness.measure.metrics.HEADLINES`): means over layers and heads, segments weighted by
    their query rows (the one aggregation rule), or the layer with the largest such mean. The
    headline ``attn_kl_mean`` is ``attn_kl_shared_mean`` (redistribution) plus
    ``attn_capture_mean`` (capture)."""
    if not block:
        return {m.name: None for m in HEADLINES}
    weights = {s: n_queries[s] for s in block}
    total = sum(weights.values())

    def mean_of(metric):  # [layers] query-weighted over segments, mean over heads
        return sum(block[s][metric].mean(axis=1) * weights[s] for s in block) / total

    return {m.name: float(mean_of(m.from_row).mean()) if m.aggregate == "mean" else int(np.argmax(mean_of(m.from_row)))
            for m in HEADLINES}


def behaviour(cond: Condition, text_x: str | None, text_a: str) -> dict:
    """The prefix's target word and whether X's continuation and A's contain it (``target_hit``,
    null when the prefix has none, and for A itself); for an instruction (C) also its check and
    whether each continuation does what it asks (``obeyed``: null for B, whose mention asks nothing).
    ``text_x`` None (no continuation of X was decoded): X's answers are null."""
    goal = cond.goal
    if goal is None or cond.group == "A":
        return {"target": None, "check": None, "target_hit": None, "target_hit_a": None, "obeyed": None,
                "obeyed_a": None}
    asks = cond.group == "C"
    return {"target": goal.target or goal.regex, "check": goal.check if asks else None,
            "target_hit": None if text_x is None else goal.present(text_x), "target_hit_a": goal.present(text_a),
            "obeyed": goal.obeyed(text_x) if asks and text_x is not None else None,
            "obeyed_a": goal.obeyed(text_a) if asks else None}


def condition_record(model_label: str, result: Result, y_a: Continuation, tokenizer, computed_alone: bool = False
                     ) -> dict:
    """The conditions-table row of one condition, measured against A's continuation ``y_a``. Without
    a continuation of X (the attention-only measurement, ``decode.path=none``) every column that
    needs one is null, never zero."""
    cond, y_x, a = result.condition, result.continuation, result.condition.assembled
    text_x = None if y_x is None else tokenizer.decode(list(y_x.ids))
    drift = ({name: None for name in output_metric_functions()} if y_x is None else output_drift(y_x.ids, y_a.ids))
    return {
        **condition_keys(model_label, cond),
        "prefix_kind": KIND_OF_GROUP[cond.group],
        "pair": cond.pair,
        **cond.insertion_columns(),
        **behaviour(cond, text_x, tokenizer.decode(list(y_a.ids))),
        **drift,
        "continuation_text": text_x,
        "continuation_ids": None if y_x is None else list(y_x.ids),
        "continuation_logprobs": None if y_x is None or y_x.token_logprobs is None else list(y_x.token_logprobs),
        "n_continuation_tokens": None if y_x is None else len(y_x.ids),
        "stopped_on_eos": None if y_x is None else y_x.stopped_on_eos,
        "input_ids": list(a.input_ids),
        "n_input_tokens": len(a.input_ids),
        "block_start": a.block_start,
        "block_end": a.block_end,
        "prefix_start": a.prefix_start,
        "prefix_end": a.prefix_end,
        "task_start": a.task_start,
        "task_end": a.task_end,
        "output_kl": result.output_kl,
        "output_kl_steps": result.output_kl_steps,
        "tf_divergence": result.tf_divergence,
        "min_margin_a": y_a.min_margin,
        "min_margin_x": None if y_x is None else y_x.min_margin,
        **headline_attention(result.attention, result.n_queries),
        "seconds": result.seconds,
        "computed_alone": computed_alone,
    }
