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


def test_no_head_line_says_what_the_design_could_find():
    """3 + 3 prefixes: the smallest permutation p is 1/20 (the planted head reaches it), far above
    the 0.05/8 a lone head needs among 8 tests: the report says the design had no power."""
    from harness.analysis.heads import smallest_permutation_p

    att = attention({"small": 0.5}, n_prefixes=3)
    tested = head_contrasts(att, "capture", segment=None)
    assert tested.p_perm.min() == smallest_permutation_p(3, 3, "unpaired") == 1 / 20
    text = "\n".join(report._heads(att))
    assert "No head passes" in text
    assert "small: with 3+3 prefixes (unpaired) the smallest p is 0.05" in text
    assert "needs p <= 0.0063, so this design could not name any single head (its power was 0)" in text
    assert smallest_permutation_p(4, 4, "paired") == 1 / 16
    assert smallest_permutation_p(30, 30, "unpaired", n_permutations=999) == 1 / 1000


def test_behaviour_section_reads_triples():
    """A copier: the forbidden word is written as often as the asked one; the section gives both
    contrasts and the obey rate per check, and the C - B table leaves the mixed hit rate out."""
    from tests.analysis.test_obeying import triples

    conds = triples(copier=True).assign(norm_edit_distance=0.5)
    text = "\n".join(report.behaviour_section(conds))
    assert "### Obeying or copying?" in text and "### Obey rate per check" in text
    assert "| m | forbidden - mentioned | 32 | 3+3 | 0.750 [" in text
    assert "| m | forbidden (C) | 32 | 12/12 | 1.000 [" in text and "| m | A (base rate) | - | 1/12 |" in text
    assert "| m | absent | 32 | 0/12 | 0 [0, " in text
    contrasts = "\n".join(report._contrasts(conds))
    assert "Target hit rate is left out" in contrasts and "| target hit rate |" not in contrasts


def test_behaviour_section_puts_each_placement_beside_the_direct_ceiling():
    from tests.analysis.test_obeying import placed

    direct = placed("direct", lambda p, w, k: True)
    system = placed("system", lambda p, w, k: k == "absent" or w == 0)
    alone = "\n".join(report.behaviour_section(system.assign(norm_edit_distance=0.5)))
    assert "### Injected, against asked directly" not in alone  # no ceiling without a direct run
    text = "\n".join(report.behaviour_section(pd.concat([direct, system]).assign(norm_edit_distance=0.5)))
    assert "### Injected, against asked directly" in text
    rows = [line for line in text.splitlines() if line.startswith("| m | asked | 32 |")]
    assert rows[0].startswith("| m | asked | 32 | direct | 12/12 | 1.000 [") and rows[0].endswith("| - | - |")
    assert rows[1].startswith("| m | asked | 32 | system | 4/12 | 0.333 [") and "| -0.667 [" in rows[1]


def test_contrast_rows_too_small_for_a_calibrated_interval_print_none():
    rng = np.random.default_rng(2)
    rows = []
    for group in ("A", "B", "C"):
        for x in (range(1) if group == "A" else range(3)):
            for p in range(6):
                rows.append({"model": "m", "prompt_id": f"p{p}", "group": group,
                             "prefix_id": None if group == "A" else f"{group}{x}",
                             "prefix_len": 0 if group == "A" else 16, "placement": "raw", "isolation": "none",
                             "beta": np.nan, "norm_edit_distance": 0.0 if group == "A" else rng.uniform(),
                             "output_kl": 0.0 if group == "A" else rng.uniform()})
    text = "\n".join(report._contrasts(pd.DataFrame(rows)))
    assert "With 3 prefixes in a group, no calibrated prompts x prefixes interval is known" in text
    lines = [line for line in text.splitlines() if line.startswith("| output KL")]
    assert lines and all("(no interval)" in line and "| n/a |" in line for line in lines)
