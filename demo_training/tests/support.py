"""What the trainer's tests share: where the harness's shipped files are, and small file helpers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.paths import ASSETS_DIR, DATA_DIR

PACKAGE = Path(__file__).resolve().parent.parent  # demo_training/
RECORDS = PACKAGE / "records"  # what the trainer recorded about each shipped model
PREFIXES = DATA_DIR / "prefixes_stories_directives.jsonl"  # the harness's directive set (the cards' first test set)
PROMPTS = DATA_DIR / "prompts_stories_en.jsonl"  # the cards' story openings
DEMO = ASSETS_DIR / "demo-model"  # the plain story model, the start of every obedient story model


def write_jsonl(path: Path, rows) -> Path:
    """``rows`` (dicts, or lines already written as JSON) one per line; returns ``path``."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def shipped_copy(name: str, dest: Path) -> Path:
    """A copy of the shipped model ``harness/assets/NAME`` in ``dest`` with its records
    (``demo_training/records/NAME``) beside it, as harness-train-demo leaves a model it trains."""
    shutil.copytree(ASSETS_DIR / name, dest)
    for record in (RECORDS / name).iterdir():
        shutil.copy(record, dest / record.name)
    return dest
