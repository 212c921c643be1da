"""Files at the edge: atomic writes of parquet, JSON and text, checksums, files that check
themselves (sealed JSON and text), and reading a table with an error that names the file. Every
stage that writes a file goes through here, so a crash never leaves a half-written file behind."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
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


def finite_json(obj):
    """``obj`` with every NaN or infinite float as None: JSON has no NaN (``json.dumps`` writes a bare
    ``NaN`` that jq, JavaScript and strict readers refuse), and null is what a reader takes as missing."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def write_json(obj, path: Path) -> None:
    text = json.dumps(finite_json(obj), indent=2, sort_keys=False, default=str, allow_nan=False) + "\n"
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def write_text(text: str, path: Path) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


# -- files that check themselves -----------------------------------------------------------------
# A sealed JSON object carries two keys besides its contents: ``checksum`` (the sha256 of the
# contents' canonical form) and ``checksum_of`` (what that is). An object with neither was written
# before seals existed and is read as it is; one bit flip cannot remove both, so a damaged seal is
# never mistaken for an old file. A sealed text file starts with one comment line holding the
# sha256 of the rest (YAML and most config formats read it as a comment).
CHECKSUM, CHECKSUM_OF = "checksum", "checksum_of"
CANONICAL = "sha256 of the other keys as JSON: keys sorted, no spaces, ASCII"
TEXT_SEAL = re.compile(r"# prefix-harness sha256:([0-9a-f]{64})\n")
TEXT_MARK = "prefix-harness sha256:"


class BrokenSeal(ValueError):
    """A sealed file whose contents no longer match its checksum; the message says what is wrong."""


def _canonical_sha256(body: dict) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def seal_json(obj: dict) -> dict:
    """``obj`` as JSON reads it back, with its checksum."""
    body = json.loads(json.dumps(obj, default=str))
    return {**body, CHECKSUM_OF: CANONICAL, CHECKSUM: _canonical_sha256(body)}


def open_json_seal(value: dict) -> tuple[dict, bool]:
    """``(contents, sealed)`` of a JSON object read from a file; raises :class:`BrokenSeal` when
    its checksum does not match (or one of the two seal keys is missing or changed)."""
    if CHECKSUM not in value and CHECKSUM_OF not in value:
        return value, False
    body = {k: v for k, v in value.items() if k not in (CHECKSUM, CHECKSUM_OF)}
    if value.get(CHECKSUM_OF) != CANONICAL or value.get(CHECKSUM) != _canonical_sha256(body):
        raise BrokenSeal("its contents do not match its checksum")
    return body, True


def write_sealed_json(obj: dict, path: Path) -> None:
    write_json(seal_json(obj), path)


def seal_text(text: str) -> str:
    return f"# {TEXT_MARK}{hashlib.sha256(text.encode()).hexdigest()}\n{text}"


def open_text_seal(text: str) -> tuple[str, bool]:
    """``(contents, sealed)`` of a text file :func:`seal_text` may have written; raises
    :class:`BrokenSeal` when the seal line is damaged or does not match the rest."""
    if not text.startswith("#") and TEXT_MARK not in text:
        return text, False
    match = TEXT_SEAL.match(text)
    if match is None:
        raise BrokenSeal("its checksum line is damaged")
    body = text[match.end():]
    if hashlib.sha256(body.encode()).hexdigest() != match.group(1):
        raise BrokenSeal("its contents do not match its checksum")
    return body, True


def write_sealed_text(text: str, path: Path) -> None:
    write_text(seal_text(text), path)


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


FIGURE_SUFFIXES = (".pdf", ".png")


def figure_files_in(folder: Path, names) -> list[Path]:
    """The files a figure writer of the figures ``names`` (stems, e.g. ``fig1_edit_distance``) leaves
    in ``folder``, by exact name: the drawn figures, and the temporary files a kill cut off
    (:func:`atomic_write`'s ``.NAME.SUFFIX.*.tmp``). A user's own ``figure_for_paper.png`` or
    ``fig1_annotated.pdf`` beside them is never among them."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    own = {f"{n}{s}" for n in names for s in FIGURE_SUFFIXES}
    found = [p for p in folder.iterdir() if p.name in own]
    found += [p for p in folder.glob(".*.tmp") if p.name[1:].split(".tmp")[0].rsplit(".", 1)[0] in own]
    return sorted(found)
