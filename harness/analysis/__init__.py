"""Statistics: DataFrame in, DataFrame out; no files, no models. Descriptive summaries and
prompt-level tests (``descriptive``), prompts x prefixes as crossed random factors (``crossed``;
the lead interval and test in ``lead``, from the variance components of ``crossed_variance``),
planning (``design``, ``power``; the chance a test ends decided at Δ in ``decided``), per-head contrasts (``heads``), rates (``rates``,
``rate_intervals``, the rate test's simulated power in ``rate_power``, ``obeying``), curves,
isolation summaries, the three contamination claims (``claims``; the power of claims 1 and 2 in ``claim_power``,
their figure data in ``claim_curves``), the verdicts at a stated smallest effect of interest Δ
(``verdicts``) and the causal-head test (``causal_heads``).

Public here (each imported on first use):

- ``descriptive``: ``drift_summary``, ``contrast``, ``layer_profile``, ``head_map``,
  ``weighted_segment_mean``, ``bootstrap_ci``, ``benjamini_hochberg``
- ``crossed``: ``compare_groups``, ``prefix_permutation_test``, ``two_way_bootstrap``
- ``design``: ``variance_components``, ``design_power``, ``minimum_detectable_effect``
- ``rate_intervals``: ``crossed_rate_interval``, ``rate_difference``
- ``heads``: ``head_contrasts``
- ``rates``: ``rate_summary``
- ``obeying``: ``word_rates``, ``obey_rates``, ``triple_contrasts``, ``ceiling_table``
- ``curves``: ``survival``, ``ceiling``, ``step_profile``
- ``summaries``: ``isolation_summary``
- ``claims``: ``seed_claims``
- ``verdicts``: ``deltas_for`` (each measure's Δ), ``decide`` (an interval's verdict at Δ)
"""

from harness.exports import lazy_exports

_API = {
    "drift_summary": "harness.analysis.descriptive",
    "contrast": "harness.analysis.descriptive",
    "layer_profile": "harness.analysis.descriptive",
    "head_map": "harness.analysis.descriptive",
    "weighted_segment_mean": "harness.analysis.descriptive",
    "bootstrap_ci": "harness.analysis.descriptive",
    "benjamini_hochberg": "harness.analysis.descriptive",
    "compare_groups": "harness.analysis.crossed",
    "prefix_permutation_test": "harness.analysis.crossed",
    "two_way_bootstrap": "harness.analysis.crossed",
    "variance_components": "harness.analysis.design",
    "design_power": "harness.analysis.design",
    "minimum_detectable_effect": "harness.analysis.design",
    "crossed_rate_interval": "harness.analysis.rate_intervals",
    "rate_difference": "harness.analysis.rate_intervals",
    "head_contrasts": "harness.analysis.heads",
    "rate_summary": "harness.analysis.rates",
    "word_rates": "harness.analysis.obeying",
    "obey_rates": "harness.analysis.obeying",
    "triple_contrasts": "harness.analysis.obeying",
    "ceiling_table": "harness.analysis.obeying",
    "survival": "harness.analysis.curves",
    "ceiling": "harness.analysis.curves",
    "step_profile": "harness.analysis.curves",
    "isolation_summary": "harness.analysis.summaries",
    "seed_claims": "harness.analysis.claims",
    "deltas_for": "harness.analysis.verdicts",
    "decide": "harness.analysis.verdicts",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
