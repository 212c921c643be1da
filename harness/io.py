"""Files at the edge: atomic writes of parquet, JSON and text, checksums, and reading a table
with an error that names the file. Every stage that writes a file goes through here, so a
crash never leaves a half-written file behind."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from harness.errors import HarnessError

_UMASK = os.umask(0)
os.umask(_UMASK)  # read once: temporary files are created 0600, results should follow the umask


def atomic_write(path: Path, write) -> None:
    """Call ``write(temporary path)``, then rename the result to ``path``; a write the disk or the
    permissions refuse is a :class:`HarnessError` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.close(fd)  # inside the try: a SIGTERM handled here still removes the temporary file
        write(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise HarnessError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        # a writer that fails while cleaning up after a refused write (matplotlib's PDF backend on a
        # full disk raises AttributeError from its stream) still means the disk refused it
        refused = exc.__context__ if isinstance(exc, Exception) else None
        if isinstance(refused, OSError):
            raise HarnessError(f"cannot write {path}: {refused.strerror or refused}") from None
        raise


def write_parquet(df: pd.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False))


def write_json(obj, path: Path) -> None:
    text = json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_text(text: str, path: Path) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_table(path: Path) -> pd.DataFrame:
    """A parquet table; a missing or damaged file is a one-line error naming it."""
    path = Path(path)
    if not path.is_file():
        raise HarnessError(f"{path}: no such table")
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for damaged files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HarnessError(f"{path} is not a readable parquet table ({first}); regenerate it with "
                           f"`harness resume` on its run directory") from None


def figure_files_in(folder: Path) -> list[Path]:
    """The files a figure writer leaves in ``folder``: drawn figures, and temporary files a kill cut off."""
    return sorted([p for p in Path(folder).glob("fig*") if p.suffix in (".pdf", ".png")]
                  + list(Path(folder).glob(".fig*.tmp")))
