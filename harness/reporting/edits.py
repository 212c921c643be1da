"""Telling a page the harness wrote from one a user has edited since.

``report.md`` (and every page a command writes, :func:`write_page`) ends with an HTML comment
(invisible when rendered) holding the sha256 of the text above it. A command about to replace or
remove the page (a redraw, a resume that replaced the tables) checks it first: a page whose text no longer matches, or that has no stamp (a user's own, or one of
an older version), is kept under another name, never overwritten, and the command says where.
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

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
