"""Where a model comes from: each source is one entry of :data:`SOURCES`, which says which
``model.name_or_path`` (and GGUF setting) it claims, where transformers then loads from, and what
names the weights exactly (the *resolved revision* that enters every result's content key). A new
source is one :func:`_source` call; config validation asks :func:`source_for` before any model
loads, and a name no source claims is an error, never a guess.

Kept free of heavy imports at module level: config validation reads it without loading torch.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.plugins import load_plugins
from harness.model.builtin import TINY_FAMILIES
from harness.model.gguf import GgufSource
from harness.paths import ASSETS_DIR

BUILTIN = "builtin:"
# The project's own models, by the names configs use: the story model the demo runs offline,
# fine-tuned to obey directives in its context (the positive control, the default), and the plain
# story model it was fine-tuned from (the negative control).
SHIPPED_MODELS = {"demo": ASSETS_DIR / "demo-obedient", "demo-plain": ASSETS_DIR / "demo-model"}
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")  # name or org/name


@dataclass(frozen=True)
class Opened:
    """What a source hands the loader: ``location`` for ``from_pretrained`` (a directory or a hub
    id), or ``built`` (model, tokenizer) already made; ``revision_of(model, location, revision)``
    names the weights once loaded; ``facts`` are what the manifest records about the source."""

    location: str | None
    revision_of: Callable[..., str]
    facts: dict | None = None
    built: tuple | None = None


@dataclass(frozen=True)
class ModelSource:
    name: str
    doc: str
    claims: Callable[[str, GgufSource | None], bool]  # (name_or_path, gguf) -> is it this source's?
    open: Callable[[str, GgufSource | None], Opened]


SOURCES: dict[str, ModelSource] = {}


def register_source(name: str, doc: str, claims, open_) -> None:
    SOURCES[name] = ModelSource(name, doc, claims, open_)


def gguf_source(gguf) -> GgufSource | None:
    """The GGUF source a model config's ``gguf`` node names, or None."""
    if gguf is None or not gguf.files:
        return None
    return GgufSource(tuple(gguf.files), gguf.sha256, gguf.install)


def source_for(name_or_path: str, gguf: GgufSource | None = None) -> ModelSource:
    """The first source of :data:`SOURCES` that claims ``name_or_path``; a one-line error if none does."""
    for source in SOURCES.values():
        if source.claims(name_or_path, gguf):
            return source
    raise HarnessError(f"model.name_or_path={name_or_path!r} is none of: " + "; ".join(
        f"{s.name} ({s.doc})" for s in SOURCES.values()))


def weights_sha256(model) -> str:
    """sha256 of a model's weights (names and float32 values): names weights no file or commit names."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def local_files_sha256(path: Path) -> str:
    """sha256 over every file of a model directory: weights, configs, tokenizer files, chat
    templates and any model code (remote code can change results without changing a weight)."""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and ".cache" not in p.parts):
        h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit the local hub cache resolves ``revision`` of ``repo_id`` to (the name of the
    snapshot directory its files come from), or None where the cache has no such snapshot.

    transformers 5 no longer records the commit on the config, so this is read from the cache
    itself: a moved ``refs/main`` then changes the content key instead of mixing results."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:  # noqa: BLE001 - an id the hub library cannot parse has no cached commit
        return None
    if not isinstance(found, str):
        return None
    snapshot = Path(found).parent
    return snapshot.name if snapshot.parent.name == "snapshots" else None


def _builtin(name: str, gguf) -> Opened:
    from harness.model.builtin import build_tiny

    model, tokenizer = build_tiny(name[len(BUILTIN):].removeprefix("tiny-"))
    return Opened(None, lambda model, location, revision: weights_sha256(model), built=(model, tokenizer))


def _gguf(name: str, gguf) -> Opened:
    from harness.model.gguf import dequantized_copy

    cached, facts = dequantized_copy(gguf)
    # the cached copy's weights are checked against the GGUF's sha256
    return Opened(str(cached), lambda model, location, revision: f"gguf:{facts['gguf_sha256']}", facts)


def _directory(path: Path) -> Opened:
    return Opened(str(path), lambda model, location, revision: local_files_sha256(Path(location)))


def _hub(name: str, gguf) -> Opened:
    def revision_of(model, location, revision):
        return (hub_commit(location, revision) or getattr(model.config, "_commit_hash", None)
                or f"weights:{weights_sha256(model)}")
    return Opened(name, revision_of)


def _looks_local(name: str) -> bool:
    return name.startswith((".", "/", "~")) or Path(name).expanduser().exists()


register_source("builtin", f"builtin:tiny-<family>, a random tiny model made in memory ({', '.join(TINY_FAMILIES)})",
        lambda name, gguf: gguf is None and name.removeprefix(BUILTIN).removeprefix("tiny-") in TINY_FAMILIES
        and name.startswith(BUILTIN), _builtin)
register_source("gguf", "model.gguf.files set: a GGUF file, dequantized once and cached (name_or_path only names it)",
        lambda name, gguf: gguf is not None, _gguf)
register_source("shipped", f"a model this package ships: {', '.join(SHIPPED_MODELS)}",
        lambda name, gguf: name in SHIPPED_MODELS, lambda name, gguf: _directory(SHIPPED_MODELS[name]))
register_source("local", "a local directory written by save_pretrained", lambda name, gguf: _looks_local(name),
        lambda name, gguf: _directory(Path(name).expanduser()))
register_source("hub", "a Hugging Face hub id, org/name, from the local cache or the hub",
        lambda name, gguf: bool(HUB_ID.match(name)), _hub)


load_plugins("model_sources")  # entries registered from outside the package (harness.plugins)
