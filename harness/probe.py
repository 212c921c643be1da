"""A streaming attention probe, registered through transformers' ``AttentionInterface``.

Asking a model for ``output_attentions`` materializes layers x heads x T x T and forces the slow
eager path. Instead the probe is installed as the model's attention function: every layer still
computes its real output with SDPA, and in addition, for the few query rows under comparison only,
the probe recomputes the pre-softmax scores and their log-softmax in float32 and hands them to a
callback. Nothing larger than one layer's selected rows, ``[batch, heads, rows, keys]``, exists at
a time, whatever the depth or context length.

Usage::

    install_probe(model)                      # once; refuses models that bypass the interface
    with capture_rows(slice(5, 9), on_layer): # rows 5..8 of the next forward pass's queries
        model(input_ids)

``on_layer(layer, log_probs, scores)`` receives float32 tensors of shape
``[batch, heads, rows, keys]``; masked keys have score and log-probability ``-inf``. Grouped-query
attention is handled by mapping each query head to its key/value head.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from .errors import HarnessError
from .isolation import KeyBias, additive_mask

PROBE = "harness_probe"

# Called with (layer, log_probs [B, H, R, K], scores [B, H, R, K]) for every layer of a forward.
LayerCallback = Callable[[int, torch.Tensor, torch.Tensor], None]


@dataclass
class _Capture:
    rows: slice  # query positions within the current forward call
    on_layer: LayerCallback
    calls: int = field(default=0)


_ACTIVE: ContextVar[_Capture | None] = ContextVar("harness_probe_capture", default=None)
_BIAS: ContextVar[KeyBias | None] = ContextVar("harness_probe_key_bias", default=None)


@contextlib.contextmanager
def key_bias(bias: KeyBias | None) -> Iterator[None]:
    """Apply an isolation bias toward prefix keys in every attention call of the enclosed passes."""
    token = _BIAS.set(bias)
    try:
        yield
    finally:
        _BIAS.reset(token)


@contextlib.contextmanager
def capture_rows(rows: slice, on_layer: LayerCallback) -> Iterator[_Capture]:
    """Send the selected query rows of every layer in the enclosed forward pass to ``on_layer``."""
    capture = _Capture(rows, on_layer)
    token = _ACTIVE.set(capture)
    try:
        yield capture
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def plain_attention() -> Iterator[None]:
    """Neither capture nor isolation bias in the enclosed passes, whatever the caller has active."""
    capture, bias = _ACTIVE.set(None), _BIAS.set(None)
    try:
        yield
    finally:
        _BIAS.reset(bias)
        _ACTIVE.reset(capture)


def _kv_heads_for(n_heads: int, n_kv: int, device) -> torch.Tensor:
    if n_heads % n_kv:
        raise HarnessError(f"{n_heads} query heads do not divide evenly over {n_kv} key/value heads")
    return torch.arange(n_heads, device=device) // (n_heads // n_kv)


def row_scores(
    query: torch.Tensor,  # [B, H, Tq, D], after position encoding
    key: torch.Tensor,  # [B, Hkv, Tk, D], cache included
    attention_mask: torch.Tensor | None,  # [B, 1, Tq, Tk] bool (True = attend) or additive float, or None
    rows: slice,
    scaling: float | None,
) -> torch.Tensor:
    """Float32 pre-softmax scores ``[B, H, R, Tk]`` of the selected query rows; masked keys are -inf.

    With no mask the attention is causal with the queries being the last ``Tq`` positions.
    """
    _, n_heads, tq, dim = query.shape
    tk = key.shape[2]
    q = query[:, :, rows].float()
    k = key.float()[:, _kv_heads_for(n_heads, key.shape[1], key.device)]  # [B, H, Tk, D]
    scale = scaling if scaling is not None else 1.0 / math.sqrt(dim)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if attention_mask is None:
        q_pos = torch.arange(tk - tq, tk, device=query.device)[rows]
        allowed = torch.arange(tk, device=query.device)[None, :] <= q_pos[:, None]  # [R, Tk]
        return scores.masked_fill(~allowed, float("-inf"))
    mask = attention_mask[:, :, rows, :tk]
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    return scores + mask.float()


def probe_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                    **kwargs):
    """The attention function the probe installs: SDPA output, plus row statistics when capturing."""
    bias = _BIAS.get()
    if bias is not None:
        attention_mask = additive_mask(attention_mask, bias, query.shape[2], key.shape[2], query.dtype, query.device)
    out = sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                 is_causal=is_causal, **kwargs)
    capture = _ACTIVE.get()
    if capture is not None:
        layer = getattr(module, "layer_idx", None)
        layer = capture.calls if layer is None else layer
        capture.calls += 1
        if capture.rows is not None:
            scores = row_scores(query, key, attention_mask, capture.rows, scaling)
            capture.on_layer(int(layer), torch.log_softmax(scores, dim=-1), scores)
    return out


def register_probe() -> None:
    """Register the probe (and SDPA's mask builder for it) with transformers; idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(PROBE, probe_attention)
    AttentionMaskInterface.register(PROBE, sdpa_mask)


def install_probe(model: torch.nn.Module) -> None:
    """Switch ``model`` to the probe and check that every layer's attention goes through it."""
    register_probe()
    name = type(model).__name__
    try:
        model.set_attn_implementation(PROBE)
    except (ValueError, NotImplementedError, AttributeError) as exc:
        raise HarnessError(
            f"{name} cannot use a custom attention function ({str(exc).splitlines()[0]}); attention analysis "
            f"is not available for it: run with analysis.attention=false"
        ) from None
    n_layers = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    seen: set[int] = set()
    device = next(model.parameters()).device
    with torch.no_grad(), capture_rows(slice(0, 1), lambda layer, lp, s: seen.add(layer)):
        model(input_ids=torch.zeros((1, 2), dtype=torch.long, device=device))
    if n_layers is None or len(seen) != n_layers:
        raise HarnessError(
            f"{name}'s attention does not go through transformers' AttentionInterface ({len(seen)} of "
            f"{n_layers} layers reached the probe); attention analysis is not available for it: run with "
            f"analysis.attention=false"
        )
