"""Obeying or copying? The target word's rate by what the prefix said about it.

A model that writes a word whenever a directive-shaped sentence names it looks obedient to a check
that only asks whether the word is there. Matched triples tell the two apart: for one target, an
instruction that asks for the word (C, a check that wants it: ``contains``, ``starts_with``,
``equals``), one that forbids it (C, ``absent``) and a neutral text that only mentions it (B). Per
length and placement:

* P(word | asked), P(word | forbidden), P(word | mentioned), and A's base rate (the same words in
  A's continuations, each distinct prompt and word counted once);
* asked minus mentioned (does it do what it is asked?) and forbidden minus mentioned (does it copy
  what it is told not to write?). An obedient model has the first large and the second at or
  below zero; a copier has both large.

For chat models, :func:`ceiling_table` puts each placement's obey rate beside the rate when the
user gives the same instruction in their own message (placement ``direct``, the ceiling).

Intervals treat prompts and prefixes as random: rates by :func:`harness.analysis.rates.rate_summary`
(crossed Wilson), contrasts by :func:`harness.analysis.crossed.compare_groups` (MOVER for a difference
of rates, matched by ``pair`` where each pair has one prefix of each side), with the test each
interval inverts (``p_crossed``) and its power. Stateless: DataFrame in, DataFrame out.
"""

from __future__ import annotations

import pandas as pd

from harness.analysis.checks import NothingToShow, check_hits
from harness.analysis.crossed import compare_groups
from harness.analysis.descriptive import check_conditions_table
from harness.analysis.rates import rate_summary
from harness.analysis.verdicts import deltas_for
from harness.inputs.checks import CHECKS
from harness.inputs.corpora.base import MENTION

SETTINGS = ("model", "placement", "isolation")
BASE = "A (base rate)"


def _role_counts(role: pd.Series, conditions: pd.DataFrame) -> str:
    counts = role.value_counts()
    held = ", ".join(f"{counts.get(r, 0)} {r}" for r in ("asked", "forbidden", "mentioned"))
    with_target = int(conditions["target_hit"].notna().sum()) if "target_hit" in conditions else 0
    return f"{held} (of {len(conditions)} rows, {with_target} with a target word)"


NO_TARGETS = ("word rates need B prefixes that mention a target word or C prefixes that ask for or forbid one "
              "(a prefix file's \"target\" field, prefixes=triples, or a public benchmark's corpus)")


def roles(conditions: pd.DataFrame) -> pd.Series:
    """Each row's role: ``asked`` (C whose check wants the word), ``forbidden`` (C with ``absent``),
    ``mentioned`` (B), else null (A, prefixes without a target, checks about neither)."""
    wants = {name: c.wants_word for name, c in CHECKS.items()}
    # runs written before checks existed had one: the word present
    check = conditions["check"].astype(object) if "check" in conditions else pd.Series(None, index=conditions.index)
    want = check.fillna("contains").map(wants)
    role = pd.Series(None, index=conditions.index, dtype=object)
    is_c = conditions["group"].astype(str) == "C"
    role[is_c & (want == True)] = "asked"  # noqa: E712  (want holds True, False or None)
    role[is_c & (want == False)] = "forbidden"  # noqa: E712
    role[conditions["group"].astype(str) == "B"] = "mentioned"
    has_target = conditions["target_hit"].notna() if "target_hit" in conditions else pd.Series(False, conditions.index)
    return role.where(has_target)


def without_mentions(table: pd.DataFrame, conditions: pd.DataFrame | None = None) -> pd.DataFrame:
    """``table`` without a public benchmark's mention controls (B prefixes whose span only names the
    goal's string: ``span_role`` "mention", read from ``conditions`` where ``table`` has no such
    column, e.g. the attention table). They are the control for copying, read against C's word rate;
    drift C - B compares the attack with the benign passage of its own matched set."""
    source = table if conditions is None else conditions
    if "span_role" not in source.columns or "prefix_id" not in table.columns:
        return table
    mentions = set(source.loc[source["span_role"].astype(object) == MENTION, "prefix_id"].astype(object))
    return table[~table["prefix_id"].astype(object).isin(mentions)] if mentions else table


def _settings(df: pd.DataFrame) -> list[str]:
    return [c for c in SETTINGS if c in df.columns]


def base_rate(conditions: pd.DataFrame, hit: str = "target_hit_a", per: tuple[str, ...] = ("target",)) -> pd.DataFrame:
    """A's rate of ``hit`` (the words, or the checks, looked for in A's continuations), each distinct
    prompt and ``per`` key counted once however many prefixes share it; the words (or checks) are the
    second random factor. Columns as :func:`rate_summary`'s with ``group`` "A"."""
    x = conditions[conditions[hit].notna()] if hit in conditions else conditions.iloc[:0]
    if "target" not in x:  # runs written before the target column: a pair stands for its word
        word = "pair" if "pair" in x and x["pair"].notna().all() else "prefix_id"
        per = tuple(word if k == "target" else k for k in per)
    keys = _settings(conditions) + ["prompt_id", *per]
    if x.empty or not all(k in x for k in keys):
        return pd.DataFrame()
    x = x.drop_duplicates(keys)
    unit = x[list(per)].astype(str).agg(" / ".join, axis=1)
    units = x.assign(group="A", prefix_id=unit, prefix_len=0, _hit=x[hit].astype(bool))
    return rate_summary(units, hit="_hit", by=(*_settings(conditions), "group"))


def word_rates(conditions: pd.DataFrame) -> pd.DataFrame:
    """P(word | asked / forbidden / mentioned) per setting and length, with A's base rate: one row
    per role (``group`` holds the role; "A (base rate)" with ``prefix_len`` 0)."""
    check_conditions_table(conditions)
    check_hits(conditions, "target_hit")
    role = roles(conditions)
    x = conditions[role.notna()].assign(group=role[role.notna()])
    if x.empty:
        raise NothingToShow(f"these conditions hold no row to rate: {_role_counts(role, conditions)}; {NO_TARGETS}")
    rates = rate_summary(x, hit="target_hit", by=(*_settings(x), "group", "prefix_len"))
    base = base_rate(conditions)
    if not base.empty:
        base = base.assign(group=BASE, prefix_len=0)
    return pd.concat([rates, base], ignore_index=True)


def obey_rates(conditions: pd.DataFrame) -> pd.DataFrame:
    """Per setting, check and length: how often C's replies did what the instruction asked
    (``obeyed``), with A's rate of passing the same checks unasked (``prefix_len`` 0, ``group`` "A")."""
    check_conditions_table(conditions)
    check_hits(conditions, "obeyed")
    if conditions["obeyed"].isna().all():  # no instruction with a check: no obey rate to state
        raise NothingToShow(f"no row of these conditions has an obey result (obeyed is empty in all {len(conditions)} "
                            f"rows): obey rates need C prefixes with a target word and a check")
    x = conditions[conditions["obeyed"].notna()]
    rates = rate_summary(x, hit="obeyed", by=(*_settings(x), "check", "prefix_len"))
    parts = [rates.assign(group="C")]
    for check, sub in x.groupby("check", observed=True):
        base = base_rate(sub, "obeyed_a", per=("target", "check"))
        if not base.empty:
            parts.append(base.assign(check=check, prefix_len=0))
    return pd.concat(parts, ignore_index=True)


def triple_contrasts(conditions: pd.DataFrame, seed: int = 0, deltas: dict[str, float] | None = None) -> pd.DataFrame:
    """Asked minus mentioned and forbidden minus mentioned on ``target_hit`` per setting and length
    (``contrast`` names which), as :func:`compare_groups` gives them (rates: MOVER intervals within [-1, 1];
    the power at the hit rate's smallest effect of interest Δ, :mod:`harness.analysis.verdicts`, with
    ``deltas`` over the registry's)."""
    check_conditions_table(conditions)
    role = roles(conditions)
    x = conditions[role.notna()].assign(group=role[role.notna()])
    out = []
    for side in ("asked", "forbidden"):
        sub = x[x.group.isin([side, "mentioned"])]
        if sub.group.nunique() < 2:
            continue
        table = compare_groups(sub.assign(target_hit=sub.target_hit.astype(float)), "target_hit", high=side,
                               low="mentioned", by=(*_settings(sub), "prefix_len"), seed=seed, rate=True,
                               effect=deltas_for(deltas)["target_hit"])
        out.append(table.assign(contrast=f"{side} - mentioned"))
    if not out:
        raise NothingToShow(f"a contrast needs C prefixes asking for (or forbidding) a word and B prefixes mentioning "
                            f"one; these conditions hold {_role_counts(role, conditions)}")
    return pd.concat(out, ignore_index=True)


CEILING = "direct"  # the placement whose obey rate is the ceiling (harness.inputs.chat)


def ceiling_table(conditions: pd.DataFrame, seed: int = 0, deltas: dict[str, float] | None = None) -> pd.DataFrame:
    """Each placement's obey rate beside the direct-instruction ceiling, per model, isolation, role
    (``asked``: C whose check wants the word; ``forbidden``: C with ``absent``) and length.

    Columns: the :func:`rate_summary` columns of each placement's ``obeyed`` (``placement`` names it,
    ``role`` says which instructions), ``ceiling``/``ceiling_low``/``ceiling_high`` (the same cell
    under placement ``direct``: the user asked for it in their own message), and ``minus_ceiling``
    with ``minus_low``/``minus_high``/``minus_note``/``p_crossed``/``power`` (at the obey rate's Δ, with
    ``deltas`` over the registry's; its
    range ``power_low`` to ``power_high``; and ``p_perm``, for reference): the placement's rate minus the ceiling, by
    :func:`compare_groups` with prompts and prefixes random and each prefix matched with itself (the
    same texts and prompts under both placements). Raises :class:`NothingToShow` unless the conditions
    hold a ``direct`` run (one sweep per placement, loaded together: ``harness figures RUN ... --out
    DIR``, ``harness collect`` or ``H.load_runs``)."""
    check_conditions_table(conditions)
    missing = [c for c in ("obeyed", "placement") if c not in conditions]
    if missing:
        raise NothingToShow(f"the ceiling needs the columns obeyed and placement; these conditions have no "
                            f"{' or '.join(missing)}")
    role = roles(conditions)
    keep = role.isin(["asked", "forbidden"]) & conditions["obeyed"].notna()
    x = conditions[keep].assign(role=role[keep], placement=conditions.loc[keep, "placement"].astype(str))
    if x.empty:
        raise NothingToShow(f"no C row of these conditions has an obey result: {_role_counts(role, conditions)}")
    if not (x.placement == CEILING).any():
        raise NothingToShow(f"the ceiling is placement {CEILING!r} (the user asks in their own message); these "
                            f"conditions hold only {sorted(set(x.placement))}: load a direct run beside them "
                            f"(H.load_runs, harness collect)")
    settings = [c for c in ("model", "isolation") if c in x.columns]
    cells = [*settings, "role", "prefix_len"]  # a cell: one ceiling, and the placements read against it
    rates = rate_summary(x.assign(group=x.role), hit="obeyed", by=(*settings, "placement", "group", "prefix_len"))
    rates = rates.rename(columns={"group": "role"})
    top = rates[rates.placement == CEILING][[*cells, "rate", "ci_low", "ci_high"]]
    rates = rates.merge(top.rename(columns={"rate": "ceiling", "ci_low": "ceiling_low", "ci_high": "ceiling_high"}),
                        on=cells, how="left")
    diffs = []
    paired = x.assign(obeyed=x.obeyed.astype(float), pair=x.prefix_id)  # a prefix is matched with itself
    for placement in sorted(set(x.placement) - {CEILING}):
        sub = paired[paired.placement.isin([placement, CEILING])].assign(group=lambda d: d.placement)
        table = compare_groups(sub.drop(columns="placement"), "obeyed", high=placement, low=CEILING, by=cells,
                               seed=seed, rate=True, effect=deltas_for(deltas)["obeyed"])
        diffs.append(table[[*cells, "statistic", "ci_low", "ci_high", "ci_note", "p_crossed", "power", "power_low",
                            "power_high", "p_perm"]].assign(placement=placement))
    if diffs:
        d = pd.concat(diffs, ignore_index=True).rename(columns={
            "statistic": "minus_ceiling", "ci_low": "minus_low", "ci_high": "minus_high", "ci_note": "minus_note"})
        rates = rates.merge(d, on=[*cells, "placement"], how="left")
    return rates
