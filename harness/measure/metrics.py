"""The metric registry: every measure the harness records, defined once.

A metric is one :class:`Metric`: its column, the table it lives in, its dtype, how it aggregates
and whether the report contrasts C with B on it. The tables' schema (:mod:`harness.runs.schema`),
the condition records (:mod:`harness.measure.records`), the table dtypes
(:mod:`harness.runs.tables`), the report's contrast table and the fingerprint stored results are
keyed by all read it from here, so adding a metric is one entry below:

- a **row** metric is a per-query-row attention statistic that
  :func:`harness.measure.attention_metrics.row_metrics` returns; ``attention.parquet`` holds its
  mean over each segment's query rows per layer and head;
- a **condition** metric has one value per condition in ``conditions.parquet``. An output metric
  with ``compute`` is a function of X's and A's continuation token ids (:func:`output_drift`
  computes every such one); a headline (``from_row``) summarises a row metric per condition
  (:func:`harness.measure.records.headline_attention`).

A metric the engine computes that is not registered here is an error (:func:`check_row_metrics`),
never silently dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.measure import output_metrics as out

INF = float("inf")


@dataclass(frozen=True)
class Metric:
    name: str  # its column
    level: str  # "row" (attention.parquet, per layer x head x segment) or "condition" (conditions.parquet)
    doc: str
    dtype: str = "float64"  # pandas dtype of its column
    section: str = ""  # condition metrics: where its column stands in the conditions table (schema)
    compute: Callable | None = None  # condition output metrics: f(X's ids, A's ids) -> value
    # condition metrics that summarise a row metric: which, and how ("mean": segments weighted by
    # their query rows, then the mean over layers and heads; "peak_layer": the layer with the
    # largest such mean)
    from_row: str | None = None
    aggregate: str | None = None
    contrast: str | None = None  # the report's C - B table shows this column under this label ...
    contrast_rank: int | None = None  # ... in this row
    # the smallest effect of interest, in the metric's own units (a rate's in proportion: 0.05 is 5
    # percentage points): a verdict can say "no effect as large as delta" (harness.analysis.verdicts;
    # docs/statistics.md says why these values). None: no default, a study states its own.
    delta: float | None = None
    # the largest difference two groups' means can show (1 for a proportion or a rate); None: unbounded.
    # A smallest effect of interest above it could never be reached, so a study's own is refused there.
    span: float | None = None
    # the values one condition can take (a KL is at least 0, a proportion lies in 0-1): an interval on
    # a mean of them is clipped there, as the truth cannot lie outside. None: unbounded.
    bounds: tuple[float, float] | None = None


def _row(name: str, doc: str, **kw) -> Metric:
    return Metric(name, "row", doc, **kw)


def _cond(name: str, section: str, dtype: str, doc: str, **kw) -> Metric:
    return Metric(name, "condition", doc, dtype=dtype, section=section, **kw)


def _headline(name: str, row: str, doc: str, aggregate: str = "mean", **kw) -> Metric:
    return _cond(name, "attention", "Int64" if aggregate == "peak_layer" else "float64", doc, from_row=row,
                 aggregate=aggregate, **kw)


METRICS: tuple[Metric, ...] = (
    # attention drift per query row, in attention.parquet's column order (docs/concepts.md)
    _row("kl", "KL(P_A || P_X), P_A extended by zeros on the block: redistribution + capture", delta=0.05),
    _row("kl_shared", "redistribution: KL(P_A || P_X renormalized over the shared keys)", delta=0.05),
    _row("capture", "capture: -log(1 - prefix_mass), X's attention taken by the block", delta=0.05),
    _row("js", "Jensen-Shannon divergence on X's keys (nats, 0..ln 2)"),
    _row("prefix_mass", "X's attention on the inserted block"),
    _row("mass_from_sink", "the block's mass taken from position 0 (and a learned sink)"),
    _row("mass_from_context", "the block's mass taken from other keys before the block"),
    _row("mass_from_task", "the block's mass taken from the task and what follows it in A's input"),
    _row("mass_from_continuation", "the block's mass taken from A's continuation"),
    _row("score_rmse", "RMS difference of centred pre-softmax scores on the shared keys"),
    _row("sink_mass_a", "A's attention on position 0"),
    _row("sink_mass_x", "X's attention on A's position 0"),
    _row("unseen_mass_a", "A's mass on keys a sliding window hides from X"),
    # behaviour: did the continuation do what the prefix asked (null without a target)?
    _cond("target_hit", "behaviour", "boolean", "X's continuation contains the prefix's target word",
          contrast="target hit rate", contrast_rank=0, delta=0.05, span=1.0, bounds=(0.0, 1.0)),
    _cond("target_hit_a", "behaviour", "boolean", "A's continuation contains the same word: the base rate"),
    _cond("obeyed", "behaviour", "boolean", "X's continuation does what the instruction asks (its check; C only)",
          delta=0.05, span=1.0, bounds=(0.0, 1.0)),
    _cond("obeyed_a", "behaviour", "boolean", "A's continuation passes the same check unasked"),
    # output drift against A's continuation (zeros for A itself)
    _cond("edit_distance", "output", "int64", "Levenshtein distance between X's and A's token ids",
          compute=out.edit_distance),
    _cond("norm_edit_distance", "output", "float64", "edit distance / the longer continuation's length",
          compute=out.norm_edit_distance, contrast="edit distance (norm.)", contrast_rank=1, delta=0.05, span=1.0,
          bounds=(0.0, 1.0)),
    _cond("first_divergence", "output", "Int64", "first index where X's and A's continuations differ",
          compute=out.first_divergence),
    _cond("exact_match", "output", "bool", "X's continuation equals A's", compute=out.exact_match),
    # next-token distributions along A's continuation, and how close greedy decoding came to a tie
    _cond("output_kl", "distribution", "float64", "mean over A's continuation of KL(p_A || p_X) (nats)",
          contrast="output KL (nats)", contrast_rank=2, delta=0.05, bounds=(0.0, INF)),
    _cond("output_kl_steps", "distribution", "object", "KL at each step of A's continuation"),
    _cond("tf_divergence", "distribution", "Int64", "first step of A's continuation at which X's own choice (the "
          "teacher-forced argmax) is not A's token; the number of steps if none"),
    _cond("min_margin_a", "distribution", "float64", "A's smallest top-1 minus top-2 logit margin"),
    _cond("min_margin_x", "distribution", "float64", "X's smallest top-1 minus top-2 logit margin"),
    _cond("near_tie", "distribution", "boolean", "A's or X's path came within the noise floor of a tie"),
    # headline attention drift per condition (kl = kl_shared + capture)
    _headline("attn_kl_mean", "kl", "mean attention KL (nats)", delta=0.05, bounds=(0.0, INF)),
    _headline("attn_kl_shared_mean", "kl_shared", "mean redistribution (nats)",
              contrast="attention redistribution (nats)", contrast_rank=4, delta=0.05),
    _headline("attn_capture_mean", "capture", "mean capture (nats)", contrast="attention capture (nats)",
              contrast_rank=3, delta=0.05),
    _headline("attn_prefix_mass_mean", "prefix_mass", "mean attention on the block"),
    _headline("attn_js_mean", "js", "mean Jensen-Shannon divergence (nats)"),
    _headline("attn_kl_peak_layer", "kl", "the layer with the largest mean KL", aggregate="peak_layer"),
)

if len({m.name for m in METRICS}) != len(METRICS):
    raise RuntimeError("a metric is registered twice")
ROW_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.level == "row")
HEADLINES: tuple[Metric, ...] = tuple(m for m in METRICS if m.from_row)
if any(m.from_row not in ROW_METRICS or m.aggregate not in ("mean", "peak_layer") for m in HEADLINES):
    raise RuntimeError("a headline metric names an unknown row metric or aggregation")


def label(name: str) -> str:
    """What a figure's axis calls a metric's column: its C - B label where it has one ("output KL
    (nats)"), else its description; an unknown column's own name."""
    metric = next((m for m in METRICS if m.name == name), None)
    return name if metric is None else metric.contrast or metric.doc


def clipped(name: str, low: float, high: float) -> tuple[float, float, bool]:
    """An interval on the mean of metric ``name`` clipped to the values it can take (its ``bounds``),
    and whether an end was moved; unchanged for an unbounded or unknown metric."""
    metric = next((m for m in METRICS if m.name == name), None)
    if metric is None or metric.bounds is None:
        return low, high, False
    floor, ceiling = metric.bounds
    moved = low < floor or high > ceiling  # False for a missing (NaN) end, which stays missing
    return (floor if low < floor else low), (ceiling if high > ceiling else high), moved


def default_deltas() -> dict[str, float]:
    """column -> the smallest effect of interest of every metric that has a default one."""
    return {m.name: m.delta for m in METRICS if m.delta is not None}


def condition_metrics(section: str) -> list[str]:
    """The conditions-table columns of one section's condition metrics, in registry order."""
    return [m.name for m in METRICS if m.level == "condition" and m.section == section]


def condition_dtypes() -> dict[str, str]:
    """dtype of every conditions-table column a metric defines."""
    return {m.name: m.dtype for m in METRICS if m.level == "condition"}


def contrasted() -> list[tuple[str, str]]:
    """(conditions column, label) of every metric the report contrasts C with B on, in its order."""
    return [(m.name, m.contrast) for m in sorted((m for m in METRICS if m.contrast), key=lambda m: m.contrast_rank)]


def output_metric_functions() -> dict[str, Callable]:
    """name -> f(X's ids, A's ids) of every output metric computed from the continuations."""
    return {m.name: m.compute for m in METRICS if m.compute is not None}


def output_drift(y_x, y_a) -> dict:
    """Every registered output metric of one condition's continuation ids ``y_x`` against A's ``y_a``."""
    return {name: f(y_x, y_a) for name, f in output_metric_functions().items()}


def check_row_metrics(computed: Iterable[str]) -> None:
    """Refuse row metrics the registry does not know (or registered ones that were not computed)."""
    computed = set(computed)
    unknown, missing = computed - set(ROW_METRICS), set(ROW_METRICS) - computed
    if unknown or missing:
        raise RuntimeError(f"attention metrics disagree with the registry (harness.measure.metrics): "
                           f"computed but not registered {sorted(unknown)}, registered but not computed "
                           f"{sorted(missing)}")
