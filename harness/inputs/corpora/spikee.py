"""spikee (Reversec's prompt-injection kit; package ``spikee``, Apache-2.0) as a prefix source:
jailbreak templates with an ``<INSTRUCTION>`` slot, crossed with instructions judged by a canary.

spikee ships attacks, not documents (its seed sets hold two), so its attacks sit in the harness's
own 42 neutral texts (``harness/data/prefixes.jsonl``, written for this project, CC0). Only the seed
sets of :data:`SEED_SETS` are read; the others are excluded by name (:data:`EXCLUDED`). An
instruction is kept where spikee judges it by a canary string that a short reply can hold (at most
:data:`MAX_TARGET_CHARS` characters): the target is that string, found as spikee's canary judge
finds it (as written, anywhere in the reply). spikee's ``seeds-investment-advice-fp`` set, benign
questions that read like instructions, is the corpus ``spikee-fp``: group B only, a false-positive
control for detectors.
"""

from __future__ import annotations

import re

from harness.inputs.corpora.base import (
    GOAL_SLOT, CorpusData, Document, Goal, PackageFiles, Template, read_json_lines, register_corpus)
from harness.inputs.texts import load_prefixes
from harness.paths import DATA_DIR

DATASETS = "spikee/data/workspace/datasets"
SEED_SETS = ("seeds-cybersec-2026-01", "seeds-llm-mailbox", "seeds-mini-test")
FALSE_POSITIVES = "seeds-investment-advice-fp"
EXCLUDED = {
    "seeds-harmful-instructions-only": "harmful instructions",
    "seeds-wildguardmix-harmful": "harmful requests (WildGuardMix)",
    "seeds-wildguardmix-harmful-fp": "paired with harmful requests (WildGuardMix)",
    "seeds-toxic-chat": "toxic chat",
    "seeds-in-the-wild-jailbreak-prompts": "unvetted jailbreaks collected online, some offensive",
    "seeds-simsonsun-high-quality-jailbreaks": "jailbreaks written to elicit harmful content",
    "seeds-investment-advice": "judged by an LLM (no string to check)",
    "seeds-sysmsg-extraction-2025-04": "judged by a regex over a system message the harness does not set",
    "zzz_LEGACY_seeds-cybersec-2025-04": "superseded by seeds-cybersec-2026-01",
}
MAX_TARGET_CHARS = 80
FAMILY = "spikee"
SLOT = "<INSTRUCTION>"


def own_documents() -> list[Document]:
    """The harness's own neutral texts, as the documents spikee's attacks are set into."""
    return [Document(f"bank/{p.id}", FAMILY, p.text) for p in load_prefixes(DATA_DIR / "prefixes.jsonl")
            if p.kind == "neutral"]


def _templates(files: PackageFiles, data: CorpusData) -> list[Template]:
    out, seen = [], set()
    for seeds in SEED_SETS:
        inside = f"{DATASETS}/{seeds}/jailbreaks.jsonl"
        for row in read_json_lines(files, inside):
            text, name = row.get("text"), row.get("id")
            if not isinstance(text, str) or not isinstance(name, str) or text.count(SLOT) != 1:
                data.drop("jailbreak without exactly one <INSTRUCTION> slot")
                continue
            if name not in seen:
                seen.add(name)
                out.append(Template(name, text.replace(SLOT, GOAL_SLOT)))
    return out


def _goals(files: PackageFiles, data: CorpusData) -> list[Goal]:
    out, seen = [], set()
    for seeds in SEED_SETS:
        for row in read_json_lines(files, f"{DATASETS}/{seeds}/instructions.jsonl"):
            name, text, canary = row.get("id"), row.get("instruction"), row.get("judge_args")
            if row.get("judge_name") != "canary" or not isinstance(canary, str) or not canary.strip():
                data.drop("instruction not judged by a canary string")
            elif len(canary) > MAX_TARGET_CHARS:
                data.drop(f"canary longer than {MAX_TARGET_CHARS} characters (no short reply holds it)")
            elif isinstance(name, str) and isinstance(text, str) and name not in seen:
                seen.add(name)
                # spikee's canary judge: the string as written, anywhere in the reply
                out.append(Goal(name, FAMILY, text, canary, re.escape(canary)))
    return out


@register_corpus("spikee", "spikee", "0.9.2",
                 "spikee's jailbreak templates x canary-judged instructions, in the harness's own neutral texts "
                 "(Apache-2.0)")
def read_spikee(files: PackageFiles) -> CorpusData:
    data = CorpusData(own_documents(), [], [], excluded=dict(EXCLUDED))
    data.templates, data.goals = _templates(files, data), _goals(files, data)
    return data


@register_corpus("spikee-fp", "spikee", "0.9.2",
                 "spikee's benign inputs that read like instructions (investment questions), in the harness's own "
                 "neutral texts: group B only, a false-positive control (Apache-2.0)")
def read_spikee_false_positives(files: PackageFiles) -> CorpusData:
    data = CorpusData(own_documents(), [Template("benign-question", GOAL_SLOT)], [], benign_only=True,
                      excluded=dict(EXCLUDED))
    for row in read_json_lines(files, f"{DATASETS}/{FALSE_POSITIVES}/standalone_user_inputs.jsonl"):
        if isinstance(row.get("id"), str) and isinstance(row.get("text"), str) and row["text"].strip():
            data.goals.append(Goal(row["id"], FAMILY, row["text"], target=""))
    return data
