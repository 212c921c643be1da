"""KV-cache size: how many bytes a model's key/value cache takes for a batch and sequence length.

    bytes = 2 (keys and values) x layers x key/value heads x head dim x sequence x batch x dtype bytes

With grouped-query attention only the key/value heads count, not the query heads. The often
quoted "about 402 MB" for 24 layers, 16 heads, head dim 64, 2,048 tokens in fp16 counts the
factor 2 twice (once for keys and values, once again for 2-byte elements); the cache is
201,326,592 bytes (192 MiB).
"""

from __future__ import annotations

from pathlib import Path

import torch

from harness.errors import HarnessError
from harness.model.loading import DTYPES


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, seq_len: int, batch: int = 1,
                   dtype: str = "float16") -> int:
    if dtype not in DTYPES:
        raise HarnessError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    for name, value in (("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim),
                        ("seq_len", seq_len), ("batch", batch)):
        if value <= 0:
            raise HarnessError(f"{name} must be positive, got {value}")
    element = torch.tensor([], dtype=DTYPES[dtype]).element_size()
    return 2 * layers * kv_heads * head_dim * seq_len * batch * element


def shape_of(config) -> dict[str, int]:
    """Layers, key/value heads and head dim of a transformers model config."""
    layers = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer")
    heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head")
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd")
    head_dim = getattr(config, "head_dim", None) or hidden // heads
    return {"layers": layers, "kv_heads": kv_heads, "head_dim": head_dim}


def cache_nbytes(cache) -> int:
    """Bytes actually held by a transformers cache's key and value tensors."""
    total = 0
    for layer in getattr(cache, "layers", []):
        for t in (getattr(layer, "keys", None), getattr(layer, "values", None)):
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()
    return total


KEYS = ("model", "layers", "kv_heads", "head_dim", "seq_len", "batch", "dtype")  # what kv-size reads
ALIASES = {"tokens": "seq_len", "seq": "seq_len", "length": "seq_len", "context": "seq_len", "batch_size": "batch",
           "n_layers": "layers", "num_hidden_layers": "layers", "num_key_value_heads": "kv_heads"}


def override_key(item: str) -> str:
    """The key a ``key=value`` item sets: ``model.KEY`` read as ``KEY``, ``model.name_or_path`` as
    ``model``; an item without a key (``=tiny``, ``model.=tiny``) is refused, not read as a model."""
    key = item.partition("=")[0].strip()
    key = "model" if key == "model.name_or_path" else key.removeprefix("model.")
    if not key:
        raise HarnessError(f"kv-size: {item!r} has no key; give one of {', '.join(k + '=' for k in KEYS)}")
    return key


def parse_overrides(overrides: list[str]) -> dict[str, str]:
    """``key=value`` items as a dict, ``model.KEY`` read as ``KEY`` (``model.name_or_path`` as
    ``model``); a key given twice is refused, not last-wins."""
    values: dict[str, str] = {}
    given: dict[str, str] = {}  # key -> the override that set it
    for item in overrides:
        if "=" not in item:
            raise HarnessError(f"expected key=value, got {item!r}")
        key, value = override_key(item), item.split("=", 1)[1]
        if key not in KEYS:  # before "given twice": its remedy would lead to this refusal
            import difflib

            near = ALIASES.get(key) or next(iter(difflib.get_close_matches(key, KEYS, 1)), None)
            raise HarnessError(f"kv-size: unknown key {key!r}" + (f"; did you mean {near}=?" if near else "")
                               + f" (the keys: {', '.join(k + '=' for k in KEYS)})")
        if key in given:
            raise HarnessError(f"kv-size: {key} is given twice ({given[key]} and {item}); give it once")
        values[key], given[key] = value, item
    return values


def describe(overrides: list[str]) -> str:
    """``harness kv-size key=value ...``: the cache size of a model (``model=``) or of a shape given
    as ``layers=``, ``kv_heads=``, ``head_dim=`` (with ``seq_len``, ``batch``, ``dtype``), as one line."""
    values = parse_overrides(overrides)
    shape: dict[str, int] = {}
    context = None  # the model's context window, where model= names one
    if "model" in values:
        from transformers import AutoConfig

        from harness.model.builtin import tiny_config
        from harness.model.sources import BUILTIN, SHIPPED_MODELS

        name = values.pop("model")
        try:
            if name.startswith(BUILTIN):
                config = tiny_config(name[len(BUILTIN):].removeprefix("tiny-"))
            else:
                from harness.model.loading import hub_reachable

                source = SHIPPED_MODELS.get(name, name)  # offline: the local cache only, not a minute of retries
                config = AutoConfig.from_pretrained(str(source), local_files_only=not hub_reachable())
        except (OSError, ValueError):
            from harness.model.loading import hub_reachable

            if Path(name).expanduser().is_symlink() and not Path(name).expanduser().exists():
                from harness.paths import broken_link

                why = broken_link(Path(name).expanduser())  # a loop of links, or a link to nothing
            elif name.startswith(("/", "./", "../", "~")) and not Path(name).expanduser().exists():  # a path, not an id
                why = "does not exist (no such directory)"
            elif Path(str(SHIPPED_MODELS.get(name, name))).expanduser().exists() or hub_reachable():
                why = "is neither a model config (conf/model: tiny, demo, ...), a local model directory with a " \
                      "config.json, nor a hub id"
            else:
                why = "is not in the local hub cache, and the hub is unreachable (offline)"
            raise HarnessError(f"model={name} {why}; give layers=, kv_heads=, head_dim= instead") from None
        shape = shape_of(config)
        # the dtype it computes in (the harness loads builtin models in float32), unless dtype= is given
        own = getattr(config, "dtype", None)
        values.setdefault("dtype", str(own).removeprefix("torch.") if own else "float32")
        context = getattr(config, "max_position_embeddings", None)
    for key in ("layers", "kv_heads", "head_dim", "seq_len", "batch"):
        if key in values:
            text = str(values.pop(key)).strip()
            if not text.isdigit() or int(text) < 1:  # int() would say "invalid literal" of "1e30", and take "-2"
                raise HarnessError(f"{key} must be a positive whole number (e.g. {key}=32), got {text!r}")
            shape[key] = int(text)
    dtype = values.pop("dtype", "float16")  # every key is one of KEYS (parse_overrides): none is left
    missing = [k for k in ("layers", "kv_heads", "head_dim") if k not in shape]
    if missing:
        raise HarnessError(f"kv-size needs model=... or {', '.join(k + '=' for k in missing)}")
    shape.setdefault("seq_len", 2048)
    shape.setdefault("batch", 1)
    n = kv_cache_bytes(dtype=dtype, **shape)
    beyond = (f" (beyond the model's context of {context:,} tokens)"
              if isinstance(context, int) and shape["seq_len"] > context else "")
    return (f"2 x {shape['layers']} layers x {shape['kv_heads']} kv heads x {shape['head_dim']} head dim x "
            f"{shape['seq_len']} tokens x batch {shape['batch']} x {dtype} "
            f"= {n:,} bytes ({n / 2**20:,.1f} MiB){beyond}")
    return 0
