"""Checks of the analysis API's public arguments, and the constants they check against: each refusal
is a one-line ``ValueError`` naming the argument, what is allowed and the value given (a mistyped
column or count would otherwise pool, empty or fill the memory without a word)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.analysis.repeats import CONDITION_KEYS, repeated_conditions
from harness.analysis.undecoded import empty_beside_a
from harness.inputs.conditions import KEY_FIELDS

CONFIDENCE = 0.95
N_RESAMPLES = 2000
N_PERMUTATIONS = 10_000
HEAD_PERMUTATIONS = 2000
CONTRAST_BY = ("model", "placement", "isolation", "prefix_len")
GROUP_BY = ("model", "placement", "isolation", "group", "prefix_len")

CLAIM_PROMPTS = "these prefixes (prompts resampled)"
CLAIM_GENERAL = "instruction-like content in general (prompts and prefixes resampled)"

# A floor against a mistyped count (1 resample gives a zero-width interval), not a recommendation:
# it sits below every count a caller or test asks for (50 and up; the CLI's own floor is 20).
MIN_RESAMPLES = 10
# a sweep may leave a group out (groups=[A,B]) and the report still asks for C - B on every run:
# those rows say n_prompts 0, so these are accepted whether or not the table holds them
SWEEP_GROUPS = ("A", "B", "C")
# numeric columns that place a row in the design (a layer, a length, an isolation beta), never a measure
DESIGN_COLUMNS = frozenset({"layer", "head", "prefix_len", "n_queries", "beta", "batch_size", "seed"})
# the columns a summary writes itself: a by column of the same name would be shadowed
SUMMARY_COLUMNS = frozenset({"mean", "ci_low", "ci_high", "ci_method", "n_prompts", "statistic"})


def shown(value) -> str:
    """``value`` as an error message prints it (a numpy scalar as the plain number it holds)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def check_fraction(name: str, value, example: float) -> None:
    """Refuse ``value`` unless it is a number strictly between 0 and 1 (a confidence, a level)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not 0 < value < 1:
        raise ValueError(f"{name} must be a number strictly between 0 and 1 (e.g. {example}), got {shown(value)}")


def check_count(name: str, value, minimum: int) -> None:
    """Refuse ``value`` unless it is a whole number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be a whole number of at least {minimum}, got {shown(value)}")


def generator(seed) -> np.random.Generator:
    """numpy's generator for ``seed``, refused unless a whole number of at least 0 (the string "0"
    fails deep inside numpy, and a float is truncated elsewhere)."""
    check_count("seed", seed, 0)
    return np.random.default_rng(seed)


def check_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    """Refuse ``df`` unless it has ``columns``: ``what`` says which table it should be (a bare
    KeyError deep inside a summary says neither)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} must have the column{'s' * (len(missing) > 1)} {', '.join(missing)}; this table has "
                         f"no {', '.join(missing)}")


# the tables the figure and report functions take beside the conditions, by a column only each has
TABLE_KINDS = {"noise": ("comparison", "the run's noise table (noise.parquet)"),
               "ceiling": ("role", "the ceiling table (H.ceiling_table)"),
               "forest": ("comparison", "figure 0's table (contrasts.parquet, forest_table)"),
               "contrasts": ("statistic", "the C - B table (contrast_table)")}


def check_tables(**tables) -> None:
    """Refuse a table given as another kind (``noise=``, ``ceiling=``, ``forest=``, ``contrasts=``,
    by :data:`TABLE_KINDS`): the conditions table as ``noise=`` was drawn from without a word, and the
    others failed deep inside with an AttributeError. None, or a table without columns (an empty
    result), is always accepted."""
    for name, df in tables.items():
        if df is None or len(getattr(df, "columns", ())) == 0:
            continue
        column, kind = TABLE_KINDS[name]
        if not isinstance(df, pd.DataFrame) or column not in df.columns or (name == "forest" and "measure" not in df):
            raise ValueError(f"{name} must be {kind}; this table has no {column!r} column")


def check_same_conditions(conditions: pd.DataFrame, attention: pd.DataFrame | None) -> None:
    """Refuse an attention table holding conditions the conditions table lacks, within the models and
    placements both hold (a table filtered and the other not: the figures and the report would draw
    the attention of conditions they do not show). Fewer attention rows are allowed: a run made
    without attention analysis beside one made with it has none."""
    if attention is None or len(attention) == 0 or len(conditions) == 0:
        return
    keys = [k for k in ("model", *KEY_FIELDS) if k in attention and k in conditions]

    def spelled(df: pd.DataFrame) -> pd.DataFrame:  # 8 and 8.0 are one length (a column cast to float)
        return pd.DataFrame({k: (df[k].astype(float) if pd.api.types.is_numeric_dtype(df[k]) else df[k]).astype(str)
                             for k in keys}).drop_duplicates()

    a, c = spelled(attention), spelled(conditions)
    panel = [k for k in ("model", "placement") if k in keys]
    a = a.merge(c[panel].drop_duplicates(), on=panel) if panel else a  # another model's: said by the figures
    extra = a.merge(c, on=keys, how="left", indicator=True)
    extra = extra[extra["_merge"] == "left_only"]
    if len(extra):
        first = {k: extra.iloc[0][k] for k in keys if k in ("group", "prompt_id", "prefix_id", "prefix_len")}
        raise ValueError(f"attention holds {len(extra)} condition(s) the conditions table does not (first: {first}): "
                         f"was one table filtered and not the other? filter both alike")


def check_flags(**flags) -> None:
    """Refuse a switch that is not True or False (None where the function decides): "no" is true."""
    for name, value in flags.items():
        if value is not None and not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"{name} must be True or False, got {shown(value)}")


def check_effect(name: str, value, allow_none: bool = True) -> None:
    """Refuse ``value`` unless it is a positive finite number (an effect in a measure's units), or
    None where ``allow_none``."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number in the measure's units"
                         f"{' (or None)' if allow_none else ''}, got {shown(value)}")


MAX_RESAMPLES = 1_000_000


def check_resampling(confidence: float, n_resamples: int | None = None) -> None:
    """The checks every bootstrap interval shares: ``confidence`` in (0, 1) and, when given, at least
    :data:`MIN_RESAMPLES` resamples."""
    check_fraction("confidence", confidence, CONFIDENCE)
    if n_resamples is not None:
        check_count("n_resamples", n_resamples, MIN_RESAMPLES)
        if n_resamples > MAX_RESAMPLES:  # each resample holds a row of weights: 10**9 filled 24 GB
            raise ValueError(f"n_resamples must be at most {MAX_RESAMPLES:,}, got {shown(n_resamples)}")


def check_held(df: pd.DataFrame, column: str, name: str, value, also: Sequence[str] = ()) -> None:
    """Refuse ``value`` (the argument ``name``) unless ``df[column]`` holds it or it is in ``also``:
    a group or segment the table lacks would give an empty or all-NaN table without a word."""
    held = sorted(map(str, df[column].dropna().unique())) if column in df.columns else []
    if str(value) in held or value in also:
        return
    where = ", ".join(map(repr, held)) or "none"
    extra = f" or a sweep's {', '.join(also[:-1])} or {also[-1]}" if also else ""
    raise ValueError(f"{name} must be a {column} the table holds ({where}){extra}, got {shown(value)}")


class NothingToShow(ValueError):
    """Raised by a public table that these conditions hold nothing to compute from (no target word
    to rate, no direct placement, A for fewer than 2 prompts): a one-line reason for a caller of the
    API; a report leaves that section out (:func:`or_empty`)."""


def or_empty(table, *args, **kwargs) -> pd.DataFrame:
    """``table(*args, **kwargs)``, or an empty frame where it raised :class:`NothingToShow` (a
    report's section that has nothing to show is left out)."""
    try:
        return table(*args, **kwargs)
    except NothingToShow:
        return pd.DataFrame()


def check_measure(df: pd.DataFrame, value: str) -> None:
    """Refuse a ``value`` that is not a column of numbers or booleans of ``df`` (a text column would
    fail deep inside a mean; a missing one with a bare KeyError)."""
    if not isinstance(value, str) or value not in df.columns:  # a list names no one column
        raise ValueError(f"value must name a column of the table, got {shown(value)}")
    if value in DESIGN_COLUMNS:  # numbers, but where a row sits, not what was measured
        raise ValueError(f"value must name a measure, got {shown(value)}: a column that says where a row sits in "
                         f"the design (summarise a measure by it instead)")
    column = df[value]
    if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
        example = next(iter(column.dropna()), None)
        if isinstance(example, (int, float, np.number)) and not isinstance(example, bool):
            raise ValueError(f"value {value!r} holds numbers stored as objects (dtype {column.dtype}): convert it "
                             f"first, e.g. table.assign({value}=table[{value!r}].astype(float))")
        per_step = " (a value per step: H.step_profile reads it)" if isinstance(example, (list, np.ndarray)) else ""
        raise ValueError(f"value must name a column of numbers or booleans, got {shown(value)}, which holds "
                         f"{shown(example)[:40]}{per_step}")
    if pd.api.types.is_float_dtype(column) and np.isinf(column.to_numpy(dtype=float, na_value=np.nan)).any():
        raise ValueError(f"value {value!r} holds infinite values: a mean of them says nothing; drop or cap them first")
    if len(column) and column.isna().all():  # every cell would say n_prompts 0, mean NaN
        raise NothingToShow(f"value {value!r} is empty in all {len(column)} rows of the table (a measure this run did "
                            f"not take?): there is nothing to summarise")
    empty = empty_beside_a(df, value)
    if empty:
        raise NothingToShow(f"value {value!r} {empty}")


def check_conditions_table(df: pd.DataFrame, name: str = "conditions") -> None:
    """Refuse an attention table where a conditions table belongs (it has a row per layer and head,
    and none of the continuation's columns: the summary would be empty, or pool every head), and a
    table holding one condition twice with the same results (a run's table concatenated with itself,
    or two runs sharing conditions: each copy would count as another observation)."""
    check_frame(df, name)
    if {"layer", "head"} <= set(df.columns):
        raise ValueError(f"{name} must be a conditions table (a row per condition); this is an attention table (it "
                         f"has layer and head columns)")
    absent = [c for c in ("group", "prompt_id") if c not in df.columns]
    if absent:  # every summary splits by them: without one it would pool what they keep apart, without a word
        raise ValueError(f"{name} has no {absent[0]!r} column, one of a condition's keys every summary splits by: "
                         f"put it back under that name")
    check_keys(df)  # a row without a key would read as a repeat of another below
    exact, differing = repeated_conditions(df)
    absent = [c for c in ("prefix_id", "prefix_len") if c not in df.columns]
    if (exact or differing) and absent:  # a renamed or dropped key merges conditions, which then read as copies
        raise ValueError(f"{name} has no {absent[0]!r} column, one of a condition's keys, so conditions that differ "
                         f"only in it read as copies of one another: put it back under that name")
    if exact:
        raise ValueError(f"{name} holds {exact} row(s) repeating another row exactly (the same condition and the "
                         f"same results), which would count one condition as several: read several runs with "
                         f"H.load_runs([...]), which keeps one copy, or concatenate each run's table once")
    if differing:
        raise ValueError(f"{name} holds {differing} condition(s) twice with different results (runs or settings "
                         f"concatenated), with no column saying which copy is whose: every copy would count as "
                         f"another observation. Keep one copy of each, or name each copy's run in a column 'run' "
                         f"and compare the runs (by=[..., 'run']); H.load_runs([...]) refuses runs that disagree")


def check_frame(df, name: str) -> None:
    """Refuse a table that is not a DataFrame (records, a dict, a path): the summaries read columns."""
    if not isinstance(df, pd.DataFrame):
        table = name if name in ("conditions", "attention") else "conditions"
        raise ValueError(f"{name} must be a pandas DataFrame (a run's table: H.load_run(RUN).{table}), got "
                         f"{type(df).__name__}")


def check_attention_table(df: pd.DataFrame, needs: tuple[str, ...] = ("layer", "head"),
                          name: str = "attention") -> None:
    """Refuse a table without the attention table's ``needs`` columns (the conditions table given for
    the attention one, most often: the error would otherwise be about a missing measure)."""
    check_frame(df, name)
    missing = [c for c in needs if c not in df.columns]
    if missing:
        hint = " (this looks like a conditions table: the attention table is H.load_run(RUN).attention)" \
            if "group" in df.columns and not {"layer", "head"} & set(df.columns) else ""
        raise ValueError(f"{name} must be an attention table (a row per condition, layer, head and segment); this one "
                         f"has no {', '.join(missing)}{hint}")


def check_groups(df: pd.DataFrame, high: str, low: str, attention: bool = False) -> None:
    """Refuse a ``high``/``low`` pair a C-minus-B comparison cannot mean (a group neither held by ``df``
    nor in :data:`SWEEP_GROUPS`, one group twice) and, unless ``attention``, an attention table."""
    missing = [c for c in ("group", "prompt_id", "prefix_id") if c not in df.columns]
    if missing:
        raise ValueError(f"the table must have the key columns group, prompt_id and prefix_id; it has no "
                         f"{', '.join(missing)}")
    heads = [c for c in ("layer", "head", "segment") if c in df.columns]  # one head's slice is one cell: it may stay
    one_head = {"layer", "head"} <= set(heads) and len(df[heads].drop_duplicates()) <= 1
    if not attention and not one_head:  # an attention table, repeated rows, or a dropped key: in the words
        check_conditions_table(df, "the table")  # every conditions analysis uses
    check_held(df, "group", "high", high, SWEEP_GROUPS)
    check_held(df, "group", "low", low, SWEEP_GROUPS)
    if high == low:
        raise ValueError(f"high and low must be two different groups, got {shown(high)} for both")
    warn_absent_groups(df, high, low)


class PooledRunsWarning(UserWarning):
    """A summary counts the copies of one condition from several runs as more observations
    (:func:`warn_pooled_runs`): a command read with ``--allow-mixed-settings`` says so in its own note."""


def warn_pooled_runs(df: pd.DataFrame, by: Sequence[str] | None, stacklevel: int = 4) -> None:
    """Warn where copies of one condition from several runs (a ``run`` column, as ``H.load_runs``
    names runs that differ in their settings) would each count as another observation: a summary
    not split by ``run`` averages the runs and narrows its interval as if they were more prompts.
    An attention table's rows are one condition's layer, head and segment. ``by`` None: the caller
    cannot split by a column, so the warning says to select one run."""
    if "run" not in df.columns or "run" in (by or ()):
        return
    keys = [c for c in (*CONDITION_KEYS, "layer", "head", "segment") if c in df.columns]
    pooled = int(df.duplicated(subset=keys).sum()) if {"group", "prompt_id"} <= set(keys) else 0
    if pooled:
        what = "row(s) of a condition" if {"layer", "head"} <= set(keys) else "condition(s)"
        remedy = "select one run (table[table.run == ...])" if by is None else \
            "add 'run' to by to compare the runs (or select one run)"
        warnings.warn(f"the table holds {pooled} {what} once per run (column 'run'), and each copy counts as another "
                      f"observation of it: {remedy}", PooledRunsWarning, stacklevel=stacklevel)


def check_cells(df: pd.DataFrame, high: str, low: str, by: list[str]) -> None:
    """Refuse ``by`` cells that cannot hold the contrast asked for.

    A's rows sit at prefix length 0 (it has no prefix), so split by length it pairs with nothing:
    every row would say "0 prompts" although both groups have them."""
    if "A" not in (high, low) or "prefix_len" not in by or "prefix_len" not in df:
        return
    other = low if high == "A" else high
    lengths = {g: set(df.loc[df["group"].astype(str) == g, "prefix_len"].dropna()) for g in ("A", other)}
    if lengths["A"] and lengths[other] and not lengths["A"] & lengths[other]:
        raise ValueError(f"A has no prefix length (its rows sit at prefix_len {min(lengths['A'])}), so split by "
                         f"prefix_len it pairs with none of {other}'s: a drift measure is already measured against "
                         f"A, so {other} - A is {other}'s own mean (H.drift_summary; the report's contrasts.parquet); "
                         f"for a measure A has too, leave prefix_len out of by")


def warn_absent_groups(df: pd.DataFrame, high: str, low: str) -> None:
    """Warn where :func:`check_groups` let through a sweep's group the table lacks (filtered out, or
    spelled otherwise): every row would compare nothing, with n_prompts 0 (a report of a sweep of
    groups [A, B] asks for C - B all the same, so it is not refused)."""
    held = set(map(str, df["group"].dropna().unique()))
    absent = [g for g in (high, low) if g not in held]
    if absent:
        warnings.warn(f"the table holds no rows of group {absent[0]!r} (its groups: {sorted(held)}), so {high} - {low} "
                      f"compares nothing (n_prompts 0, or no rows)", stacklevel=4)


def check_by(df: pd.DataFrame, by, value: str | None = None, contrast: bool = False) -> list[str]:
    """``by`` as a list of columns (one column may be given as a string), refused where it names a
    column ``df`` lacks and no table of the harness may lack (the keys :data:`GROUP_BY` names are
    skipped where absent, as tables of one placement have none): a typo would silently pool over
    what it meant to split."""
    check_frame(df, "the table")
    if by is None or not isinstance(by, (str, Sequence)):
        raise ValueError(f"by must name columns to summarise by (e.g. ('group', 'prefix_len')), got {shown(by)}")
    by = [by] if isinstance(by, str) else list(by)
    repeated = sorted({c for c in by if by.count(c) > 1})
    if repeated:
        raise ValueError(f"by names {repeated[0]!r} twice: give each column once")
    if value is not None and value in by:
        raise ValueError(f"by names the measure {value!r} itself: summarise a measure by other columns")
    shadowed = [c for c in by if c in SUMMARY_COLUMNS]
    if shadowed:
        raise ValueError(f"by names {shadowed[0]!r}, a column the summary writes itself: rename that column first")
    split = [c for c in by if c in ("group", "prefix_id")] if contrast else []
    if split:  # a contrast takes one group from another, over the prefixes of each
        raise ValueError(f"by may not name {split[0]!r}: a contrast compares groups over their prefixes")
    if not by:
        example = "('model', 'prefix_len')" if contrast else "('group', 'prefix_len')"
        raise ValueError(f"by must name at least one column to summarise by (e.g. {example})")
    if "prompt_id" in by:  # the unit every summary averages over and resamples: no cell of its own
        raise ValueError("by may not name prompt_id: the summaries average over prompts and resample them for "
                         "their intervals (per-prompt values: group the table yourself)")
    unknown = [c for c in by if c not in df.columns and c not in set(GROUP_BY) | set(CONTRAST_BY)]
    if unknown:
        raise ValueError(f"by must name columns of the table, got {shown(unknown[0])}")
    if df.empty:  # a filter that matched nothing (a length the run lacks, a group misspelt)
        raise NothingToShow("the table is empty (filtered to nothing?): there is nothing to summarise")
    check_keys(df, by)
    warn_pooled_runs(df, by, stacklevel=4)
    return by


def check_keys(df: pd.DataFrame, by: Sequence[str] = ()) -> None:
    """Refuse rows that no cell can hold: a missing ``group`` or ``prompt_id`` (every summary groups
    by them), or a prefixed row (B, C) without its ``prefix_len`` or ``prefix_id`` (a merge or a
    filter gone wrong): the summaries' groupbys would leave them out, or the crossed analyses count
    them as a prefix of their own, without a word."""
    keys = [c for c in ("group", "prompt_id") if c in df.columns]
    prefixed = ("prefix_len", "prefix_id")
    if "group" in df.columns:
        keys += [c for c in prefixed if c in df.columns]
    for key in keys:
        missing = df[key].isna()
        if key in prefixed:
            missing &= df["group"].astype(str).isin(["B", "C"])
        if missing.any():
            where = " of a prefixed group (B, C)" if key in prefixed else ""
            split = f", split by {key}," if key in by else ""
            fate = ("the crossed analyses would count them as one more prefix" if key == "prefix_id" else
                    f"every summary{split} would leave them out")
            raise ValueError(f"{int(missing.sum())} of the table's {len(df)} rows{where} have no {key}, so {fate} "
                             f"without a word: fill the column or drop those rows first (first at index "
                             f"{shown(df.index[missing.to_numpy()][0])})")


def check_hits(df: pd.DataFrame, hit: str) -> None:
    """Refuse a ``hit`` column ``df`` lacks, or one whose non-null values are not booleans or 0/1 (a
    continuous measure such as ``output_kl`` would be averaged into a meaningless "rate")."""
    if hit not in df.columns:
        flags = ", ".join(repr(c) for c in df.columns if pd.api.types.is_bool_dtype(df[c].dtype)) or "none"
        raise ValueError(f"hit must name a column of the table (its boolean columns: {flags}), got {shown(hit)}")
    values = df[hit].dropna()
    number = (bool, np.bool_, int, float, np.number)  # one by one: the value named is the offending one
    bad = values[[isinstance(v, str) or not isinstance(v, number) or float(v) not in (0.0, 1.0) for v in values]]
    if len(bad):
        raise ValueError(f"hit must name a column of booleans or 0/1 (nulls are left out), got {shown(hit)}, "
                         f"which holds {shown(bad.iloc[0])}")
