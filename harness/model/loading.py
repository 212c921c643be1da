"""Loading a causal LM and its tokenizer from any of the model sources (:mod:`harness.model.sources`:
a hub id, a local directory, a GGUF file, a shipped model, or a built-in tiny model).

Weights load as safetensors only and ``trust_remote_code`` is off unless asked for. A model that is
not available is one clear line, not a stack of hub errors. The resolved revision (the source's own
name for the weights: a hub commit, a content hash, a GGUF file's sha256) goes into every result's
content key.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from harness.errors import HarnessError
from harness.model.adapters import adapter_sha256, merge_adapter
from harness.model.gguf import GgufSource, transformers_version
from harness.model.sources import gguf_source, source_for
from harness.paths import adapter_dir

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class LoadedModel:
    """A model ready for the harness, and the facts about it that the manifest records."""

    model: torch.nn.Module
    tokenizer: object
    name_or_path: str
    revision: str | None  # what was asked for
    resolved_revision: str  # hub commit sha, sha256 of local/built-in weights, or gguf:<sha256 of the file>
    dtype: str
    device: str
    max_positions: int | None
    source: dict | None = None  # what the manifest records about a GGUF source (harness.model.gguf)
    adapter: dict | None = None  # a merged adapter: its directory, sha256 and description
    location: str | None = None  # where the weights were read (a directory or hub id); None: built in memory


def resolve_device(device: str) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError):
        raise HarnessError(f"device {device!r} is not one torch knows: use auto, cpu, cuda, cuda:N or mps") from None
    if device.startswith("mps") and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise HarnessError(f"device {device} asked for, but MPS is not available here; use the cpu or auto (a sweep: "
                           f"model.device=cpu or auto; detect, causal-heads: --device cpu)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HarnessError(f"device {device} asked for, but CUDA is not available here; use the cpu or auto (a sweep: "
                           f"model.device=cpu or auto; detect, causal-heads: --device cpu)")
    return device


def max_positions_of(config) -> int | None:
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (``HF_ENDPOINT``, else huggingface.co) accepts a connection
    within ``timeout`` seconds; False when ``HF_HUB_OFFLINE`` is set."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _why_unavailable(name_or_path: str, source: str, exc: BaseException, gated: bool) -> str:
    """The real cause of a failed load, as one line: missing files, no safetensors, offline,
    gated, unsupported architecture or attention, or what transformers said."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    local = Path(source)
    if local.is_dir():
        files = {p.name for p in local.iterdir()}
        if "config.json" not in files:
            return f"{source} is a directory but has no config.json (save the model with save_pretrained)"
        if not any(f.endswith(".safetensors") or f.endswith(".safetensors.index.json") for f in files):
            pickled = sorted(f for f in files if f.endswith((".bin", ".pt", ".pth", ".ckpt")))
            return (f"{source} has no safetensors weights" + (f" (only {', '.join(pickled)}, which could run code when "
                    f"loaded; convert them with save_pretrained(safe_serialization=True))" if pickled else ""))
    lowered = text.lower()
    if "does not support an attention implementation" in lowered or "attention implementation" in lowered:
        return f"unsupported attention implementation: {first}; leave model.attn_implementation unset"
    if "does not recognize this architecture" in lowered or "unrecognized configuration class" in lowered \
            or "model type" in lowered and "not recognized" in lowered:
        return f"unsupported architecture for transformers {transformers_version()}: {first}"
    refused = "gated" in lowered or "401" in lowered or "403" in lowered or "restricted" in lowered
    if gated and not refused and not local.exists() and not hub_reachable():
        # a gated model's config says so, but what stopped this load is the missing network
        return (f"not in the local hub cache, and the hub is unreachable (offline"
                f"{': HF_HUB_OFFLINE is set' if os.environ.get('HF_HUB_OFFLINE', '0') not in ('0', '', 'false', 'False') else ''}"
                f"): download it once with network access (it is gated: accept its licence on "
                f"huggingface.co/{name_or_path} and log in first), or point model.name_or_path at a local copy or "
                f"model.gguf at a GGUF file")
    if gated or refused:
        return (f"gated on the hub: accept its licence on huggingface.co/{name_or_path} and log in "
                f"(huggingface-cli login), or point model.name_or_path at a local copy ({first})")
    if local.exists() or name_or_path.startswith((".", "/", "~")):
        return f"{source} is not a loadable model directory ({first})"
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    if offline or "offline" in lowered or "connect" in lowered or "cannot find the requested files" in lowered:
        return (f"not a local directory, and not in the local hub cache with the hub unreachable"
                f"{' (HF_HUB_OFFLINE is set)' if offline else ''}: download it once with network access, or "
                f"give a local directory")
    if "safetensors" in lowered or "use_safetensors" in lowered:
        return f"no safetensors weights on the hub for this revision (pickled weights are refused): {first}"
    return f"not a local model directory, and not loadable from the Hugging Face hub: {first}"


def load_model(
    name_or_path: str,
    *,
    revision: str | None = None,
    dtype: str = "float32",
    device: str = "auto",
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
    device_map: str | dict | None = None,
    gated: bool = False,
    gguf: GgufSource | None = None,
    adapter: str | None = None,
    weights: bool = True,
) -> LoadedModel:
    """Load ``name_or_path`` (hub id, local directory, ``demo``, or ``builtin:<family>``).

    ``attn_implementation`` None lets transformers choose what the family supports (SDPA where
    it can, else eager); the choice is recorded in ``model.config._attn_implementation``.
    ``device_map`` (``auto`` or an explicit ``{module: device}`` map) spreads a big model over
    several devices with accelerate's dispatch instead of moving it to ``device``. With ``gguf``,
    the weights come from that GGUF file (dequantized and cached, :mod:`harness.model.gguf`) and
    ``name_or_path`` is only the name the tables give the model. ``adapter`` (a directory, or the
    name of one in ``harness/assets``) is merged into the weights (:mod:`harness.model.adapters`)
    and becomes part of the resolved revision. ``weights=False`` (a backend that serves the weights
    itself, such as vLLM): the tokenizer, config and generation config only, the model built on the
    meta device (its structure, no memory), named as the loaded one would be."""
    if dtype not in DTYPES:
        raise HarnessError(f"model.dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if adapter is not None and device_map is not None:  # before the weights are read, not after
        raise HarnessError("model.adapter cannot be merged into a model spread with model.device_map; "
                           "load it on one device")
    device = resolve_device(device)
    source_kind = source_for(name_or_path, gguf)
    opened = source_kind.open(name_or_path, gguf)
    if opened.built is not None:
        model, tokenizer = opened.built
        if adapter is not None:  # nothing stored to merge into: it would be left out without a word
            raise HarnessError(f"model.adapter={adapter}: {name_or_path} is built in memory; an adapter is merged into "
                               f"a stored model (a directory, GGUF file or hub id)")
        model = model.to(DTYPES[dtype])
        if attn_implementation:
            try:
                model.set_attn_implementation(attn_implementation)
            except (ValueError, ImportError) as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise HarnessError(f"model.attn_implementation={attn_implementation}: {first[:200]}; leave it unset "
                                   f"(transformers chooses) or give eager or sdpa") from None
        return LoadedModel(model.to(device), tokenizer, name_or_path, None,
                           opened.revision_of(model, None, revision), dtype, device, max_positions_of(model.config))
    source = opened.location
    from transformers import AutoModelForCausalLM, AutoTokenizer

    placement = {}
    if device_map is not None:
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise HarnessError("model.device_map needs the accelerate package: pip install accelerate")
        placement = {"device_map": device_map}
    # an unreachable hub costs a minute of retries before the cache is tried: look once, quickly
    local_only = {"local_files_only": True} if source_kind.name == "hub" and not hub_reachable() else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code,
                                                  **local_only)
        if not weights:
            return _structure_only(name_or_path, source, revision, dtype, device, trust_remote_code,
                                   attn_implementation, tokenizer, opened, local_only)
        model = AutoModelForCausalLM.from_pretrained(
            source,
            **local_only,
            revision=revision,
            dtype=DTYPES[dtype],
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            attn_implementation=attn_implementation,
            output_loading_info=True,
            **placement,
        )
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        raise HarnessError(f"model {name_or_path!r} is not available: "
                           f"{_why_unavailable(name_or_path, source, exc, gated)}") from None
    except SafetensorError as exc:  # a truncated or overwritten weights file
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"model {name_or_path!r}: its safetensors weights in {source} are damaged ({first}); "
                           f"download or save the model again") from None
    model, loading_info = model if isinstance(model, tuple) else (model, {})
    missing = sorted(loading_info.get("missing_keys") or ())
    if missing:  # transformers would run these on freshly initialised random values
        raise HarnessError(f"model {name_or_path!r}: its weights do not cover {len(missing)} parameter(s) "
                           f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}), which would run on "
                           f"random values; save the complete model again")
    resolved = opened.revision_of(model, source, revision)
    gguf_facts = opened.facts
    adapter_facts = None
    if adapter is not None:
        where = adapter_dir(adapter)
        description = merge_adapter(model, where, gguf_facts["gguf_sha256"] if gguf_facts else None)
        adapter_facts = {"path": str(where), "sha256": adapter_sha256(where), **description}
        resolved = f"{resolved}+adapter:{adapter_facts['sha256']}"
    if device_map is None:
        model = model.to(device)
    else:
        device = str(next(model.parameters()).device)
    return LoadedModel(model.eval(), tokenizer, name_or_path, revision, resolved, dtype, device,
                       max_positions_of(model.config), gguf_facts, adapter_facts, str(source))


def _structure_only(name_or_path: str, source: str, revision, dtype: str, device: str, trust_remote_code: bool,
                    attn_implementation, tokenizer, opened, local_only: dict) -> LoadedModel:
    """:func:`load_model` without the weights: config and generation config read, the model built
    on the meta device, its revision named from its files (a weights hash cannot be had)."""
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    config = AutoConfig.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code, **local_only)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPES[dtype], trust_remote_code=trust_remote_code,
                                                 attn_implementation=attn_implementation)
    try:  # where the stop ids of chat models come from
        model.generation_config = GenerationConfig.from_pretrained(source, revision=revision, **local_only)
    except OSError:  # none saved: the config's own
        pass
    try:
        resolved = opened.revision_of(model, source, revision)
    except (RuntimeError, NotImplementedError):  # only the weights themselves would name this model
        raise HarnessError(f"model {name_or_path!r}: nothing but its weights names it (no commit, no files to "
                           f"hash), and this backend does not load them; use a local copy or a hub id with a "
                           f"commit") from None
    return LoadedModel(model.eval(), tokenizer, name_or_path, revision, resolved, dtype, device,
                       max_positions_of(model.config), opened.facts, None, str(source))


def load_from_config(m, *, device: str | None = None, dtype: str | None = None, weights: bool = True) -> LoadedModel:
    """The model a model config (``cfg.model``) describes, loaded as a sweep loads it (GGUF source,
    adapter, attention implementation and remote-code switch included); ``device`` and ``dtype``
    override the config's; ``weights=False``: its structure, tokenizer and config only."""
    device_map = m.device_map
    if device_map is not None and not isinstance(device_map, str):
        device_map = dict(device_map)
    return load_model(m.name_or_path, revision=m.revision, dtype=dtype or m.dtype.value, device=device or m.device,
                      trust_remote_code=m.trust_remote_code, attn_implementation=m.attn_implementation,
                      device_map=device_map, gated=m.gated, gguf=gguf_source(m.gguf), adapter=m.adapter,
                      weights=weights)
