"""The report's multiple-testing families and claims: Benjamini-Hochberg within each model (another
model's discoveries must not lower this one's q), heads listed by the prefix-random test, and the
C-minus-B table corrected within each model."""

import re

import numpy as np
import pandas as pd

from harness.analysis import descriptive, obeying
from harness.analysis.heads import head_contrasts
from harness.analysis.verdicts import deltas_for
from harness.reporting import heads_section as heads_section_module
from harness.reporting import report
from harness.reporting.heads_section import heads_section
from harness.reporting.markdown import power_text


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
    text = "\n".join(heads_section(att, deltas_for()))
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
        cell = cells[[c.strip() for c in header.strip("|").split("|")].index("power at Δ")]
        low, high = (float(v) for v in re.fullmatch(r"[\d.]+ \(range ([\d.]+) to ([\d.]+)\)", cell).groups())
        assert 0 <= low <= high <= 1  # the range the data allow, beside the point power
        return float(cell.split()[0])

    few, many = power(5), power(30)
    assert 0 < few < many <= 1  # at the measure's Δ: more prefixes, more power


def test_no_head_line_says_what_the_design_could_find():
    """No head passes: the line gives the level a lone head needs among its model's tests and the
    crossed test's power there at each quantity's Δ (a study's own where it states one), the median
    head's and the largest, as design_power computes it from each head's components (the permutation
    test's floor of 1/C(2k, k) no longer sets it: the crossed test holds its level, the permutation
    test did not)."""
    from harness.analysis.verdicts import deltas_for

    att = attention({"null": 0.0}, n_prefixes=4)
    text = "\n".join(heads_section(att, deltas_for()))
    assert "No head passes" in text
    tested = pd.concat([head_contrasts(att, v, segment=None, tables_joined=2) for v in ("capture", "kl_shared")])
    assert len(tested) == 8 and tested.power_lone.notna().all()
    assert "null: with 6 prompts and 4+4 prefixes (unpaired) a lone head among 8 tests needs p <= 0.0063" in text
    assert (f"power at Δ (capture 0.0500, redistribution 0.0500 nats) was {tested.power_lone.median():.2g} for the "
            f"median head (at most {tested.power_lone.max():.2g})") in text
    assert (tested.power_lone >= 0.05 / 8 - 1e-12).all() and (tested.power_lone <= 1).all()
    larger = deltas_for({"capture": 0.5, "kl_shared": 0.5})
    assert "capture 0.500, redistribution 0.500 nats" in "\n".join(heads_section(att, larger))
    wide = head_contrasts(att, "capture", segment=None, tables_joined=2, effect=0.5).power_lone
    assert (wide.to_numpy() >= tested.power_lone.to_numpy()[:4] - 1e-12).all() and wide.max() > tested.power_lone.max()


def test_a_planted_head_is_found_with_prompts_and_prefixes_random():
    text = "\n".join(heads_section(attention({"small": 0.5}, n_prefixes=4), deltas_for()))
    general = text.split("### Heads that differ")[0]
    assert "| small | 16 | task | 0 | 0 | capture |" in general and "No head passes" not in general


def test_behaviour_section_reads_triples():
    """A copier: the forbidden word is written as often as the asked one; the section gives both
    contrasts and the obey rate per check, and the C - B table leaves the mixed hit rate out."""
    from tests.analysis.test_obeying import triples

    conds = triples(copier=True).assign(norm_edit_distance=0.5)
    text = "\n".join(report.behaviour_section(conds))
    assert "### Obeying or copying?" in text and "### Obey rate per check" in text
    assert "| m | forbidden - mentioned | 32 | 3+3 | 0.750 [" in text and "power at Δ" in text
    assert "| m | forbidden (C) | 32 | 12/12 | 1.00 [" in text and "| m | A (base rate) | - | 1/12 |" in text
    assert "| m | absent | 32 | 0/12 | 0 [0, " in text and "Wilson, crossed, 3 effective units" in text
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
    assert rows[0].startswith("| m | asked | 32 | direct | 12/12 | 1.00 [") and rows[0].endswith("| - | - | - |")
    assert rows[1].startswith("| m | asked | 32 | system | 4/12 | 0.333 [") and "| -0.667 [" in rows[1]
    # the gap's power, with its range, as the ceiling table computes it
    table = obeying.ceiling_table(pd.concat([direct, system]))
    gap = table[(table.placement == "system") & (table.role == "asked")].iloc[0]
    assert rows[1].endswith(f"| {power_text(gap.power, gap.power_low, gap.power_high)} |")
    assert re.search(r"\(range [\d.]+ to [\d.]+\) \|$", rows[1])


def contrast_conditions(n_prefixes: int, n_prompts: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    rows = []
    for group in ("A", "B", "C"):
        for x in (range(1) if group == "A" else range(n_prefixes)):
            for p in range(n_prompts):
                rows.append({"model": "m", "prompt_id": f"p{p}", "group": group,
                             "prefix_id": None if group == "A" else f"{group}{x}",
                             "prefix_len": 0 if group == "A" else 16, "placement": "raw", "isolation": "none",
                             "beta": np.nan, "norm_edit_distance": 0.0 if group == "A" else rng.uniform(),
                             "output_kl": 0.0 if group == "A" else rng.uniform()})
    return pd.DataFrame(rows)


def test_contrast_rows_the_design_cannot_support_say_so_in_words():
    """2 prefixes per group, or 2 prompts: no interval and why, never a zero-width or exploded one."""
    for conds, why in ((contrast_conditions(2), "2 prefixes in a group"), (contrast_conditions(4, 2), "2 prompts")):
        lines = [line for line in report._contrasts(conds) if line.startswith("| output KL")]
        assert lines and all(f", no interval ({why}) |" in line for line in lines)
        cells = [c.strip() for c in lines[0].strip("|").split("|")]
        assert cells[5] == "n/a" and cells[7] == "0.0500"  # no test; the measure's Δ all the same
        assert cells[8] == "not determined" and cells[9] == "not estimable"  # no verdict or power without the interval
    text = "\n".join(report._contrasts(contrast_conditions(3)))
    assert "no interval" not in text and "With 3 prefixes in a group" in text


def test_heads_tied_on_q_are_listed_largest_effect_first_whatever_their_order():
    """An exact test's floor gives many heads one q: the table lists the 12 largest C - B among them,
    the same 12 however the rows arrive (it listed an arbitrary dozen, changing between runs)."""
    rng = np.random.default_rng(0)
    heads = pd.DataFrame({"model": "m", "prefix_len": 32, "segment": "task", "layer": np.arange(30) // 8,
                          "head": np.arange(30) % 8, "quantity": "capture", "mean_diff": rng.uniform(0, 1, 30),
                          "q": 3.5e-7, "q_crossed": 0.6})
    want = set(heads.nlargest(12, "mean_diff").index)
    for seed in range(3):
        shuffled = heads.sample(frac=1, random_state=seed)
        listed = heads_section_module._listed(shuffled, ["q"])
        assert set(listed.index) == want
        assert list(listed.mean_diff) == sorted(listed.mean_diff, reverse=True)
