"""Where files are: the package's own (the shipped prompt and prefix sets, the demo models' weights,
the Hydra config tree) and those other installed packages ship (a GGUF model, a benchmark's data).
Every stage may use these."""

from __future__ import annotations

import importlib.metadata
import os
import re
from pathlib import Path

from harness.errors import HarnessError

PACKAGE_DIR = Path(__file__).parent
DATA_DIR = PACKAGE_DIR / "data"  # the shipped prompt and prefix sets
ASSETS_DIR = PACKAGE_DIR / "assets"  # the shipped demo models
CONFIG_MODULE = "harness.conf"  # the config tree ships inside the package (Hydra's pkg:// search path)


def adapter_dir(adapter: str) -> Path:
    """The directory ``model.adapter`` names: one shipped in ``harness/assets``, else a path."""
    return ASSETS_DIR / adapter if (ASSETS_DIR / adapter).is_dir() else Path(adapter)


def installed_distribution(distribution: str, what: str, install: str) -> importlib.metadata.Distribution:
    """The installed distribution ``distribution``; one line saying how to install it if it is not
    (``what`` names what it ships, for the message)."""
    try:
        return importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise HarnessError(f"{what} ships in the package {distribution}, which is not installed here: {install}") from None


def installed_file(distribution: str, inside: str, what: str, install: str) -> Path:
    """The file ``inside`` (a path relative to site-packages) of an installed distribution, read
    where the package put it (nothing is copied); a missing package or file is one line saying how
    to get it."""
    dist = installed_distribution(distribution, what, install)
    path = Path(dist.locate_file(inside))
    if not path.is_file():
        raise HarnessError(f"the package {distribution} {dist.version} is installed but has no {inside} "
                           f"(looked at {path}); reinstall it: {install}")
    return path


def broken_link(path: Path) -> str:
    """What a link that leads nowhere is, in words: "is a link to X, which does not exist", or "is a
    loop of links (a -> b -> a)"."""
    try:
        Path(path).resolve(strict=True)
    except RuntimeError:  # Python < 3.13 raises this for a loop
        return f"is a loop of links ({_chain(Path(path))})"
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return f"is a loop of links ({_chain(Path(path))})"
    return f"is a link to {os.readlink(path)}, which does not exist"


def _chain(path: Path, limit: int = 8) -> str:
    seen, names = set(), [str(path)]
    while path.is_symlink() and path not in seen and len(names) <= limit:
        seen.add(path)
        path = path.parent / os.readlink(path)
        names.append(str(path))
    return " -> ".join(names)


def resolved(path: str | Path) -> Path:
    """``path`` made absolute with its links followed; a loop of links is refused in one line (it
    raised a bare RuntimeError, or a traceback, where a user's path was compared or shown)."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError):
        raise HarnessError(f"{path} {broken_link(Path(path))}: give a file or directory that exists") from None


def shell_path(path: str | Path) -> str:
    """``path`` as it goes into a command the harness prints as advice: quoted for a POSIX shell
    where it needs it (a space, a quote), so that the command works when copied as printed."""
    import shlex

    return shlex.quote(str(path))


def why_not_writable(path: Path) -> tuple[Path, str] | None:
    """Why the directory ``path`` cannot be made (or, where it exists, written into): ``(the
    nearest existing path, the reason in words)``, or None. Nothing is left behind (a command refused
    later must leave no directory): where ``path`` does not exist yet, a directory is made beside it
    and taken back, since permissions alone do not say (root may write anywhere they allow, not on
    /proc or /sys)."""
    import tempfile

    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return existing, f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return existing, f"{existing} is not writable"
    if not path.exists():
        try:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".harness-probe-"))
        except OSError as exc:
            return existing, f"{existing} takes no new directory ({exc.strerror or exc})"
    return None


def unexpanded_variable(path: str, resolved_by_hydra: frozenset[str] | None = None) -> re.Match | None:
    """The first shell variable in ``path`` that the shell did not expand (``$HOME``, ``${RUNS}``: the
    path was quoted), which would name a directory literally; ``group(2)`` is its name. A path Hydra
    reads (``resolved_by_hydra``, its config keys) keeps Hydra's own interpolations: a braced config
    key (``${seed}``) and a resolver (``${now:%H}``)."""
    found = re.finditer(r"\$(\{)?([A-Za-z_][A-Za-z0-9_]*)(\})?", path)
    if resolved_by_hydra is None:
        return next(found, None)
    return next((m for m in found if not m.group(1) or (m.group(3) and m.group(2) not in resolved_by_hydra)), None)
