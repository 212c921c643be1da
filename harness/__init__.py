"""Prompt-prefix contamination harness: how much an unrelated prefix changes a model's output,
and where inside the model the change happens.

The public API, for notebooks and scripts (``import harness as H``)::

    cfg = H.compose(["experiment=quick"])           # the config `harness sweep experiment=quick` runs
    run_dir = H.run(cfg, "outputs/runs/mine")       # the sweep, start to finish
    tables = H.load_run(run_dir)                    # conditions, attention, noise, manifest
    H.compare_groups(tables.conditions, "output_kl")   # C minus B, prompts and prefixes random
    figs = H.make_figures(tables.conditions, tables.attention, tables.noise)

Names are imported on first use, so ``import harness`` stays fast (the command line's ``--help``
does not load torch). The package's stages, bottom to top: ``inputs`` (texts, prefix banks,
assembly, conditions, chat placements, isolation), ``model`` (loading, the attention probe,
decoding, KV caches), ``measure`` (the engine, the metric registry, records, the noise floor),
``analysis`` (statistics), ``reporting`` (figures and the report), ``runs`` (experiments, run
directories, tables, the sweep); ``cli`` is the command line. Each stage's ``__init__`` says what is
public there. The demo models ship in ``assets``; their trainer is a distribution of its own
(``demo_training`` in the repository).
"""

from __future__ import annotations

from harness.exports import lazy_exports

__version__ = "0.1.0"

# name -> the module that defines it
_API = {
    # running and loading
    "compose": "harness.config", "validate": "harness.config", "HarnessError": "harness.errors",
    "run": "harness.runs.runner", "SweepFailed": "harness.runs.runner", "Experiment": "harness.runs.experiment",
    "load_run": "harness.runs.reading", "load_runs": "harness.runs.reading", "load_noise": "harness.runs.reading",
    "RunDir": "harness.runs.rundir", "collect": "harness.runs.collect",
    # statistics (DataFrame in, DataFrame out)
    "drift_summary": "harness.analysis.descriptive", "contrast": "harness.analysis.descriptive",
    "layer_profile": "harness.analysis.descriptive", "head_map": "harness.analysis.descriptive",
    "weighted_segment_mean": "harness.analysis.descriptive", "bootstrap_ci": "harness.analysis.descriptive",
    "benjamini_hochberg": "harness.analysis.descriptive",
    "compare_groups": "harness.analysis.crossed", "prefix_permutation_test": "harness.analysis.crossed",
    "two_way_bootstrap": "harness.analysis.crossed", "head_contrasts": "harness.analysis.heads",
    "rate_summary": "harness.analysis.rates", "survival": "harness.analysis.curves",
    "word_rates": "harness.analysis.obeying", "triple_contrasts": "harness.analysis.obeying",
    "obey_rates": "harness.analysis.obeying", "ceiling_table": "harness.analysis.obeying",
    "ceiling": "harness.analysis.curves", "step_profile": "harness.analysis.curves",
    "isolation_summary": "harness.analysis.summaries",
    # figures and the report
    "make_figures": "harness.reporting.figure_set", "hit_rates": "harness.reporting.figure_set",
    "mass_sources": "harness.reporting.figure_set", "report_markdown": "harness.reporting.report",
    "write_outputs": "harness.runs.outdir",
    # the metric registry
    "METRICS": "harness.measure.metrics",
}
__all__ = sorted(_API)


__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
