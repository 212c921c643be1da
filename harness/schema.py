"""The column schema of the run's tables (DESIGN.md section 6), written down once.

Kept free of heavy imports: the figure and collect commands read it without loading torch.
"""

from __future__ import annotations

# What identifies a condition's row. A has prefix_id null and prefix_len 0; beta is null except
# for the decay isolation.
KEY_COLUMNS = ["model", "prompt_id", "group", "prefix_id", "prefix_len", "isolation", "beta"]
CATEGORICAL = ["model", "prompt_id", "group", "prefix_id", "isolation"]

# Per query row metrics of the attention probe (harness.attention_metrics), in table order: the
# headline kl is redistribution (kl_shared) plus capture; mass_from_* say whose mass the prefix took.
ROW_METRICS = ("kl", "kl_shared", "capture", "js", "prefix_mass", "mass_from_sink", "mass_from_context",
               "mass_from_task", "mass_from_continuation", "score_rmse", "sink_mass_a", "sink_mass_x",
               "unseen_mass_a")

CONDITION_COLUMNS = KEY_COLUMNS + [
    "prefix_kind",
    # output drift against A's continuation (zeros for A itself)
    "edit_distance",
    "norm_edit_distance",
    "first_divergence",
    "exact_match",
    # the continuation
    "continuation_text",
    "continuation_ids",
    "n_continuation_tokens",
    "stopped_on_eos",
    # the input and its segment spans (half-open token offsets)
    "input_ids",
    "n_input_tokens",
    "prefix_start",
    "prefix_end",
    "task_start",
    "task_end",
    # next-token distribution drift along A's continuation
    "output_kl",
    # headline attention drift (details in attention.parquet)
    "attn_kl_mean",
    "attn_kl_peak_layer",
    "attn_js_mean",
    "attn_prefix_mass_mean",
    # timing
    "seconds",
]

# Columns that legitimately differ between two identical runs.
TIMING_COLUMNS = ["seconds"]

ATTENTION_METRICS = list(ROW_METRICS)
ATTENTION_COLUMNS = KEY_COLUMNS + ["layer", "head", "segment"] + ATTENTION_METRICS + ["n_queries"]
