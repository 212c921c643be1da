"""The report's multiple-testing families and claims: Benjamini-Hochberg within each model (another
model's discoveries must not lower this one's q), heads listed by the prefix-random test, and the
C-minus-B table corrected within each model."""

import numpy as np
import pandas as pd

from harness.analysis import descriptive
from harness.analysis.heads import head_contrasts
from harness.reporting import report


def attention(effects: dict[str, float], n_prompts=6, n_prefixes=6, heads=4, seed=0) -> pd.DataFrame:
    """Per model, C's capture and redistribution exceed B's by ``effect`` at head 0 only."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, effect in effects.items():
        for group in ("B", "C"):
            for x in range(n_prefixes):
                fx = rng.normal(0, 0.02)
                for p in range(n_prompts):
                    for h in range(heads):
                        shift = effect if (group == "C" and h == 0) else 0.0
                        v = 0.2 + shift + fx + rng.normal(0, 0.02)
                        rows.append({"model": model, "prompt_id": f"p{p}", "group": group, "prefix_id": f"{group}{x}",
                                     "prefix_len": 16, "placement": "raw", "isolation": "none", "beta": np.nan,
                                     "layer": 0, "head": h, "segment": "task", "capture": v, "kl_shared": v,
                                     "n_queries": 4})
    return pd.DataFrame(rows)


def test_head_q_values_are_computed_within_each_model():
    att = attention({"strong": 0.5, "null": 0.0})
    text = "\n".join(report._heads(att))
    assert "within each model" in text and "8 for null" in text and "8 for strong" in text  # 4 heads x 2 quantities
    # the null model's smallest q is what BH gives over its own tests alone
    null = att[att.model == "null"]
    own = pd.concat([head_contrasts(null, v, segment=None, family="model") for v in ("capture", "kl_shared")])
    alone = descriptive.benjamini_hochberg(own.p_perm.to_numpy(dtype=float))
    general = text.split("### Heads that differ")[0]
    listed_null = [line for line in general.splitlines() if line.startswith("| null")]
    assert (alone.min() < 0.05) == bool(listed_null)
    assert any(line.startswith("| strong") for line in general.splitlines())


def test_contrast_table_has_a_within_model_q():
    rng = np.random.default_rng(1)
    rows = []
    for model in ("m1", "m2"):
        for group in ("A", "B", "C"):
            for x in (range(1) if group == "A" else range(6)):
                for p in range(6):
                    rows.append({"model": model, "prompt_id": f"p{p}", "group": group,
                                 "prefix_id": None if group == "A" else f"{group}{x}", "prefix_len": 0 if group == "A"
                                 else 16, "placement": "raw", "isolation": "none", "beta": np.nan,
                                 "norm_edit_distance": 0.0 if group == "A" else rng.uniform(),
                                 "output_kl": 0.0 if group == "A" else rng.uniform()})
    text = "\n".join(report._contrasts(pd.DataFrame(rows)))
    assert "q (within the model)" in text and "Benjamini-Hochberg over this table's tests of one model" in text


def test_every_contrast_states_its_power_and_it_grows_with_the_prefixes():
    """Power beside every C - B row, so that an interval holding zero says what it could have missed."""
    def table(n_prefixes):
        rng = np.random.default_rng(3)
        rows = []
        for group in ("A", "B", "C"):
            for x in (range(1) if group == "A" else range(n_prefixes)):
                fx = rng.normal(0, 0.1)
                for p in range(8):
                    rows.append({"model": "m", "prompt_id": f"p{p}", "group": group,
                                 "prefix_id": None if group == "A" else f"{group}{x}",
                                 "prefix_len": 0 if group == "A" else 16, "placement": "raw", "isolation": "none",
                                 "beta": np.nan, "norm_edit_distance": 0.0 if group == "A" else 0.5 + fx +
                                 rng.normal(0, 0.02)})
        return pd.DataFrame(rows)

    def power(n_prefixes):
        text = report._contrasts(table(n_prefixes))
        header = next(line for line in text if line.startswith("| measure"))
        row = next(line for line in text if line.startswith("| edit distance"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        return float(cells[[c.strip() for c in header.strip("|").split("|")].index("power at 1 prefix SD")])

    few, many = power(5), power(30)
    assert 0 < few < many <= 1 and many > 0.8
