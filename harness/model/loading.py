"""Loading a causal LM and its tokenizer: hub id, local directory, GGUF file, or a built-in tiny model.

Weights load as safetensors only and ``trust_remote_code`` is off unless asked for. A model that is
not available is one clear line, not a stack of hub errors. The resolved revision names the weights
exactly and goes into every result's content key: the hub commit the local cache resolved the
revision to (read from its snapshot path), a content hash of a local directory or of weights whose
revision cannot be resolved, or a GGUF file's sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError

from harness.config import ASSETS_DIR
from harness.errors import HarnessError
from harness.model.adapters import adapter_sha256, merge_adapter
from harness.model.gguf import GgufSource, dequantized_copy, transformers_version

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
BUILTIN = "builtin:"
ASSETS = ASSETS_DIR
# The project's own models, by the names configs use: the story model the demo runs offline,
# fine-tuned to obey directives in its context (the positive control, the default), and the plain
# story model it was fine-tuned from (the negative control).
SHIPPED_MODELS = {"demo": ASSETS / "demo-obedient", "demo-plain": ASSETS / "demo-model"}
DEMO_MODEL_DIR = SHIPPED_MODELS["demo-plain"]


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


def resolve_device(device: str) -> str:
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise HarnessError(f"model.device={device}, but CUDA is not available here; use device=cpu or auto")
    return device


def byte_level_tokenizer(add_bos: bool):
    """A 257-token byte-level tokenizer (256 bytes + ``<|endoftext|>``), built locally.

    ``add_bos`` makes it prepend ``<|endoftext|>`` like Llama's tokenizer prepends BOS.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    eot = "<|endoftext|>"
    vocab[eot] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.add_special_tokens([eot])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{eot} $A", special_tokens=[(eot, vocab[eot])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=eot, eos_token=eot, pad_token=eot, model_max_length=1024
    )


def tiny_config(family: str, *, layers: int = 2, hidden: int = 64, heads: int = 4, kv_heads: int = 2,
                max_positions: int = 1024):
    """A transformers config for a tiny random model of ``family``: llama, gpt2, qwen2, mistral or
    gpt_neox. Llama-style families get grouped-query attention (``kv_heads`` < ``heads``)."""
    from transformers import AutoConfig

    common = dict(vocab_size=257, bos_token_id=256, eos_token_id=256, pad_token_id=256)
    if family == "gpt2":
        return AutoConfig.for_model(
            "gpt2", n_embd=hidden, n_layer=layers, n_head=heads, n_positions=max_positions, **common
        )
    if family == "gpt_neox":
        return AutoConfig.for_model(
            "gpt_neox", hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=4 * hidden, max_position_embeddings=max_positions, rotary_pct=0.25, **common
        )
    if family in ("llama", "qwen2", "mistral"):
        return AutoConfig.for_model(
            family, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
            num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=max_positions,
            **common
        )
    raise HarnessError(f"no tiny model family {family!r}; use llama, gpt2, qwen2, mistral or gpt_neox")


def build_tiny(family: str, seed: int = 0, **shape):
    """A tiny random model and a matching byte-level tokenizer, both made in memory."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, **shape)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    # GPT-2's tokenizer does not add BOS; Llama-family tokenizers do. Mirror that.
    return model.eval(), byte_level_tokenizer(add_bos=family != "gpt2")


def _weights_sha256(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()


def _local_files_sha256(path: Path) -> str:
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


def max_positions_of(config) -> int | None:
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


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
    if gated or "gated" in lowered or "401" in lowered or "403" in lowered or "restricted" in lowered:
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
) -> LoadedModel:
    """Load ``name_or_path`` (hub id, local directory, ``demo``, or ``builtin:<family>``).

    ``attn_implementation`` None lets transformers choose what the family supports (SDPA where
    it can, else eager); the choice is recorded in ``model.config._attn_implementation``.
    ``device_map`` (``auto`` or an explicit ``{module: device}`` map) spreads a big model over
    several devices with accelerate's dispatch instead of moving it to ``device``. With ``gguf``,
    the weights come from that GGUF file (dequantized and cached, :mod:`harness.model.gguf`) and
    ``name_or_path`` is only the name the tables give the model. ``adapter`` (a directory, or the
    name of one in ``harness/assets``) is merged into the weights (:mod:`harness.model.adapters`)
    and becomes part of the resolved revision."""
    if dtype not in DTYPES:
        raise HarnessError(f"model.dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if adapter is not None and device_map is not None:  # before the weights are read, not after
        raise HarnessError("model.adapter cannot be merged into a model spread with model.device_map; "
                           "load it on one device")
    device = resolve_device(device)
    if name_or_path.startswith(BUILTIN):
        family = name_or_path[len(BUILTIN):].removeprefix("tiny-")
        model, tokenizer = build_tiny(family)
        model = model.to(DTYPES[dtype])
        if attn_implementation:
            model.set_attn_implementation(attn_implementation)
        return LoadedModel(model.to(device), tokenizer, name_or_path, None, _weights_sha256(model), dtype,
                           device, max_positions_of(model.config))
    gguf_facts = None
    if gguf is not None:
        cached, gguf_facts = dequantized_copy(gguf)
        source = str(cached)
    else:
        source = str(SHIPPED_MODELS.get(name_or_path, name_or_path))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    placement = {}
    if device_map is not None:
        import importlib.util

        if importlib.util.find_spec("accelerate") is None:
            raise HarnessError("model.device_map needs the accelerate package: pip install accelerate")
        placement = {"device_map": device_map}
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=revision, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            source,
            revision=revision,
            dtype=DTYPES[dtype],
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            attn_implementation=attn_implementation,
            **placement,
        )
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        raise HarnessError(f"model {name_or_path!r} is not available: "
                           f"{_why_unavailable(name_or_path, source, exc, gated)}") from None
    except SafetensorError as exc:  # a truncated or overwritten weights file
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HarnessError(f"model {name_or_path!r}: its safetensors weights in {source} are damaged ({first}); "
                           f"download or save the model again") from None
    local = Path(source)
    if gguf_facts is not None:
        resolved = f"gguf:{gguf_facts['gguf_sha256']}"  # the cached copy's weights are checked against it
    elif local.is_dir():
        resolved = _local_files_sha256(local)
    else:
        resolved = (hub_commit(source, revision) or getattr(model.config, "_commit_hash", None)
                    or f"weights:{_weights_sha256(model)}")
    adapter_facts = None
    if adapter is not None:
        adapter_dir = ASSETS / adapter if (ASSETS / adapter).is_dir() else Path(adapter)
        description = merge_adapter(model, adapter_dir, gguf_facts["gguf_sha256"] if gguf_facts else None)
        adapter_facts = {"path": str(adapter_dir), "sha256": adapter_sha256(adapter_dir), **description}
        resolved = f"{resolved}+adapter:{adapter_facts['sha256']}"
    if device_map is None:
        model = model.to(device)
    else:
        device = str(next(model.parameters()).device)
    return LoadedModel(model.eval(), tokenizer, name_or_path, revision, resolved, dtype, device,
                       max_positions_of(model.config), gguf_facts, adapter_facts)


def load_from_config(m, *, device: str | None = None, dtype: str | None = None) -> LoadedModel:
    """The model a model config (``cfg.model``) describes, loaded as a sweep loads it (GGUF source,
    adapter, attention implementation and remote-code switch included); ``device`` and ``dtype``
    override the config's."""
    device_map = m.device_map
    if device_map is not None and not isinstance(device_map, str):
        device_map = dict(device_map)
    return load_model(m.name_or_path, revision=m.revision, dtype=dtype or m.dtype.value, device=device or m.device,
                      trust_remote_code=m.trust_remote_code, attn_implementation=m.attn_implementation,
                      device_map=device_map, gated=m.gated, gguf=gguf_source(m.gguf), adapter=m.adapter)


def gguf_source(gguf) -> GgufSource | None:
    """The GGUF source a model config names, or None."""
    if gguf is None or not gguf.files:
        return None
    return GgufSource(tuple(gguf.files), gguf.sha256, gguf.install)
