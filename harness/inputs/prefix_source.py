"""Where a run's prefixes come from: a JSONL file (:mod:`harness.inputs.texts`) or a public
benchmark read from its installed package (:mod:`harness.inputs.corpora`), and what a run records
about the source (the corpus's package, version, licence and file hashes: they enter the manifest
and every result's key)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.inputs.texts import Prefix, load_prefixes, select_prefixes


@dataclass
class PrefixSource:
    """The prefixes a run draws, and the facts its manifest records of where they came from
    (``None`` for a prefix file: its texts are in the tables, its path in the config)."""

    prefixes: list[Prefix]
    facts: dict | None = None
    counts: dict = field(default_factory=dict)


def source_problems(path: str | None, corpus: str | None, templates, injection_at: str) -> list[str]:
    """What is wrong with ``prefixes.path`` / ``prefixes.corpus`` / ``prefixes.templates`` and
    ``prefix.injection_at`` together (config validation: nothing is read here)."""
    from harness.inputs.corpora import CORPORA

    names = ", ".join(sorted(CORPORA))
    if path is not None and not path.strip():
        return ["prefixes.path is empty: give a JSONL file (or prefixes=NAME, a shipped set)"]
    if (path is None) == (corpus is None):
        return [f"prefixes needs exactly one of prefixes.path (a JSONL file) and prefixes.corpus (a public benchmark: "
                f"{names}), got {'neither' if path is None else 'both'}"]
    if corpus is not None and corpus not in CORPORA:
        return [f"prefixes.corpus={corpus} is not one of {names}"]
    if corpus is not None:  # before anything starts: a missing package is one line, and no run directory
        import importlib.metadata

        from harness.inputs.corpora.base import INSTALL

        try:
            importlib.metadata.distribution(CORPORA[corpus].distribution)
        except importlib.metadata.PackageNotFoundError:
            return [f"prefixes.corpus={corpus} reads the package {CORPORA[corpus].distribution}, which is not installed "
                    f"here: {INSTALL}"]
    problems = []
    if corpus is None and injection_at != "start":
        problems.append(f"prefix.injection_at={injection_at} sets a span inside a document and a prefix file has no "
                        f"documents: use prefixes=agentdojo, spikee or garak, or prefix.injection_at=start")
    if corpus is None and templates is not None:
        problems.append("prefixes.templates picks a corpus's attack templates and a prefix file has none: drop it")
    elif templates is not None and not list(templates):  # no template: no attack and no control either
        problems.append("prefixes.templates=[] leaves no attack template: name some, or null for all of them")
    return problems


def load_prefix_source(path: str | None, corpus: str | None, per_group: int | None, seed: int,
                       templates=None) -> PrefixSource:
    """The run's prefixes: a file's (``per_group`` of each kind drawn with ``seed``, whole pairs
    where every prefix has one), or a corpus's ``per_group`` matched sets drawn with ``seed``."""
    if corpus is None:
        return PrefixSource(select_prefixes(load_prefixes(path), per_group, seed))
    from harness.inputs.corpora import draw_sets, load_corpus

    data = load_corpus(corpus)
    prefixes = draw_sets(corpus, data, per_group, seed, None if templates is None else list(templates))
    counts = {"documents": len(data.documents), "templates": len(data.templates), "goals": len(data.goals),
              "sets_drawn": len({p.pair for p in prefixes}),
              "templates_drawn": len({p.insertion.attack for p in prefixes})}
    return PrefixSource(prefixes, data.facts, counts)
