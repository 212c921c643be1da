"""Telling a file the harness wrote from one a user has edited since.

``report.md`` (and every page a command writes, :func:`write_page`) ends with an HTML comment
(invisible when rendered) holding the sha256 of the text above it. A command about to replace or
remove the page (a redraw, a resume that replaced the tables) checks it first: a page whose text no
longer matches, or that has no stamp (a user's own, or one of an older version), is kept under
another name, never overwritten, and the command says where.

Tables, figures and text files cannot carry a stamp, so a command's writes into a directory go
through :func:`owned_outputs`: it records the sha256 of every file the command wrote there (in
:data:`RECORD`), and the next command writing there first sets aside each recorded file whose bytes
have changed since (a column of notes added to ``claims.parquet``, a line to ``overrides.txt``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

RECORD = ".harness-written.json"  # in a directory commands write into: file -> sha256 of what was written
STAMP = "<!-- written by harness; sha256 of the text above: {} -->"
_STAMP = re.compile(r"<!-- written by harness; sha256 of the text above: ([0-9a-f]{64}) -->\n?\Z")


def stamped(text: str) -> str:
    """``text`` with its stamp as the last line."""
    body = text if text.endswith("\n") else text + "\n"
    return body + STAMP.format(hashlib.sha256(body.encode("utf-8")).hexdigest()) + "\n"


def edited(path: Path) -> bool:
    """Whether the page at ``path`` is not, byte for byte, one the harness stamped (False where absent)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except FileNotFoundError:
        return False
    except (OSError, UnicodeDecodeError):
        return True
    found = _STAMP.search(text)
    if found is None:
        return True
    return hashlib.sha256(text[:found.start()].encode("utf-8")).hexdigest() != found.group(1)


def keep_if_edited(path: Path, why: str = "") -> Path | None:
    """Move an edited page at ``path`` aside (``report.edited.md``, ``report.edited-2.md``, ...) so
    that nothing replaces or removes it, and say so (``why``: what the page describes now); returns
    where it went, or None where there was nothing to keep."""
    path = Path(path)
    if not path.is_file() or not edited(path):
        return None
    kept = set_aside(path)
    log.warning("%s had been edited since the harness wrote it: kept as %s%s", path, kept.name, why)
    return kept


def set_aside(path: Path) -> Path:
    """Rename ``path`` to the first free ``<stem>.edited<suffix>``, ``<stem>.edited-2<suffix>``, ...
    (a user's edits are never written over); returns the new path."""
    n, kept = 1, path.with_name(f"{path.stem}.edited{path.suffix}")
    while kept.exists():
        n += 1
        kept = path.with_name(f"{path.stem}.edited-{n}{path.suffix}")
    path.rename(kept)
    return kept


def write_page(text: str, path: Path) -> Path:
    """Write a page a command owns (``claims.md``, ``detector.md``, ...), stamped, after setting aside
    one the user edited since the command wrote it (a rerun into the same ``--out``)."""
    from harness.io import write_text

    keep_if_edited(Path(path))
    write_text(stamped(text), Path(path))
    return Path(path)


def _output_files(out_dir: Path) -> dict[Path, int]:
    """The files a command may have written in ``out_dir`` (its top level and ``figures/``; not a
    run's ``results/``), each with its modification time: not an edited copy set aside, nor a hidden
    file (this record, the output marker, a write's temporary file)."""
    found = {}
    for folder in (out_dir, out_dir / "figures"):
        if folder.is_dir():
            for path in folder.iterdir():
                if path.is_file() and not path.name.startswith(".") and ".edited" not in path.name:
                    found[path] = path.stat().st_mtime_ns
    return found


def _record(out_dir: Path) -> dict[str, str]:
    try:
        record = json.loads((out_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet (or unreadable): nothing recorded to compare
        return {}
    return {k: v for k, v in record.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(record, dict) else {}


def keep_edited_outputs(out_dir: Path) -> list[Path]:
    """Set aside each file a command recorded writing in ``out_dir`` whose bytes have changed since
    (:func:`set_aside`), saying so; returns where they went."""
    from harness.io import sha256_file

    kept = []
    for name, sha in sorted(_record(Path(out_dir)).items()):
        path = Path(out_dir) / name
        if path.is_file() and sha256_file(path) != sha:
            kept.append(set_aside(path))
            log.warning("%s had been edited since the harness wrote it: kept as %s", path, kept[-1].name)
    return kept


@contextlib.contextmanager
def owned_outputs(out_dir: Path) -> Iterator[None]:
    """Around a command's writes into ``out_dir``: first :func:`keep_edited_outputs`, then, once the
    writes are done, record the sha256 of every file they created or replaced (by modification time:
    files left as they were keep their entries)."""
    from harness.io import sha256_file, write_json

    out_dir = Path(out_dir)
    keep_edited_outputs(out_dir)
    before = _output_files(out_dir)
    yield
    record = {name: sha for name, sha in _record(out_dir).items() if (out_dir / name).is_file()}
    for path, mtime in _output_files(out_dir).items():
        if before.get(path) != mtime:
            record[str(path.relative_to(out_dir))] = sha256_file(path)
    if record:
        write_json(dict(sorted(record.items())), out_dir / RECORD)


def keep_edited_table(path: Path, recorded: str | None) -> Path | None:
    """Move a run's table the user changed since the run wrote it (its sha256 is not the manifest's,
    ``recorded``) aside as ``<name>.edited.parquet`` (``.edited-2``, ...) before the run's own is
    written again or removed, and say so: a column of notes added in a notebook is the user's work.
    Returns where it went."""
    from harness.io import sha256_file

    if not recorded or not Path(path).is_file() or sha256_file(path) == recorded:
        return None
    kept = set_aside(Path(path))
    log.warning("%s had been changed since the run wrote it: kept as %s, and the run's own table written again",
                path, kept.name)
    return kept


def keep_edited_files(directory: Path, tables: dict[str, str | None], page: str) -> None:
    """Before a directory's files are removed or written again (a sweep run fresh over an earlier
    run): set aside each of its ``tables`` (name -> the sha256 recorded when written) the user
    changed, its ``page`` if edited, and every file recorded by :func:`owned_outputs` whose bytes
    changed."""
    for name, recorded in tables.items():
        keep_edited_table(Path(directory) / name, recorded)
    keep_if_edited(Path(directory) / page)
    keep_edited_outputs(Path(directory))
