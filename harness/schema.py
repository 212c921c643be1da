"""The column schema of the run's tables (DESIGN.md section 6), written down once.

Kept free of heavy imports: the figure and collect commands read it without loading torch.
"""

from __future__ import annotations

# What identifies a condition's row. A has prefix_id null and prefix_len 0; beta is null except
# for the decay isolation.
KEY_COLUMNS = ["model", "prompt_id", "group", "prefix_id", "prefix_len", "placement", "isolation", "beta"]
CATEGORICAL = ["model", "prompt_id", "group", "prefix_id", "placement", "isolation", "pair"]

# Per query row metrics of the attention probe (harness.attention_metrics), in table order: the
# headline kl is redistribution (kl_shared) plus capture; mass_from_* say whose mass the prefix took.
ROW_METRICS = ("kl", "kl_shared", "capture", "js", "prefix_mass", "mass_from_sink", "mass_from_context",
               "mass_from_task", "mass_from_continuation", "score_rmse", "sink_mass_a", "sink_mass_x",
               "unseen_mass_a")

CONDITION_COLUMNS = KEY_COLUMNS + [
    "prefix_kind",
    "pair",  # shared by a matched B and C prefix (null when the prefix set has no pairs)
    # behaviour: did the continuation do what the prefix's instruction asked (null without a target)?
    "target_hit",
    "target_hit_a",  # A's continuation, against the same target: the base rate
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
    "block_start",  # the inserted block: the prefix and any tokens its placement wraps it in
    "block_end",
    "prefix_start",  # the prefix's own tokens inside the block
    "prefix_end",
    "task_start",
    "task_end",
    # next-token distribution drift along A's continuation, its mean and each step
    "output_kl",
    "output_kl_steps",
    # how close A's and X's greedy paths came to a tie (top-1 minus top-2 logit), and whether that is
    # within the run's measured noise (harness.noise)
    "min_margin_a",
    "min_margin_x",
    "near_tie",
    # headline attention drift (details in attention.parquet): kl = kl_shared (redistribution) +
    # capture, query-weighted means over layers, heads and segments
    "attn_kl_mean",
    "attn_kl_shared_mean",
    "attn_capture_mean",
    "attn_prefix_mass_mean",
    "attn_js_mean",
    "attn_kl_peak_layer",
    # timing, and whether the condition ran alone after its batch failed (float rounding differs)
    "seconds",
    "computed_alone",
]

# Columns that legitimately differ between two identical runs.
TIMING_COLUMNS = ["seconds"]

ATTENTION_METRICS = list(ROW_METRICS)
ATTENTION_COLUMNS = KEY_COLUMNS + ["layer", "head", "segment"] + ATTENTION_METRICS + ["n_queries"]
