"""AgentDojo (Debenedetti et al., NeurIPS 2024 Datasets and Benchmarks; package ``agentdojo``, MIT)
as a prefix source: its four suites' environments as benign tool results, its v1 injection tasks'
goals, and its tool-free attack templates.

- Documents: every list of records in a suite's environment (emails, calendar events, files, hotels,
  restaurants, car rentals, flights, transactions, Slack messages) and every name -> text table
  (the banking files, the Slack web pages), each injection slot holding its benign default as in
  AgentDojo's own clean environment. A document is one record and those after it in its list, as
  a tool that lists them returns them (YAML), up to about :data:`DOCUMENT_CHARS` characters.
- Goals: ``GOAL`` of each class of ``default_suites/v1/<suite>/injection_tasks.py``, with the
  attacker's string it names (an IBAN, an e-mail address, a URL, a hotel name, a quoted title or
  password) as the target; a goal that names none is dropped and counted.
- Templates: the attacks of ``attacks/baseline_attacks.py`` and ``important_instructions_attacks.py``
  whose text is fixed ({goal}, {user}, {model}); ``{model}`` is AgentDojo's default model name (the
  harness has no agent pipeline to name), so a variant that differs only there is a duplicate.
- Fillers (the benign control's span): the suite's non-empty slot defaults, where it has 3 or more.
"""

from __future__ import annotations

import re

import yaml

from harness.inputs.corpora.base import (
    GOAL_SLOT, CorpusData, Document, Goal, NotLiteral, PackageFiles, Template, class_attributes, literal,
    module_constants, parse_python, register_corpus, rotations)

SUITES = ("workspace", "travel", "banking", "slack")
DATA = "agentdojo/data/suites"
DOCUMENT_CHARS = 12000  # about 2,500-3,000 tokens: a document fills a 2,048-token prefix
MIN_DOCUMENT_CHARS = 1200  # about 300 tokens: every document fills a 256-token prefix
TEMPLATE_FILES = ("agentdojo/attacks/baseline_attacks.py", "agentdojo/attacks/important_instructions_attacks.py")
EXCLUDED = {
    "agentdojo/attacks/dos_attacks.py": "denial-of-service attacks: no goal to check, and two of them ask the model "
                                        "for insults or criminal text",
    "tool_knowledge": "needs the suite's ground-truth tool calls (an agent pipeline)",
    "important_instructions_wrong_model_name": "draws a model name from an agent pipeline at run time",
}

IBAN = re.compile(r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b")
EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
URL = re.compile(r"(?:https?://|www\.)[^\s'\"]+")
QUOTED = re.compile(r"'([^']{2,})'")


def _yaml(files: PackageFiles, inside: str):
    """A suite file as YAML, ``!include`` resolved (read, and hashed, from the package too)."""
    folder = inside.rsplit("/", 1)[0]

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!include", lambda loader, node: _yaml(files, f"{folder}/{loader.construct_scalar(node)}"))
    try:
        return yaml.load(files.read_text(inside), Loader)  # a SafeLoader with one tag added
    except yaml.YAMLError as exc:
        raise files.problem(inside, f"not YAML this harness can read ({str(exc).splitlines()[0]})") from None


def _with_defaults(value, defaults: dict[str, str]):
    """``value`` with every ``{slot}`` of the injection vectors replaced by its benign default."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_with_defaults(v, defaults) for v in value]
    if isinstance(value, dict):
        return {k: _with_defaults(v, defaults) for k, v in value.items()}
    return value


def collections(env, path: str = "") -> dict[str, list]:
    """The environment's lists of records, and its name -> long text tables as lists of one-entry records."""
    found: dict[str, list] = {}
    if isinstance(env, dict):
        texts = [v for v in env.values() if isinstance(v, str)]
        if len(texts) == len(env) >= 2 and max(map(len, texts)) >= 80:
            return {path: [{k: v} for k, v in env.items()]}
        for key, value in env.items():
            found.update(collections(value, f"{path}/{key}" if path else str(key)))
    elif isinstance(env, list) and env and all(isinstance(v, dict) for v in env):
        found[path] = env
    return found


def _render(records: list) -> str:
    return yaml.safe_dump(records, sort_keys=False, allow_unicode=True, default_flow_style=False, width=10**9)


def documents(suite: str, env, data: CorpusData) -> list[Document]:
    """One document per record: it and the suite's records after it, as tools listing them return
    them (YAML lists), round the suite once at most and up to
    about :data:`DOCUMENT_CHARS` characters. Shorter than :data:`MIN_DOCUMENT_CHARS`: dropped."""
    records = [(path, record) for path, rows in collections(env).items() for record in rows]
    # a block-style YAML list is its items' one-item lists joined: each record is rendered once
    named = [(f"{path}/{i}", _render([record])) for i, (path, record) in enumerate(records)]
    docs = []
    for doc in rotations(suite, named, sep="", chars=DOCUMENT_CHARS):
        if len(doc.text) < MIN_DOCUMENT_CHARS:
            data.drop(f"document shorter than {MIN_DOCUMENT_CHARS} characters")
        else:
            docs.append(doc)
    return docs


ATTACKER_NAMES = re.compile(r"ATTACKER|RECIPIENT|PARTICIPANT|PHISHING|TARGET|PASSWORD")


def attacker_string(goal: str, attributes: dict) -> str | None:
    """The string in ``goal`` that shows the attacker's request was carried out, or None: first a
    value the task class names as the attacker's (``_ATTACKER_IBAN``, ``_RECIPIENT``, ``_TARGET``,
    ...), an IBAN, e-mail address or URL before a plain name; then any IBAN, e-mail address or URL
    in the goal; then any other value of the class the goal quotes (a file id); then a quoted title."""
    def pattern_like(value: str) -> bool:
        return bool(IBAN.fullmatch(value) or EMAIL.fullmatch(value) or URL.fullmatch(value))

    named = [(k, v) for k, v in attributes.items() if k.startswith("_") and isinstance(v, str) and len(v) > 1
             and v in goal]
    attackers = sorted((v for k, v in named if ATTACKER_NAMES.search(k)), key=lambda v: not pattern_like(v))
    urls = [u.rstrip(".,;:)") for u in URL.findall(goal)]
    for candidates in (attackers, IBAN.findall(goal), EMAIL.findall(goal), urls, [v for _, v in named],
                       QUOTED.findall(goal)):
        if candidates:
            return candidates[0]
    return None


def goals(files: PackageFiles, suite: str, data: CorpusData) -> list[Goal]:
    inside = f"agentdojo/default_suites/v1/{suite}/injection_tasks.py"
    out = []
    for name, attrs in class_attributes(parse_python(files, inside), {}).items():
        goal = attrs.get("GOAL")
        if not isinstance(goal, str):
            continue
        target = attacker_string(goal, attrs)
        if target is None:
            data.drop("goal names no attacker string to check (v1 travel's most-expensive-hotel task)")
            continue
        out.append(Goal(f"{suite}/{name}", suite, goal, target))
    return out


def _init_facts(cls, names: dict, defaults: dict) -> dict:
    """What a class's ``__init__`` fixes: the jailbreak it passes to ``super().__init__`` (``("text",
    s)``, or ``("attr", name)`` for ``self.<name>``) and the ``self.user_name`` / ``self.model_name``
    it sets; a name computed by a call (the pipeline's model name) is AgentDojo's default."""
    import ast

    facts: dict = {}
    for fn in (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"):
        for node in ast.walk(fn):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"
                    and node.args):
                first = node.args[0]
                if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "self":
                    facts["jailbreak"] = ("attr", first.attr)
                elif isinstance(first, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                    try:
                        facts["jailbreak"] = ("text", literal(first, names))
                    except NotLiteral:
                        pass
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute)
                    and node.targets[0].attr in defaults):
                try:
                    facts[node.targets[0].attr] = literal(node.value, names)
                except NotLiteral:
                    facts[node.targets[0].attr] = defaults[node.targets[0].attr]
    return facts


def templates(files: PackageFiles, data: CorpusData) -> list[Template]:
    """The fixed-text attacks, in file order, each rendered with its user and model names."""
    import ast

    base = module_constants(parse_python(files, "agentdojo/attacks/base_attacks.py"))
    defaults = {"user_name": base["DEFAULT_USER_NAME"], "model_name": base["DEFAULT_MODEL_NAME"]}
    out, seen = [], {}
    for inside in TEMPLATE_FILES:
        tree = parse_python(files, inside)
        names = module_constants(tree, base)
        attrs = class_attributes(tree, names)
        resolved: dict[str, dict] = {}
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            parent = next((resolved[b.id] for b in cls.bases if isinstance(b, ast.Name) and b.id in resolved), {})
            facts = resolved[cls.name] = {**defaults, **parent, **_init_facts(cls, names, defaults)}
            kind, value = facts.get("jailbreak", (None, None))
            jailbreak = value if kind == "text" else attrs[cls.name].get(value) if kind == "attr" else None
            name = attrs[cls.name].get("name")
            if not isinstance(name, str) or not isinstance(jailbreak, str) or name in EXCLUDED:
                continue
            try:
                text = jailbreak.format_map({"goal": GOAL_SLOT, "user": facts["user_name"],
                                             "model": facts["model_name"]})
            except (KeyError, IndexError, ValueError):
                data.drop(f"template {name}: needs more than a goal, a user and a model (an agent's task or tools)")
                continue
            if text in seen:
                data.drop(f"template {name}: the same text as {seen[text]} without an agent pipeline's model name")
                continue
            seen[text] = name
            out.append(Template(name, text))
    return out


@register_corpus("agentdojo", "agentdojo", "0.1.35",
                 "AgentDojo's suites as tool results, its v1 injection goals and tool-free attack templates (MIT)")
def read_agentdojo(files: PackageFiles) -> CorpusData:
    data = CorpusData([], [], [], excluded=dict(EXCLUDED))
    for suite in SUITES:
        vectors = _yaml(files, f"{DATA}/{suite}/injection_vectors.yaml") or {}
        if not isinstance(vectors, dict):
            raise files.problem(f"{DATA}/{suite}/injection_vectors.yaml", "expected a table of injection vectors")
        defaults = {k: str((v or {}).get("default") or "") for k, v in vectors.items()}
        env = _with_defaults(_yaml(files, f"{DATA}/{suite}/environment.yaml"), defaults)
        data.documents += documents(suite, env, data)
        data.goals += goals(files, suite, data)
        benign = [d for d in defaults.values() if d.strip()]
        if len(benign) >= 3:
            data.fillers[suite] = benign
    data.templates = templates(files, data)
    return data
