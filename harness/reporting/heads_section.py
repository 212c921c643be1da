"""The report's heads section: per-head C - B tests of capture and redistribution, the heads that
pass with prompts and prefixes random (about instruction-like content in general) apart from those
that pass for these particular prefixes only, and, where none passes, what the design could find."""

from __future__ import annotations

import pandas as pd

from harness.analysis import descriptive
from harness.analysis.heads import head_contrasts
from harness.reporting.markdown import num as _num
from harness.reporting.markdown import p_text as _p
from harness.reporting.markdown import signed
from harness.reporting.markdown import table as _table


def heads_section(att: pd.DataFrame, deltas: dict[str, float]) -> list[str]:
    """The report's section on heads where C moves attention more than B: capture and redistribution
    per head, Benjamini-Hochberg within each model, and what the design could have found at each
    quantity's Δ (``deltas``: :func:`harness.analysis.verdicts.deltas_for`)."""
    if att.empty:  # every B prefix a mention control, say: no C - B to show per head
        return []
    tables = []
    for value in ("capture", "kl_shared"):
        t = head_contrasts(att, value, segment=None, family="model", tables_joined=2, effect=deltas.get(value))
        tables.append(t.assign(quantity="capture" if value == "capture" else "redistribution"))
    heads = pd.concat(tables, ignore_index=True)
    for col, q in (("p", "q"), ("p_crossed", "q_crossed"), ("p_perm", "q_perm")):  # BH within each model
        heads[q] = descriptive.benjamini_hochberg_by(heads, col, family=("model",))
    per_model = heads.groupby("model", observed=True).size()
    sizes = ", ".join(f"{n} for {m}" for m, n in per_model.items())
    lines = ["", "## Heads where C moves attention more than B", "",
             f"One-sided tests per head, segment and length, for capture and for redistribution separately; "
             f"Benjamini-Hochberg within each model over all its tests ({sizes}: lengths x segments x heads x both "
             "quantities), whatever other models share the page. This table lists heads by the crossed t test of "
             "the lead interval (q prompts x prefixes: prompts and prefixes random, the claim about instruction-like "
             "content in general; it holds its level in the calibration suite, where the prefix permutation test "
             "did not with few prompts)."]
    general = _listed(heads[heads.q_crossed < 0.05], ["q_crossed", "q"])
    if general.empty:
        lines += ["", f"No head passes q < 0.05 with prompts and prefixes random (smallest q: "
                      f"{_num(heads.q_crossed.min(), 2)}). " + _head_power(heads, per_model, deltas)]
    else:
        lines += [""] + _head_table(general, ("q_crossed", "q"))
    particular = _listed(heads[(heads.q < 0.05) & ~(heads.q_crossed < 0.05)], ["q"])
    if not particular.empty:
        lines += ["", "### Heads that differ for these particular prefixes only", "",
                  "These pass q < 0.05 with prompts random (Wilcoxon over prompts) but not with prefixes random: "
                  "a claim about the prefixes of this run, not about instruction-like text in general.", ""]
        lines += _head_table(particular, ("q", "q_crossed"))
    return lines


def _listed(heads: pd.DataFrame, qs: list[str], n: int = 12) -> pd.DataFrame:
    """The ``n`` heads a table lists: smallest q first and, among equal q (an exact test's floor
    gives many heads the same one), the largest C - B; a stable sort, so the same heads every run."""
    ordered = heads.assign(_size=-heads.mean_diff).sort_values([*qs, "_size"], kind="stable")
    return ordered.head(n).drop(columns="_size")


def _head_power(heads: pd.DataFrame, per_model: pd.Series, deltas: dict[str, float]) -> str:
    """What the design could have found, per model: a lone head passes Benjamini-Hochberg only with
    p <= 0.05 / (its model's tests); the crossed t test's power there at each quantity's smallest
    effect of interest Δ (median over heads, and the largest)."""
    parts = []
    for model, sub in heads.groupby("model", observed=True):
        r = sub.iloc[0]
        m = int(per_model[model])
        power = sub.power_lone.dropna()
        at = f"Δ (capture {_num(deltas.get('capture'))}, redistribution {_num(deltas.get('kl_shared'))} nats)"
        said = (f"its power at {at} was {_num(power.median(), 2)} for the median head "
                f"(at most {_num(power.max(), 2)})" if len(power) else "its power is not estimable (no head had an interval)")
        parts.append(f"{model}: with {int(r.n_prompts)} prompts and {int(r.n_prefixes_high)}+{int(r.n_prefixes_low)} "
                     f"prefixes ({r.design}) a lone head among {m} tests needs p <= {_num(0.05 / m, 2)}, and {said}.")
    return " ".join(parts)


Q_LABELS = {"q": "q (prompts)", "q_crossed": "q (prompts x prefixes)", "q_perm": "q (prefix permutation)"}


def _head_table(heads: pd.DataFrame, qs: tuple[str, str]) -> list[str]:
    """Listed heads, with the q the table is about first."""
    rows = [[r.model, r.prefix_len, r.segment, r.layer, r.head, r.quantity, signed(r.mean_diff)]
            + [_p(getattr(r, q)) for q in qs] for r in heads.itertuples()]
    return _table(["model", "prefix length", "segment", "layer", "head", "what moved", "C - B (nats)",
                   *(Q_LABELS[q] for q in qs)], rows)
