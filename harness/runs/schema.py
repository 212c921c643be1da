"""The column schema of the run's tables (docs/run-directory.md and docs/concepts.md), written down once.

Metric columns come from the metric registry (:mod:`harness.measure.metrics`); this module adds
the keys and the columns that describe a condition (its continuation, input spans and timing).
Kept free of heavy imports: the figure and collect commands read it without loading torch.
"""

from __future__ import annotations

import numpy as np

from harness.inputs.conditions import KEY_FIELDS
from harness.measure.metrics import ROW_METRICS, condition_metrics

# What identifies a condition's row: the model, and the condition's key (harness.inputs.conditions).
KEY_COLUMNS = ["model", *KEY_FIELDS]
CATEGORICAL = ["model", "prompt_id", "group", "prefix_id", "placement", "isolation", "pair", "target", "check", "corpus",
               "attack", "span_role", "goal", "document", "injection_at"]

CONDITION_COLUMNS = KEY_COLUMNS + [
    "prefix_kind",
    "pair",  # shared by a matched set of prefixes about one target (null when the set has no pairs)
    "target",  # the word the prefix is about (null without one)
    "check",  # what an instruction prefix asks of the reply (harness.inputs.checks; null for B and A)
    # a public benchmark's matched set (harness.inputs.corpora; null for a prefix file): the corpus, the
    # set's attack template, what this prefix's span holds ("attack", "benign", "mention"), the goal, the
    # document, where the span was placed (start, middle, end) and where it sits in the prefix's own
    # tokens (half-open offsets from prefix_start)
    "corpus",
    "attack",
    "span_role",
    "goal",
    "document",
    "injection_at",
    "injection_start",
    "injection_end",
    *condition_metrics("behaviour"),  # did the continuation do what the prefix asked?
    *condition_metrics("output"),  # output drift against A's continuation (zeros for A itself)
    # the continuation
    "continuation_text",
    "continuation_ids",
    "continuation_logprobs",  # each token's log-probability where the backend gives it (vLLM), else null
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
    # next-token distribution drift along A's continuation, and how close greedy decoding came to a
    # tie (flagged against the run's measured noise: harness.measure.noise)
    *condition_metrics("distribution"),
    # headline attention drift (details in attention.parquet): kl = kl_shared (redistribution) +
    # capture, query-weighted means over layers, heads and segments
    *condition_metrics("attention"),
    # timing, and whether the condition ran alone after its batch failed (float rounding differs)
    "seconds",
    "computed_alone",
]

# dtypes of the columns that are not metrics (the registry gives the metrics')
DESCRIPTIVE_DTYPES = {
    **{c: "int64" for c in ("prefix_len", "n_continuation_tokens", "n_input_tokens", "block_start", "block_end",
                            "prefix_start", "prefix_end", "task_start", "task_end", "injection_start", "injection_end")},
    "beta": "float64",
    "stopped_on_eos": "bool",
    "computed_alone": "bool",
}

# Columns that legitimately differ between two identical runs.
TIMING_COLUMNS = ["seconds"]

# A condition's identity across runs: its key, and where its injection sits in the document (a run
# has one position, so its own keys leave it out; runs at several positions are read together).
ROW_KEYS = KEY_COLUMNS + ["injection_at"]

ATTENTION_METRICS = list(ROW_METRICS)
ATTENTION_COLUMNS = KEY_COLUMNS + ["layer", "head", "segment"] + ATTENTION_METRICS + ["n_queries"]


def row_key(*values) -> tuple:
    """Key values as a hashable tuple that compares equal whether they come from a Condition or
    from a table row: nulls normalised (NaN and None alike), numbers as numbers, the rest as text."""
    def norm(v):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            return None
        return float(v) if isinstance(v, (float, np.floating)) else int(v) if isinstance(v, (int, np.integer)) else str(v)
    return tuple(norm(v) for v in values)
