"""Runs drawn from a public benchmark (:mod:`harness.inputs.corpora`), read by the benchmark's own
factors: the attack template (``attack``), where the span sits (``injection_at``) and the prefix
length. Stateless: DataFrame in, DataFrame out.

* :func:`attacker_rates`: how often the reply holds the attacker's string when the span holds the
  attack (C) and when it only names it (the mention control, B), with A's base rate;
* :func:`attacker_contrast`: attack minus mention on that rate, each matched set paired with itself
  (MOVER from crossed Wilson intervals: :func:`harness.analysis.crossed.compare_groups`);
* :func:`drift_contrasts`: C - B on output and attention drift, B the benign passage of the same
  set (paired by set), prompts and sets both random.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from harness.analysis.crossed import compare_groups
from harness.analysis.obeying import base_rate, without_mentions
from harness.analysis.rates import rate_summary
from harness.inputs.corpora.base import ATTACK, MENTION

SETTING = ("model", "placement")
DRIFT = (("output_kl", "output KL (nats)"), ("norm_edit_distance", "edit distance (norm.)"),
         ("attn_capture_mean", "attention capture (nats)"), ("attn_kl_mean", "attention KL (nats)"))


def corpus_rows(conditions: pd.DataFrame) -> pd.DataFrame:
    """The rows of matched sets (and each prompt's A): what the functions here read."""
    if "span_role" not in conditions.columns:
        return conditions.iloc[:0]
    return conditions[(conditions.group.astype(str) == "A") | conditions.span_role.notna()]


def _by_role(conditions: pd.DataFrame) -> pd.DataFrame:
    """The attack and mention rows, their ``group`` renamed to the span's role."""
    x = corpus_rows(conditions)
    x = x[x.span_role.astype(object).isin([ATTACK, MENTION]) & x.target_hit.notna()]
    return x.assign(group=x.span_role.astype(str), target_hit=x.target_hit.astype(bool))


def attacker_rates(conditions: pd.DataFrame, by: Sequence[str] = ("injection_at", "prefix_len")) -> pd.DataFrame:
    """The attacker's string's rate in replies per setting, ``by`` cell and span role (``group``:
    "attack" or "mention"), and A's base rate per setting (``group`` "A": the same strings looked
    for in A's replies, each prompt and string once). Columns as :func:`rate_summary`'s."""
    x = _by_role(conditions)
    if x.empty:
        return pd.DataFrame()
    rates = rate_summary(x, hit="target_hit", by=(*SETTING, *by, "group"))
    base = base_rate(corpus_rows(conditions))
    return pd.concat([rates, base], ignore_index=True) if not base.empty else rates


def attacker_contrast(conditions: pd.DataFrame, by: Sequence[str] = ("injection_at", "prefix_len"),
                      seed: int = 0) -> pd.DataFrame:
    """Attack minus mention on the attacker's string's rate per setting and ``by`` cell, each set's
    attack paired with its own mention control (:func:`compare_groups` with ``rate=True``)."""
    x = _by_role(conditions)
    if x.empty or x.group.nunique() < 2:
        return pd.DataFrame()
    return compare_groups(x.assign(target_hit=x.target_hit.astype(float)), "target_hit", high=ATTACK, low=MENTION,
                          by=(*SETTING, *by), seed=seed, rate=True)


def drift_contrasts(conditions: pd.DataFrame, by: Sequence[str] = ("injection_at", "prefix_len"),
                    measures=DRIFT, seed: int = 0, power: bool = True) -> pd.DataFrame:
    """C - B per measure (``measure``: its label, ``value``: its column), setting and ``by`` cell,
    B the benign passage of each set (the mention controls left out: paired by set)."""
    x = without_mentions(corpus_rows(conditions))
    out = [compare_groups(x, value, by=(*SETTING, *by), seed=seed, power=power).assign(measure=label, value=value)
           for value, label in measures if value in x and x[value].notna().any()]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()
