"""Figure functions draw what they should; `harness figures` is deterministic; the notebook runs."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import nbformat
import numpy as np
import pandas as pd
from nbclient import NotebookClient

from harness.analysis import curves, descriptive
from harness.cli import main
from harness.reporting import plots as F
from harness.reporting.figure_set import mass_sources
from harness.runs.reading import load_runs
from harness.runs.rundir import RunDir
from tests.support import ROOT

NOTEBOOK = ROOT / "notebooks" / "analysis.ipynb"


def test_figure_functions_draw_expected_artists(tiny_run):
    conditions, attention = load_runs([tiny_run])
    fig, ax = plt.subplots()
    F.plot_drift_vs_length(ax, descriptive.drift_summary(conditions, "norm_edit_distance"))
    assert len(ax.lines) == 2 and len(ax.collections) == 2  # B and C lines, two CI bands
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [F.GROUP_NAMES["B"], F.GROUP_NAMES["C"]]
    assert "tokens" in ax.get_xlabel()

    fig, ax = plt.subplots()
    F.plot_layer_profile(ax, descriptive.layer_profile(attention, "kl"), "C")
    assert len(ax.lines) == 2  # one per prefix length
    assert len(ax.lines[0].get_xdata()) == 2  # the tiny model's two layers

    fig, ax = plt.subplots()
    image = F.plot_head_heatmap(ax, descriptive.head_map(attention, "C", "kl"), 24)
    assert image.get_array().shape == (2, 4)  # layers x heads

    fig, ax = plt.subplots()
    F.plot_prefix_mass(ax, descriptive.drift_summary(conditions, "attn_prefix_mass_mean"))
    assert len(ax.lines) == 2

    fig, ax = plt.subplots()
    sources = mass_sources(attention)
    F.plot_mass_sources(ax, sources, "C")
    assert len(ax.patches) == 4 * 2  # four sources x two lengths, stacked
    heights = {}
    for patch, (source, length) in zip(ax.patches, [(s, n) for s in F.MASS_SOURCES for n in (8, 24)]):
        heights[length] = heights.get(length, 0.0) + patch.get_height()
    mass = descriptive.drift_summary(conditions[conditions.group == "C"], "attn_prefix_mass_mean")
    for length, total in heights.items():  # the stacked sources add up to the prefix mass
        assert abs(total - float(mass[mass.prefix_len == length]["mean"].iloc[0])) < 1e-6

    fig, ax = plt.subplots()
    F.plot_drift_vs_length(ax, descriptive.drift_summary(conditions, "norm_edit_distance"),
                           ceiling=curves.ceiling(conditions).iloc[0])
    assert len(ax.lines) == 3 and "ceiling" in ax.get_legend().get_texts()[-1].get_text()

    fig, ax = plt.subplots()
    F.plot_survival(ax, curves.survival(conditions[conditions.group != "A"]), "C")
    assert len(ax.lines) == 2  # one step curve per prefix length
    fig, ax = plt.subplots()
    F.plot_step_profile(ax, curves.step_profile(conditions), "B")
    assert len(ax.lines) == 2 and len(ax.lines[0].get_xdata()) > 1
    plt.close("all")


def test_figures_command_redraws_the_sweeps_figures_byte_for_byte(tiny_run, tmp_path, capsys):
    # the sweep drew them once; `harness figures` draws them again from the stored tables alone
    assert main(["figures", str(tiny_run), "--out", str(tmp_path)]) == 0
    said = capsys.readouterr()
    assert "computing the report's statistics" in said.err and "from 1 run directory" in said.err  # before the wait
    assert said.out.startswith("wrote ")
    files = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and p.name != RunDir.OUT_MARKER)
    assert {f.name for f in files} >= {f"fig{i}_{n}.{ext}" for i, n in
                                       [(1, "edit_distance"), (2, "layer_drift"), (3, "heads_C"), (4, "prefix_mass"),
                                        (6, "survival"), (7, "output_kl_steps")]
                                       for ext in ("pdf", "png")} | {"report.md"}
    for f in files:
        assert (tmp_path / f).read_bytes() == (tiny_run / f).read_bytes(), f
    report = (tmp_path / "report.md").read_text()
    assert "C - B" in report and "figures/fig1_edit_distance.png" in report
    assert "prompts x prefixes" in report and "capture" in report and "redistribution" in report


def test_sweep_writes_figures_and_report(tiny_run):
    run_dir = tiny_run
    assert (run_dir / "figures" / "fig1_edit_distance.pdf").is_file()
    report = (run_dir / "report.md").read_text()
    # 5 prefixes per group: the report says which interval to read
    assert "With 5 prefixes in a group, the prompts x prefixes interval rests on few prefixes" in report
    assert "power at Δ" in report and "verdict at Δ" in report and "power at 1 prefix SD" not in report
    # no test known to exceed its level beside the valid ones (issue 65, item 5)
    assert "| prefix permutation p |" not in report and "is not printed" in report
    # the answer first: the report's first picture is figure 0, C - B with its intervals, and its numbers are a table
    images = [line for line in report.splitlines() if line.startswith("![")]
    assert images[0] == "![fig0_c_minus_b](figures/fig0_c_minus_b.png)" and images.count(images[0]) == 1
    assert report.index(images[0]) < report.index("## Examples")
    forest = pd.read_parquet(run_dir / "contrasts.parquet")
    assert set(forest.comparison) == {"C - B", "B - A", "C - A"} and (forest.resampled == "prompts x prefixes").all()


def test_figure_zero_marks_zero_and_delta_and_draws_c_minus_b_first():
    rows = pd.DataFrame({"prefix_len": [8, 8, 8, 24, 24, 24], "comparison": ["C - B", "B - A", "C - A"] * 2,
                         "estimate": [0.1, 0.5, 0.6, 0.2, 0.7, 0.9], "ci_low": [-0.1, 0.4, 0.5, float("nan"), 0.6, 0.8],
                         "ci_high": [0.3, 0.6, 0.7, float("nan"), 0.8, 1.0]})
    fig, ax = plt.subplots()
    F.plot_forest(ax, rows, "edit distance (norm.)", delta=0.25)
    vertical = sorted(line.get_xdata()[0] for line in ax.lines if len(set(line.get_xdata())) == 1
                      and line.get_linestyle() in ("-", ":") and len(line.get_xdata()) == 2)
    assert vertical == [-0.25, 0.0, 0.25]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["8", "24"] and ax.get_ylim()[0] > ax.get_ylim()[1]  # shortest length on top
    handles, names = ax.get_legend_handles_labels()
    assert names[0].startswith("C - B") and "C - B: no interval (see the report)" in names
    plt.close(fig)


def test_notebook_runs_top_to_bottom(tiny_run, monkeypatch):
    monkeypatch.setenv("HARNESS_RUN_DIR", str(tiny_run))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 4
    assert len(set(images)) == len(images)  # each figure once
    displayed = sum(c.source.count('display(figs["') for c in nb.cells if c.cell_type == "code" and c.get("outputs"))
    assert len(images) <= displayed
    assert any(str(tiny_run) in o.get("text", "") for o in outputs)


def test_notebook_finds_a_demo_run_without_being_told(tiny_run, tmp_path):
    """With no RUN_DIR, the newest run under outputs/ (where `make demo` writes) is the one read."""
    import shutil
    import subprocess
    import sys

    nb = nbformat.read(NOTEBOOK, as_version=4)
    setup = nb.cells[2].source.split("runs = [")[0]  # the imports and latest_run(), nothing run yet
    shutil.copytree(tiny_run, tmp_path / "outputs" / "demo" / "default")
    (tmp_path / "notebooks").mkdir()
    probe = setup.replace("%matplotlib inline", "") + "\nprint(latest_run())"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path / "notebooks", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("outputs/demo/default"), out.stdout


def test_notebook_uses_the_public_api_only():
    """The notebook imports ``harness`` and nothing below it: what it calls is the public API."""
    import re

    import harness

    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert re.findall(r"^[ \t]*((?:from|import) harness\b.*)$", code, flags=re.M) == ["import harness as H"]
    used = set(re.findall(r"\bH\.(\w+)", code))
    assert used and used <= set(harness.__all__), used - set(harness.__all__)


def test_public_api_names_resolve():
    import harness

    assert all(callable(getattr(harness, name)) or name == "METRICS" for name in harness.__all__)


def test_figures_on_a_damaged_table_is_one_line(tiny_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(tiny_run, copy)
    (copy / "conditions.parquet").write_bytes((copy / "conditions.parquet").read_bytes()[:100])
    assert main(["figures", str(copy)]) == 2  # its sha256 is not the manifest's: refused before it is read
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "conditions.parquet is not the table this run" in err[0]
    assert main(["figures", str(copy), "--trust-damaged"]) == 2  # read anyway: it does not parse
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and "conditions.parquet is not a readable parquet table" in err[-1]


def test_hit_rate_figure_names_its_interval():
    import pandas as pd

    # C hits in 3 of 4 conditions, B never: one interval method for both
    df = pd.DataFrame({"model": "m", "isolation": "none", "prompt_id": ["p0", "p1"] * 4,
                       "group": ["C"] * 4 + ["B"] * 4, "prefix_id": ["c1", "c1", "c2", "c2", "b1", "b1", "b2", "b2"],
                       "prefix_len": 8, "target_hit": [True, True, True, False] + [False] * 4})
    from harness.analysis.obeying import word_rates

    rates = word_rates(df.assign(check=["contains"] * 4 + [None] * 4, target_hit_a=False, target="w",
                                 placement="raw"))
    assert set(rates.group) == {"asked", "mentioned", "A (base rate)"}
    assert all(m.startswith("Wilson, crossed, ") for m in rates.ci_method)
    fig, ax = plt.subplots()
    F.plot_hit_rate(ax, rates)
    assert len(ax.containers) == 2  # one errorbar per role; A is a band
    # words a newcomer reads (the method is the report's and the glossary's), the legend below the axes
    assert ax.get_legend().get_title().get_text() == "95% intervals, prompts and prefixes random"
    assert ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).y0 < 0
    # roles side by side at each length, so that equal rates (lines at 0) are all seen
    xs = [tuple(np.round(c.lines[0].get_xdata(), 6)) for c in ax.containers]
    assert len(set(xs)) == 2 and all(len(x) == 1 for x in xs)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "A's 95% CI" in legend  # the grey band says what it is
    assert ax.get_title() == "Is the prefix's word in the reply?"  # what it plots, not "obeyed"
    plt.close("all")


def test_side_by_side_figures_name_the_model_on_every_row(tiny_run):
    from harness.reporting.figure_set import make_figures

    conditions, attention = load_runs([tiny_run])
    twin = lambda df: pd.concat([df, df.assign(model="other-model")], ignore_index=True)  # noqa: E731
    figures = make_figures(twin(conditions), twin(attention))
    for name in ("fig1_edit_distance", "fig2_layer_drift", "fig4_prefix_mass", "fig6_survival",
                 "fig7_output_kl_steps"):
        axes = figures[name].axes
        rows = [ax for ax in axes if ax.get_title()]
        for model in ("builtin:tiny-llama", "other-model"):
            assert any(model in ax.get_title() for ax in rows), (name, model)
        assert all(("builtin:tiny-llama" in ax.get_title()) != ("other-model" in ax.get_title()) for ax in rows), name
    heads = figures["fig3_heads_C"].axes
    assert {"builtin:tiny-llama", "other-model"} <= {ax.get_ylabel().split("\n")[0] for ax in heads}
    plt.close("all")


def test_ceiling_figure_puts_the_direct_ceiling_first_with_a_line_per_length():
    import numpy as np
    import pandas as pd

    from harness.analysis.obeying import ceiling_table
    from tests.analysis.test_obeying import placed

    both = pd.concat([placed("system", lambda p, w, k: w == 0), placed("direct", lambda p, w, k: True),
                      placed("document", lambda p, w, k: p == 0).assign(prefix_len=32)], ignore_index=True)
    table = ceiling_table(pd.concat([both, both.assign(prefix_len=64)], ignore_index=True))
    fig, ax = plt.subplots()
    F.plot_ceiling(ax, table)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["direct\n(ceiling)", "document", "system"]
    assert len(ax.containers) == 2  # one errorbar series per length
    points = ax.containers[0].lines[0].get_ydata()  # 32 tokens: direct, document, system
    assert np.allclose(points, [1.0, 1 / 4, 1 / 3])
    dotted = [line for line in ax.lines if line.get_linestyle() == ":"]
    assert len(dotted) == 2 and all(np.allclose(line.get_ydata(), 1.0) for line in dotted)
    plt.close("all")


def test_the_notebook_is_saved_with_its_outputs():
    """On a code host or in the docs site a reader sees the notebook's tables and figures (it had 0
    of 18 cells with output); `make docs` executes it again (notebooks/execute.py)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    figures = [o for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert not errors and len(figures) >= 5
    assert sum(bool(c.get("outputs")) for c in code) >= len(code) // 2
    assert "RUN_DIRS = None" in code[0].source  # the runs were given to the execution only


def test_the_benchmarks_notebook_runs_on_the_tracked_results_and_is_saved_with_its_figures():
    """Issue 70, item 6: a second notebook for the public-benchmark and detector pages, executed in CI
    (here) and saved with its outputs for the docs site."""
    path = ROOT / "notebooks" / "benchmarks.ipynb"
    saved = nbformat.read(path, as_version=4)
    images = [o for c in saved.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 2, "save it with its outputs: python notebooks/execute.py notebooks/benchmarks.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert "focus_score" in str(outputs) and "attack - mention" in str(outputs)


def _four_figures() -> dict:
    out = {}
    for i in range(4):
        fig, ax = plt.subplots(1, i + 1)  # 1 to 4 axes: the halves are split by axes drawn
        for a in np.atleast_1d(ax):
            a.plot([0, 1], [0, i])
        out[f"f{i}"] = fig
    return out


def test_figures_saved_by_a_forked_child_are_the_serial_files_and_a_failed_child_is_redone(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(F, "_can_fork", lambda: False)
    with F.figures_saved(_four_figures(), tmp_path / "serial") as serial:
        pass
    monkeypatch.setattr(F, "_can_fork", lambda: True)
    with F.figures_saved(_four_figures(), tmp_path / "forked") as forked:
        pass
    assert [p.name for p in serial] == [p.name for p in forked] == [f"f{i}.{e}" for i in range(4) for e in ("pdf", "png")]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(serial, forked))

    parent, real = os.getpid(), F.save_figure

    def refused_in_the_child(fig, stem):
        if os.getpid() != parent:
            raise OSError("no space left on device")
        return real(fig, stem)

    monkeypatch.setattr(F, "save_figure", refused_in_the_child)
    with F.figures_saved(_four_figures(), tmp_path / "redone") as redone:
        pass
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(serial, redone))  # the parent saved them again
    assert sorted(p.name for p in (tmp_path / "redone").iterdir()) == sorted(p.name for p in redone)  # no temp files
