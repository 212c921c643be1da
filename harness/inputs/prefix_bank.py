"""Building and checking prefix banks (the JSONL files of group B and C prefixes).

The shipped banks (``data/prefixes.jsonl``, ``data/prefixes_assistant.jsonl``) were written by hand
for this project; see ``data/PREFIXES.md``. This module lets a researcher build their own:
neutral prefixes cut from a plain-text corpus with exact provenance, and instruction-like prefixes
from attack templates padded with filler prose. ``check_bank`` validates any bank. The command
line is ``harness build-prefixes neutral|instruction ...`` (``main``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
from pathlib import Path

from harness.errors import HarnessError
from harness.inputs.checks import CHECKS, bad_forms, target_check
from harness.inputs.texts import GROUP_OF_KIND, PREFIX_FIELDS, PREFIX_INFO_FIELDS, DuplicateKey, json_line
from harness.io import write_text

KINDS = tuple(GROUP_OF_KIND)
REQUIRED = ("id", "kind", "text", "source", "licence")
_PARAGRAPH = re.compile(r"(?m)^[ \t]*(\S.*(?:\n[ \t]*\S.*)*)")  # a run of non-blank lines
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*(?=\s|$)")


def normalise(raw: str) -> str:
    """A corpus excerpt as prefix text: hard-wrapped lines joined with one space, paragraphs
    separated by one blank line. ``normalise(corpus[start:end]) == record["text"]`` for a record
    built by ``neutral_bank_from_corpus`` with ``span == [start, end]``."""
    return "\n\n".join(" ".join(line.strip() for line in m.group(1).splitlines())
                       for m in _PARAGRAPH.finditer(raw))


def paragraph_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) character offsets of each paragraph (a maximal run of non-blank lines)."""
    return [(m.start(1), m.start(1) + len(m.group(1).rstrip())) for m in _PARAGRAPH.finditer(text)]


def _corpus_chunks(text: str, min_chars: int) -> list[tuple[int, int]]:
    """Consecutive, non-overlapping spans of whole paragraphs, each normalising to >= min_chars;
    the last paragraph of a chunk is cut at the first sentence end that reaches min_chars."""
    chunks, paras, i = [], paragraph_spans(text), 0
    while i < len(paras):
        start = paras[i][0]
        while i < len(paras):
            s, e = paras[i]
            i += 1
            if len(normalise(text[start:e])) >= min_chars:
                cut = next((m.end() for m in _SENTENCE_END.finditer(text, s, e)
                            if len(normalise(text[start:m.end()])) >= min_chars), e)
                chunks.append((start, cut))
                break
    return chunks


def neutral_bank_from_corpus(text: str, *, n: int, min_chars: int, seed: int, id_prefix: str, source: str,
                             licence: str, genre: str = "corpus") -> list[dict]:
    """``n`` neutral (group B) prefix records cut from a plain-text corpus.

    The corpus is split into consecutive chunks of whole paragraphs (blank-line separated; the last
    one cut at a sentence end) of at least ``min_chars`` characters; ``n`` of them are drawn with
    ``random.Random(seed)`` and returned in corpus order. Each record's ``span`` holds the [start,
    end) character offsets of its excerpt in ``text``, and ``source`` names the corpus, so every
    prefix can be traced back exactly. Its id is ``{id_prefix}-{chunk index:04d}``, the index among the
    distinct chunks (a passage the corpus repeats is one chunk).
    """
    if n < 1 or min_chars < 1:
        raise HarnessError(f"{source}: n and min_chars must be positive (got n={n}, min_chars={min_chars})")
    chunks, seen = [], set()
    for span in _corpus_chunks(text, min_chars):  # a repeated passage once: a bank of one text under n ids is
        body = normalise(text[slice(*span)])      # one prefix, and a sweep refuses it
        if body not in seen:
            seen.add(body)
            chunks.append(span)
    if len(chunks) < n:
        repeated = len(_corpus_chunks(text, min_chars)) - len(chunks)
        raise HarnessError(f"{source}: only {len(chunks)} distinct chunks of whole paragraphs reach {min_chars} "
                           f"characters" + (f" ({repeated} more repeat one of them)" if repeated else "")
                           + f", {n} requested; use a longer corpus or lower --n / --min-chars")
    picks = sorted(random.Random(seed).sample(range(len(chunks)), n))
    return [{"id": f"{id_prefix}-{k:04d}", "kind": "neutral", "text": normalise(text[slice(*chunks[k])]),
             "genre": genre, "source": source, "licence": licence, "span": list(chunks[k])} for k in picks]


def _sentences(fillers: list[str]) -> list[str]:
    """Whole sentences of the filler prose, whitespace (and hard wrapping) flattened."""
    flat = [" ".join(block.split()) for block in fillers]
    return [s for block in flat for s in re.split(r"(?<=[.!?])\s+|(?<=[.!?][\"')\]\u201d\u2019])\s+", block) if s]


def fill_template(text: str, payload: str, target: str) -> str:
    """A template's text with ``{payload}`` (itself holding ``{target}`` perhaps) and ``{target}``
    filled, and ``{{`` / ``}}`` written as literal braces (so an attack can carry a ``{name}``)."""
    parts = re.split(r"(\{\{|\}\})", text)
    return "".join({"{{": "{", "}}": "}"}.get(part) or part.replace("{payload}", payload).replace("{target}", target)
                   for part in parts).strip()


def instruction_bank_from_templates(templates: list[dict], fillers: list[str], *, n: int, min_chars: int,
                                    seed: int, id_prefix: str = "inj", source: str = "templates",
                                    licence: str = "unspecified", payloads: list[dict] | None = None,
                                    payloads_source: str = "payloads") -> list[dict]:
    """``n`` instruction-like (group C) prefix records from attack templates.

    A template is ``{"style": ..., "text": "... {payload} ..."}`` with optional ``payload`` (the
    text for ``{payload}``), ``target``, ``target_regex`` and ``pair``; ``{target}`` in the text or
    payload is replaced by the target, and ``{{`` / ``}}`` are literal braces. A template whose text has ``{payload}`` but no payload of its
    own is combined with every entry of ``payloads`` (``{"payload": ..., "target": ...}``). ``n``
    distinct template/payload combinations are drawn with ``random.Random(seed)``; each becomes the
    opening of a text (so the injection survives a cut from the head) padded to ``min_chars`` with
    whole filler sentences drawn without repeats. A prefix's own fields (target, target_regex, pair,
    check and forms: :data:`harness.inputs.texts.PREFIX_FIELDS`) are carried over; any other field is
    refused.
    """
    combos = []  # (template index, payload index or -1)
    if any(not isinstance(p, dict) or not isinstance(p.get("payload"), str) for p in payloads or []):
        raise HarnessError(f"{payloads_source}: every payload needs a string field 'payload'")
    payload_fields = (*PREFIX_FIELDS, "payload")
    template_fields = (*payload_fields, "style", "text", *PREFIX_INFO_FIELDS)
    checked = [*((f"{payloads_source}: payload {i + 1}", p, payload_fields) for i, p in enumerate(payloads or [])),
               *((f"{source}: template {i + 1}", t, template_fields) for i, t in enumerate(templates)
                 if isinstance(t, dict))]
    for where, entry, known in checked:
        for key in entry:  # a misspelt "taget" or an unknown "weight" was dropped without a word
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
                raise HarnessError(f"{where} has a field {key!r} build-prefixes does not use"
                                   + (f": did you mean {close[0]!r}?" if close else "")
                                   + f" (its fields: {', '.join(known)})")
        if "payload" in entry and (not isinstance(entry["payload"], str) or not entry["payload"].strip()):
            raise HarnessError(f"{where} has an empty or non-text 'payload': give the text for {{payload}}")
        forms = entry.get("forms", [])
        if bad_forms(forms):
            raise HarnessError(f"{where} has 'forms' {forms!r}: give a list of non-empty strings (the target's "
                               f'inflections, e.g. ["knife", "knives"])')
        for key in ("target", "target_regex"):  # blamed on the built bank otherwise, a file never written
            if key in entry and (not isinstance(entry[key], str) or not entry[key].strip()):
                raise HarnessError(f"{where} has an empty or non-text {key!r}: give the word, or leave the field out")
    texts = [" ".join(p["payload"].split()) for p in payloads or []]
    repeated = next((i for i, t in enumerate(texts) if t in texts[:i]), None)
    if repeated is not None:
        raise HarnessError(f"{payloads_source}: payload {repeated + 1} repeats payload {texts.index(texts[repeated]) + 1}: the "
                           f"bank would hold one attack twice; remove one of them")
    seen: dict[tuple, int] = {}  # the same attack twice would count as two prefixes of the bank
    for t_idx, tpl in enumerate(templates):
        if not isinstance(tpl, dict) or not isinstance(tpl.get("text"), str) or not isinstance(tpl.get("style"), str):
            raise HarnessError(f"{source}: template {t_idx + 1} needs string fields 'style' and 'text'")
        if not tpl["text"].strip():  # nothing but filler would be called an instruction
            raise HarnessError(f"{source}: template {t_idx + 1} has an empty 'text': give the instruction it carries")
        slots = re.sub(r"\{\{|\}\}", "", tpl["text"])  # {{word}} is a literal {word}, no placeholder
        unknown = sorted(set(re.findall(r"\{(\w+)\}", slots)) - {"payload", "target"})
        if unknown:  # it would stay in the prefix's text, braces and all
            raise HarnessError(f"{source}: template {t_idx + 1} has {{{unknown[0]}}}; a template fills {{payload}} "
                               f"and {{target}} only (a literal {{{unknown[0]}}} is written {{{{{unknown[0]}}}}})")
        same = seen.setdefault((" ".join(tpl["text"].split()), str(tpl.get("payload"))), t_idx)
        if same != t_idx:
            raise HarnessError(f"{source}: template {t_idx + 1} repeats template {same + 1} (same text and payload): "
                               f"the bank would hold one attack twice; remove one of them")
        if "{payload}" not in slots or "payload" in tpl:
            combos.append((t_idx, -1))
        elif payloads:
            combos.extend((t_idx, p_idx) for p_idx in range(len(payloads)))
        else:
            raise HarnessError(f"{source}: template {t_idx + 1} has {{payload}} but no payload, and no payloads given")
    if payloads and not any(p_idx >= 0 for _, p_idx in combos):  # each would be dropped, with its target
        raise HarnessError(f"{payloads_source}: no template has a {{payload}} slot of its own to fill, so none of "
                           f"these {len(payloads)} payloads (nor their targets) would be used: leave out "
                           f"--payloads, or give templates with {{payload}} and no 'payload' field")
    if n < 1 or len(combos) < n:
        raise HarnessError(f"{source}: {len(combos)} distinct template/payload combinations, {n} requested; "
                           "add templates or payloads, or lower --n")
    pool = _sentences(fillers)
    rng = random.Random(seed)
    records = []
    for t_idx, p_idx in sorted(rng.sample(combos, n)):
        tpl, extra = templates[t_idx], (payloads[p_idx] if p_idx >= 0 else {})
        fields = {k: v for k, v in {**tpl, **extra}.items() if k in PREFIX_FIELDS}
        payload = str(extra.get("payload", tpl.get("payload", "")))
        if "{target}" in re.sub(r"\{\{|\}\}", "", tpl["text"] + payload) and not fields.get("target"):
            whose = f"{payloads_source}: payload {p_idx + 1}" if p_idx >= 0 else f"{source}: template {t_idx + 1}"
            raise HarnessError(f"{whose}: {{target}} is in the instruction, but neither the template nor its payload "
                               f"gives a target: it would be filled with nothing ({tpl['text'][:60]!r}); give a "
                               f"'target' field, or write a literal {{target}} as {{{{target}}}}")
        text = fill_template(tpl["text"], payload, str(fields.get("target", "")))
        if isinstance(fields.get("target"), str) and fields["target"].strip():  # before fillers could supply it
            try:
                goal = target_check(fields["target"], fields.get("target_regex"), fields.get("check"),
                                    fields.get("forms") or ())
            except ValueError:  # the built bank's check names it
                goal = None
            if goal is not None and not goal.present(text):
                whose = (f"{payloads_source}: payload {p_idx + 1}" if p_idx >= 0 and "target" in extra
                         else f"{source}: template {t_idx + 1}")
                raise HarnessError(f"{whose}: target {fields['target']!r} is not in the instruction it makes "
                                   f"({text[:80]!r}): the prefix would ask for another word than it checks; give "
                                   f"the target the instruction names")
        order = rng.sample(pool, len(pool))
        while len(text) < min_chars and order:
            text += " " + order.pop()
        if len(text) < min_chars:
            raise HarnessError(f"{source}: fillers are too short to pad template {t_idx + 1} to {min_chars} "
                               "characters; add more filler prose")
        records.append({"id": f"{id_prefix}-{t_idx:03d}" + (f"-{p_idx:03d}" if p_idx >= 0 else ""),
                        "kind": "instruction", "text": text, "style": tpl["style"], **fields, "source": source,
                        "licence": licence, "template": t_idx, **({"payload": p_idx} if p_idx >= 0 else {})})
    return records


def check_bank(records: list[dict], *, min_chars: int = 1500, pair_tolerance: float = 0.10,
               check_pairs: bool = True) -> list[str]:
    """Problems with a prefix bank, one line each (empty when it is fine): missing or empty
    fields, duplicate ids, unknown kinds, texts shorter than ``min_chars``, a target that its own
    text does not contain, a bad target_regex, and pairs that are not one neutral plus one
    instruction prefix with the same target and lengths within ``pair_tolerance`` (unless
    ``check_pairs`` is false, for a bank that holds one side of its pairs)."""
    problems, seen, pairs = [], set(), {}
    for i, r in enumerate(records, start=1):
        if not isinstance(r, dict):
            problems.append(f"record {i}: not a JSON object")
            continue
        name = f"record {i} ({r.get('id')!r})"
        for key in REQUIRED + (("genre",) if r.get("kind") == "neutral" else ("style",)):
            if not isinstance(r.get(key), str) or not r[key].strip():
                problems.append(f"{name}: missing or empty field {key!r}")
        if r.get("id") in seen:
            problems.append(f"{name}: duplicate id")
        seen.add(r.get("id"))
        if r.get("kind") not in KINDS:
            problems.append(f"{name}: unknown kind {r.get('kind')!r}; use one of {list(KINDS)}")
        text = r.get("text") if isinstance(r.get("text"), str) else ""
        if len(text) < min_chars:
            problems.append(f"{name}: text has {len(text)} characters, fewer than {min_chars}")
        if "target" in r or "target_regex" in r:  # as a sweep reads them: a target_regex may stand alone
            bad = next((k for k in ("target", "target_regex") if k in r and (not isinstance(r[k], str)
                                                                              or not r[k].strip())), None)
            if bad:
                problems.append(f"{name}: {bad} must be a non-empty string")
            else:
                try:
                    goal = target_check(r.get("target"), r.get("target_regex"), r.get("check"), r.get("forms") or ())
                    if goal is not None and not goal.present(text):
                        problems.append(f"{name}: text does not contain its target "
                                        f"{(r.get('target') or r.get('target_regex'))!r}")
                except ValueError as exc:  # a check the fields do not allow, or a target_regex that does not compile
                    problems.append(f"{name}: {exc}")
        if r.get("pair") is not None and check_pairs:
            pairs.setdefault(r["pair"], []).append(r)
    for pair, members in pairs.items():
        kinds = sorted(str(m.get("kind")) for m in members)
        wants = sorted(str(CHECKS.get(m.get("check") or "contains", CHECKS["contains"]).wants_word)
                       for m in members if m.get("kind") == "instruction")
        if kinds.count("neutral") != 1 or not 1 <= kinds.count("instruction") <= 2 or len(set(wants)) != len(wants):
            problems.append(f"pair {pair!r}: needs one neutral prefix and one instruction (or two: one asking for the "
                            f"word, one forbidding it), has {kinds}")
            continue
        if len({m.get("target") for m in members}) != 1:
            problems.append(f"pair {pair!r}: the two prefixes have different targets")
        sizes = sorted(len(str(m.get("text", ""))) for m in members)  # a pair, or a triple
        if sizes[-1] - sizes[0] > pair_tolerance * max(sizes[-1], 1):
            problems.append(f"pair {pair!r}: lengths {' and '.join(map(str, sizes))} differ by more than "
                            f"{pair_tolerance:.0%}")
    return problems


def _read_text(path: Path) -> str:
    if not path.exists():
        raise HarnessError(f"{path}: file not found")
    if not path.is_file():  # /dev/null, a pipe, a device: no text to cut a bank from
        raise HarnessError(f"{path} is not a regular file (a device, pipe or socket): give a UTF-8 text file")
    try:
        text = path.read_bytes().decode("utf-8")  # no newline translation: spans are offsets into the file
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: not UTF-8 text (bad byte at offset {exc.start}); convert it to UTF-8") from None
    # a byte-order mark (Windows editors write one) is not text: a space in its place keeps every
    # offset after it, and normalising drops it from the first prefix
    return " " + text[1:] if text.startswith("\ufeff") else text


def _read_prose(path: Path, option: str) -> str:
    """A plain-text file of prose; a JSON Lines file (a prefix bank, a template file) is refused:
    its raw JSON would become prefix text."""
    text = _read_text(path)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and all(line.startswith("{") and line.endswith("}") for line in lines):
        raise HarnessError(f"{option} {path} holds JSON lines (a prefix bank or templates?), not prose: give a plain "
                           f"UTF-8 text, paragraphs separated by blank lines")
    return text


def _read_jsonl(path: Path) -> list:
    rows, text = [], _read_text(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json_line(line))
            except json.JSONDecodeError as exc:
                if _one_document(text):  # pretty-printed JSON: valid, but not one object per line
                    raise HarnessError(f"{path} is one JSON document over several lines, not JSON Lines: give one "
                                       f"JSON object per line") from None
                raise HarnessError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            except DuplicateKey as exc:
                raise HarnessError(f"{path}:{lineno}: the field {exc} is given twice in one object; keep one") from None
    return rows


def _one_document(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def write_jsonl_atomic(path: Path, records: list[dict]) -> None:
    """Write one JSON object per line, atomically (temporary file, then rename)."""
    if not path.parent.is_dir():
        raise HarnessError(f"{path}: the output directory {path.parent} "
                           f"{'is a file, not a directory' if path.parent.exists() else 'does not exist'}")
    write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), path)


def build_bank(what: str, out: Path, *, n: int, min_chars: int, seed: int, id_prefix: str | None, licence: str,
               corpus: Path | None = None, genre: str = "corpus", templates: Path | None = None,
               fillers: Path | None = None, payloads: Path | None = None) -> int:
    """``harness build-prefixes``: build a ``neutral`` bank from ``corpus`` or an ``instruction`` bank
    from ``templates`` padded with ``fillers`` (and ``payloads``), check it, write it to ``out``
    atomically; returns the number of prefixes written."""
    if what == "neutral":
        records = neutral_bank_from_corpus(_read_prose(corpus, "--corpus"), n=n, min_chars=min_chars, seed=seed,
                                           id_prefix=id_prefix or corpus.stem, source=corpus.name, licence=licence,
                                           genre=genre)
        digest = hashlib.sha256(corpus.read_bytes()).hexdigest()
        records = [{**r, "source_sha256": digest} for r in records]
    else:
        records = instruction_bank_from_templates(_read_jsonl(templates), [_read_prose(fillers, "--fillers")], n=n,
                                                  min_chars=min_chars, seed=seed,
                                                  id_prefix=id_prefix or templates.stem, source=templates.name,
                                                  licence=licence, payloads=_read_jsonl(payloads) if payloads else None,
                                                  payloads_source=payloads.name if payloads else "payloads")
    problems = check_bank(records, min_chars=min_chars, check_pairs=False)  # one side of any pairs
    if problems:
        raise HarnessError(f"{out}: the built bank has {len(problems)} problem(s), first: {problems[0]}")
    write_jsonl_atomic(out, records)
    return len(records)
