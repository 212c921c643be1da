"""Reporting: figures drawn on an ``Axes`` you pass (``plots``), the standard figure set
(``figure_set``), ``report.md`` (``report``), the claims page (``claims``) and the causal-head page
(``causal_heads``). Files are written only by the ``write_*`` functions.

Public here (each imported on first use):

- ``figure_set``: ``make_figures``, ``hit_rates``, ``mass_sources``
- ``figure_names``: ``FIGURE_NAMES`` (the standard figures' file stems; no plotting imports)
- ``report``: ``report_markdown``, ``write_outputs``
- ``claims``: ``write_claims``
- ``causal_heads``: ``write_causal_report``
"""

from harness.exports import lazy_exports

_API = {
    "make_figures": "harness.reporting.figure_set",
    "hit_rates": "harness.reporting.figure_set",
    "mass_sources": "harness.reporting.figure_set",
    "FIGURE_NAMES": "harness.reporting.figure_names",
    "report_markdown": "harness.reporting.report",
    "write_outputs": "harness.reporting.report",
    "write_claims": "harness.reporting.claims",
    "write_causal_report": "harness.reporting.causal_heads",
}
__all__ = sorted(_API)
__getattr__, __dir__ = lazy_exports(__name__, _API, globals())
