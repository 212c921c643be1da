"""Loading task prompts and prefixes from JSONL files.

Each line is one JSON object. Prompts need ``id`` and ``text``; prefixes also need ``kind``
(``neutral`` for group B, ``instruction`` for group C) and may carry a ``target`` (the word an
injected instruction is about) or a ``target_regex``, with a ``check`` (what the reply must do with
it: ``contains``, the default, ``absent``, ``starts_with``, ``equals`` or ``regex``) and ``forms`` (the
word's inflections, a list: ``["knife", "knives"]``; see :mod:`harness.inputs.checks`), a ``pair`` id
shared by a matched set (B mentions the word, C asks for it, and a second C may forbid it), and
descriptive fields
(``genre``, ``style``, ``source``, ``licence``). Any problem is reported with the file and line
number so it can be fixed in an editor: files must be UTF-8, and every string must be valid text
(no unpaired surrogates).
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.inputs.checks import TargetCheck, bad_forms, target_check
from harness.paths import broken_link

log = logging.getLogger(__name__)

GROUP_OF_KIND = {"neutral": "B", "instruction": "C"}
KIND_OF_GROUP = {"A": None, **{group: kind for kind, group in GROUP_OF_KIND.items()}}
PREFIX_INFO_FIELDS = ("genre", "style", "source", "licence")


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


@dataclass(frozen=True)
class Insertion:
    """A prefix made of a document with one span set into it (a public benchmark's matched set:
    :mod:`harness.inputs.corpora`). The prefix's ``text`` is the document; at each length the span
    sits at the start, middle or end of the prefix (``prefix.injection_at``) and the document fills
    the rest (:func:`harness.inputs.assembly.place_span`).

    The span is ``span``'s tokens, then ``fill``'s up to the token count of the span of the prefix
    named by ``match`` (the set's attack), so that the prefixes of a set differ only inside it:
    the attack (``span`` alone), the benign passage (``fill`` alone), the mention control (a
    sentence holding the goal's string, then ``fill``)."""

    span: str | None
    fill: str | None = None
    match: str | None = None
    corpus: str = ""
    attack: str = ""  # the attack template's id, the same for every prefix of the set
    goal: str | None = None
    document: str = ""
    mention: str | None = None  # the string a mention control holds (the goal's target)
    role: str = "attack"  # what the span holds: "attack", "benign" (a benign passage), "mention" (the goal's string)


@dataclass(frozen=True)
class Prefix:
    id: str
    kind: str  # "neutral" or "instruction"
    text: str  # the prefix text, or the document an insertion is set into
    target: str | None = None  # the word an injected instruction is about (plain text)
    target_regex: str | None = None  # or as a regular expression
    pair: str | None = None  # shared by a matched set of prefixes about one target
    check: str | None = None  # what the reply must do with the target (harness.inputs.checks)
    forms: tuple[str, ...] = ()  # the target's inflections
    insertion: Insertion | None = None  # a span set into the text as a document (public benchmarks)

    @property
    def group(self) -> str:
        return GROUP_OF_KIND[self.kind]

    @property
    def goal(self) -> TargetCheck | None:
        """What the reply must do (:class:`harness.inputs.checks.TargetCheck`); None without a target."""
        return target_check(self.target, self.target_regex, self.check, self.forms)


def _lines(path: Path) -> list[tuple[int, str]]:
    """The file's lines as text, or a one-line error naming the file and line that is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:  # permission denied, an I/O error
        raise HarnessError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise HarnessError(f"{path}: the file is UTF-16; save it as UTF-8 (one JSON object per line)")
    data = data.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark is harmless
    out = []
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        try:
            out.append((lineno, raw.decode("utf-8")))
        except UnicodeDecodeError as exc:
            raise HarnessError(
                f"{path}:{lineno}: not UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                f"save the file as UTF-8"
            ) from None
    return out


class DuplicateKey(ValueError):
    """A JSON object that names one key twice (json keeps the last, silently)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [k for k, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise DuplicateKey(repr(key))
    return dict(pairs)


def json_line(line: str):
    """One line of a JSONL file, parsed; an object naming a key twice raises :class:`DuplicateKey`
    (json.loads would keep the last value without a word)."""
    return json.loads(line, object_pairs_hook=_unique_keys)


# fields a line may carry as notes only (where it came from; what build-prefixes records of its making)
NOTE_FIELDS = (*PREFIX_INFO_FIELDS, "body_from", "span", "template", "payload", "source_sha256")
PREFIX_FIELDS = ("target", "target_regex", "pair", "check", "forms")  # what a prefix's fields mean to a run (forms: a list)


def _unknown_fields(obj: dict, where: str, used: tuple[str, ...], what: str) -> list[str]:
    """The fields of one line that are neither ``used`` nor notes; refused where a field looks like a
    misspelt one (``taget``: the prefix would run with no target, without a word) or where a prompt
    carries a prefix's field (targets belong to C prefixes)."""
    import difflib

    unknown = [key for key in obj if key not in used and key not in NOTE_FIELDS]
    for key in unknown:
        if what == "prompt" and key in PREFIX_FIELDS:
            raise HarnessError(f"{where}: a prompt has no {key!r} (targets and checks belong to the prefixes that ask "
                               f"for them, in prefixes.path); remove it")
        close = difflib.get_close_matches(key, used, n=1, cutoff=0.75)
        if close:
            raise HarnessError(f"{where}: {key!r} is not a field a {what} has: did you mean {close[0]!r}? (its fields: "
                               f"{', '.join(used)}; notes: {', '.join(NOTE_FIELDS)})")
    return unknown


def _read_jsonl(path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = (),
                what: str = "prompt") -> list[dict]:
    if not str(path).strip():
        raise HarnessError("the path is empty: give a JSONL file (prompts.path= or prefixes.path=)")
    path = Path(path).expanduser()  # a quoted ~/file reaches here unexpanded by the shell
    if path.is_dir():
        raise HarnessError(f"{path} is a directory: give a JSONL file")
    if path.exists() and not path.is_file():  # a pipe, a device: read once, never the same twice
        raise HarnessError(f"{path} is not an ordinary file (a pipe, device or socket): give a JSONL file")
    if path.is_symlink() and not path.exists():  # a link to nothing or a loop of links: not "not found"
        raise HarnessError(f"{path} {broken_link(path)}: give a JSONL file")
    if not path.is_file():
        raise HarnessError(f"{path}: file not found")
    rows, seen, unknown = [], set(), {}
    for lineno, line in _lines(path):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json_line(line)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{where}: not valid JSON ({exc.msg}); each line must be one JSON object") from None
        except DuplicateKey as exc:
            raise HarnessError(f"{where}: the field {exc} is given twice in one object; keep one") from None
        if not isinstance(obj, dict):
            raise HarnessError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for key in required:
            if key in obj and obj[key] is not None and not isinstance(obj[key], str):
                raise HarnessError(f"{where}: field {key!r} must be a string, got {type(obj[key]).__name__} "
                                   f"({obj[key]!r}); quote it")
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise HarnessError(f"{where}: missing or empty string field {key!r}")
        for key in optional:
            if obj.get(key) is not None and not isinstance(obj[key], str):
                raise HarnessError(f"{where}: field {key!r} must be a string, got {type(obj[key]).__name__}")
        for key in (*required, *optional):
            value = obj.get(key)
            if isinstance(value, str):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise HarnessError(f"{where}: field {key!r} holds an unpaired surrogate (a \\ud800-\\udfff "
                                       f"escape without its partner); it is not valid text") from None
        used = (*required, *optional, *(("forms",) if what == "prefix" else ()))
        unknown.update(dict.fromkeys(_unknown_fields(obj, where, used, what)))
        if obj["id"] in seen:
            raise HarnessError(f"{where}: duplicate id {obj['id']!r}")
        seen.add(obj["id"])
        rows.append({**obj, "_where": where})
    if not rows:
        raise HarnessError(f"{path}: no entries (expected one JSON object per line)")
    if unknown:  # kept on the line, read by nothing: said, not dropped without a word
        log.warning("%s: %s %s not a field a %s has (%s): read by nothing", path, ", ".join(map(repr, unknown)),
                    "is" if len(unknown) == 1 else "are", what, ", ".join((*required, *optional)))
    return rows


def load_prompts(path: str | Path, limit: int | None = None) -> list[Prompt]:
    """Task prompts from ``path``; ``limit`` keeps the first N."""
    if limit is not None and limit <= 0:
        raise HarnessError(f"prompts.limit must be positive, got {limit}")
    rows = _read_jsonl(path, ("id", "text"))
    banked = [r for r in rows if r.get("kind") in GROUP_OF_KIND]
    if banked and len(banked) == len(rows):  # every line a prefix: the two paths were swapped
        raise HarnessError(f"{banked[0]['_where']}: this line is a prefix ({banked[0]['kind']!r}), and so is every "
                           f"line of the file: it is a prefix bank, not task prompts; give it as prefixes.path")
    texts: dict[str, tuple[str, str]] = {}  # one text under two ids: two "independent" prompts that are one
    for r in rows:
        first = texts.setdefault(" ".join(r["text"].split()), (r["id"], r["_where"]))
        if first[0] != r["id"]:
            raise HarnessError(f"{r['_where']}: prompt {r['id']!r} has the same text as {first[0]!r} ({first[1]}): "
                               f"one text would count as two prompts in every interval; keep one")
    prompts = [Prompt(r["id"], r["text"]) for r in rows]
    if limit and limit > len(prompts):
        log.warning("prompts.limit=%d, but %s holds only %d prompts: all of them are used", limit, path, len(prompts))
    return prompts[:limit] if limit else prompts


def load_prefixes(path: str | Path) -> list[Prefix]:
    """Prefixes from ``path`` (see the module docstring for the fields)."""
    rows = _read_jsonl(path, ("id", "kind", "text"), (*PREFIX_FIELDS[:-1], *PREFIX_INFO_FIELDS), what="prefix")
    out = []
    for r in rows:
        where = r["_where"]
        if r["kind"] not in GROUP_OF_KIND:
            raise HarnessError(f"{where}: prefix {r['id']!r} has kind {r['kind']!r}; use one of {sorted(GROUP_OF_KIND)}")
        forms = r.get("forms") or []
        if bad_forms(forms):
            raise HarnessError(f"{where}: forms must be a list of non-empty strings (the target's inflections, "
                               f'e.g. ["knife", "knives"])')
        try:  # the check, the regex (compiled as the checks run it) and no invisible characters
            goal = target_check(r.get("target"), r.get("target_regex"), r.get("check"), forms)
        except ValueError as exc:
            raise HarnessError(f"{where}: prefix {r['id']!r}: {exc}") from None
        if goal is not None and not goal.present(r["text"]):  # a rate of a word the prefix never names
            raise HarnessError(f"{where}: prefix {r['id']!r}: its text does not contain its target "
                               f"{(r.get('target') or r.get('target_regex'))!r}: the prefix would ask for (or "
                               f"mention) another word than it is checked for; give the target its text names")
        if forms and not r.get("target"):
            raise HarnessError(f"{where}: forms are the inflections of a target; give the target too")
        # an empty target would drop the check without a word (no target_hit, no obeyed); an empty pair was read
        # as none, and per_group broke every set of the bank
        empty = next((k for k in ("target", "target_regex", "pair") if k in r and isinstance(r[k], str)
                      and not r[k].strip()), None)
        if empty:
            what = "the id of its matched set" if empty == "pair" else "the word to check for"
            raise HarnessError(f"{where}: prefix {r['id']!r} has an empty {empty}: give {what}, or leave the field out")
        out.append(Prefix(r["id"], r["kind"], r["text"], r.get("target") or None, r.get("target_regex") or None,
                          r.get("pair"), r.get("check") or None, tuple(forms)))
    texts: dict[str, tuple[str, str]] = {}  # one text under two ids: counted twice, or B and C at once
    for r in rows:
        first = texts.setdefault(" ".join(r["text"].split()), (r["id"], r["_where"]))
        if first[0] != r["id"]:
            raise HarnessError(f"{r['_where']}: prefix {r['id']!r} has the same text as {first[0]!r} ({first[1]}): "
                               f"one text would count as two prefixes (or be neutral and instruction-like at once); "
                               f"keep one")
    members: dict[str, list[Prefix]] = {}
    for p in out:
        if p.pair:
            members.setdefault(p.pair, []).append(p)
    # a matched pair (or triple) is one neutral prefix beside instruction-like ones; any other set made the
    # analyses read the whole bank as unpaired without a word
    odd = [ps for ps in members.values() if len(ps) >= 2 and sum(p.kind == "neutral" for p in ps) != 1]
    if odd:
        ps = odd[0]
        neutral = sum(p.kind == "neutral" for p in ps)
        raise HarnessError(f"{path}: pair {ps[0].pair!r} ({', '.join(repr(p.id) for p in ps)}) holds {neutral} neutral "
                           f"prefix(es): a matched pair (or triple) sets one neutral prefix beside instruction-like "
                           f"ones; give each set one neutral member, or remove the field")
    alone = [ps[0] for ps in members.values() if len(ps) < 2]
    if alone:  # a matched pair compares its members: one alone is a missing line or a misspelt pair
        raise HarnessError(f"{path}: prefix {alone[0].id!r} names pair {alone[0].pair!r}, which no other prefix of the "
                           f"file has ({len(alone)} such); give its partner the same pair, or remove the field")
    unset = [r for r, p in zip(rows, out) if not p.pair]
    if unset and len(unset) < len(out):  # prefixes.per_group draws whole sets only when every prefix is in one
        raise HarnessError(f"{unset[0]['_where']}: prefix {unset[0]['id']!r} names no pair, while "
                           f"{len(out) - len(unset)} of the file's {len(out)} prefixes do ({len(unset)} without): a "
                           f"paired bank is drawn and compared in whole sets; give every prefix its set's pair, or "
                           f"remove the field from all")
    return out


def select_prefixes(prefixes: list[Prefix], per_group: int | None, seed: int) -> list[Prefix]:
    """A reproducible random subset of ``per_group`` prefixes of each kind (all when None), in the
    file's order. When every prefix belongs to a matched pair, whole pairs are drawn."""
    if per_group is None:
        return list(prefixes)
    fewest = min((sum(p.kind == kind for p in prefixes) for kind in GROUP_OF_KIND
                  if any(p.kind == kind for p in prefixes)), default=0)
    if per_group > fewest:
        log.warning("prefixes.per_group=%d, but the prefixes hold only %d of a kind: all of them are used", per_group,
                    fewest)
    rng = random.Random(seed)
    if all(p.pair for p in prefixes):
        pairs = sorted({p.pair for p in prefixes})
        chosen = set(rng.sample(pairs, min(per_group, len(pairs))))
        drawn = [p for p in prefixes if p.pair in chosen]
        counts = ", ".join(f"{sum(p.kind == kind for p in drawn)} {kind}" for kind in GROUP_OF_KIND)
        log.info("prefixes.per_group=%d draws %d whole matched set(s) (a pair's prefixes together): %d prefixes, %s",
                 per_group, len(chosen), len(drawn), counts)
        return drawn
    chosen = set()
    for kind in GROUP_OF_KIND:
        ids = [p.id for p in prefixes if p.kind == kind]
        chosen |= set(rng.sample(ids, min(per_group, len(ids))))
    return [p for p in prefixes if p.id in chosen]
