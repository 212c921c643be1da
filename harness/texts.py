"""Loading task prompts and prefixes from JSONL files.

Each line is one JSON object. Prompts need ``id`` and ``text``; prefixes also need ``kind``
(``neutral`` for group B, ``instruction`` for group C). Any problem is reported with the file and
line number so it can be fixed in an editor.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import HarnessError

PREFIX_KINDS = {"neutral": "B", "instruction": "C"}


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str


@dataclass(frozen=True)
class Prefix:
    id: str
    kind: str  # "neutral" or "instruction"
    text: str

    @property
    def group(self) -> str:
        return PREFIX_KINDS[self.kind]


def _read_jsonl(path: str | Path, required: tuple[str, ...]) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"{path}: file not found")
    rows, seen = [], set()
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HarnessError(f"{where}: not valid JSON ({exc.msg}); each line must be one JSON object") from None
        if not isinstance(obj, dict):
            raise HarnessError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for key in required:
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise HarnessError(f"{where}: missing or empty string field {key!r}")
        if obj["id"] in seen:
            raise HarnessError(f"{where}: duplicate id {obj['id']!r}")
        seen.add(obj["id"])
        rows.append(obj)
    if not rows:
        raise HarnessError(f"{path}: no entries (expected one JSON object per line)")
    return rows


def load_prompts(path: str | Path, limit: int | None = None) -> list[Prompt]:
    """Task prompts from ``path``; ``limit`` keeps the first N."""
    if limit is not None and limit <= 0:
        raise HarnessError(f"prompts.limit must be positive, got {limit}")
    prompts = [Prompt(r["id"], r["text"]) for r in _read_jsonl(path, ("id", "text"))]
    return prompts[:limit] if limit else prompts


def load_prefixes(path: str | Path) -> list[Prefix]:
    rows = _read_jsonl(path, ("id", "kind", "text"))
    for r in rows:
        if r["kind"] not in PREFIX_KINDS:
            raise HarnessError(
                f"{path}: prefix {r['id']!r} has kind {r['kind']!r}; use one of {sorted(PREFIX_KINDS)}"
            )
    return [Prefix(r["id"], r["kind"], r["text"]) for r in rows]
