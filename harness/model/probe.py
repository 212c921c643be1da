"""A streaming attention probe that wraps the model's own attention function.

Asking a model for ``output_attentions`` materializes layers x heads x T x T and forces the slow
eager path. Instead the probe is installed as the model's attention implementation: every call
passes through, unchanged, to the function the model would have used anyway (``sdpa``, the
family's own ``eager_attention_forward``, or any other registered implementation), so the model's
outputs are its own. In addition, for the few query rows under comparison only, the probe
recomputes the pre-softmax scores and their log-softmax in float32, with every transform the
family applies inside attention: the scaling it passes, logit soft-capping (``softcap``, Gemma 2),
the layer's own mask (sliding windows included), and learned sink logits (``s_aux``, GPT-OSS),
which take softmax mass but are not keys. Nothing larger than one layer's selected rows,
``[batch, heads, rows, keys]``, exists at a time.

:func:`install_probe` refuses, with one line naming the family and what is missing, a model whose
layers do not all call the attention interface (Bloom, Falcon: ALiBi or their own kernels) or
that passes the attention function anything it does not know how to reproduce; then it checks the
recomputed rows against the model's eager ``output_attentions`` on a short input.

Usage::

    install_probe(model)                      # once
    with capture_rows(slice(5, 9), on_layer): # rows 5..8 of the next forward pass's queries
        model(input_ids)

``on_layer(layer, log_probs, scores, sink)`` receives float32 tensors ``[batch, heads, rows, keys]``
(masked keys are ``-inf``) and, for models with learned sinks, ``sink = (log_prob, score)`` each
``[batch, heads, rows]`` (else None). Grouped-query attention is handled by mapping each query
head to its key/value head.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch

from harness.errors import HarnessError
from harness.model.masks import KeyBias, additive_mask

PROBE_PREFIX = "harness_probe_"
# Attention-function arguments the probe reproduces (scaling, softcap, s_aux; sliding_window and
# is_causal are carried by the mask) or that do not change the arithmetic of one call.
HANDLED = {"scaling", "softcap", "s_aux", "sliding_window", "is_causal", "dropout", "position_ids", "use_cache",
           "output_router_logits", "cache_position", "output_attentions", "past_key_values", "layer_idx"}
# Families known to compute attention their own way (what the refusal says is missing).
OWN_ATTENTION = {"bloom": "BloomAttention computes ALiBi position biases itself",
                 "falcon": "FalconAttention runs its own kernels, with ALiBi in some variants",
                 "mpt": "MptAttention computes ALiBi position biases itself"}

# Called with (layer, log_probs [B, H, R, K], scores [B, H, R, K], sink or None).
LayerCallback = Callable[[int, torch.Tensor, torch.Tensor, "tuple[torch.Tensor, torch.Tensor] | None"], None]


@dataclass
class _Capture:
    rows: slice | None  # query positions within the current forward call
    on_layer: LayerCallback
    calls: int = 0
    arguments: set[str] = field(default_factory=set)  # attention-function arguments seen (not None)


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
def capture_rows(rows: slice | None, on_layer: LayerCallback) -> Iterator[_Capture]:
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
    softcap: float | None = None,
) -> torch.Tensor:
    """Float32 pre-softmax scores ``[B, H, R, Tk]`` of the selected query rows, as the attention
    function computes them (scaling, then soft-capping, then the mask); masked keys are -inf.

    With no mask the attention is causal with the queries being the last ``Tq`` positions. In a
    float mask, entries at or below half the dtype's minimum mean "masked" (that is how eager and
    isolation masks write it), whatever finite value they hold."""
    _, n_heads, tq, dim = query.shape
    tk = key.shape[2]
    q = query[:, :, rows].float()
    k = key.float()[:, _kv_heads_for(n_heads, key.shape[1], key.device)]  # [B, H, Tk, D]
    scale = scaling if scaling is not None else 1.0 / math.sqrt(dim)
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    if attention_mask is None:
        q_pos = torch.arange(tk - tq, tk, device=query.device)[rows]
        allowed = torch.arange(tk, device=query.device)[None, :] <= q_pos[:, None]  # [R, Tk]
        return scores.masked_fill(~allowed, float("-inf"))
    mask = attention_mask[:, :, rows, :tk]
    if mask.dtype == torch.bool:
        return scores.masked_fill(~mask, float("-inf"))
    hidden = mask <= torch.finfo(mask.dtype).min / 2
    return torch.where(hidden, torch.full_like(scores, float("-inf")), scores + mask.float())


def _base_function(base: str, module) -> Callable:
    """The attention function the model would call under ``base``: the family's own module-level
    ``eager_attention_forward`` for eager, else the registered implementation."""
    if base == "eager":
        return sys.modules[type(module).__module__].eager_attention_forward
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return ALL_ATTENTION_FUNCTIONS[base]


def _probe_for(base: str):
    def probe_attention(module, query, key, value, attention_mask, **kwargs):
        bias = _BIAS.get()
        if bias is not None:
            attention_mask = additive_mask(attention_mask, bias, query.shape[2], key.shape[2], query.dtype,
                                           query.device, getattr(module, "layer_idx", None), query.shape[1])
        out = _base_function(base, module)(module, query, key, value, attention_mask, **kwargs)
        capture = _ACTIVE.get()
        if capture is not None:
            layer = getattr(module, "layer_idx", None)
            layer = capture.calls if layer is None else layer
            capture.calls += 1
            capture.arguments |= {name for name, v in kwargs.items() if v is not None}
            if capture.rows is not None:
                scores = row_scores(query, key, attention_mask, capture.rows, kwargs.get("scaling"),
                                    kwargs.get("softcap"))
                sinks = kwargs.get("s_aux")
                if sinks is None:
                    capture.on_layer(int(layer), torch.log_softmax(scores, dim=-1), scores, None)
                else:
                    sink = sinks.float().reshape(1, -1, 1).expand(scores.shape[:-1])  # [B, H, R]
                    logp = torch.log_softmax(torch.cat([scores, sink[..., None]], dim=-1), dim=-1)
                    capture.on_layer(int(layer), logp[..., :-1], scores, (logp[..., -1], sink))
        return out

    return probe_attention


def register_probe(base: str) -> str:
    """Register the probe around implementation ``base`` (and ``base``'s own mask builder) with
    transformers; returns its name. Idempotent."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    name = PROBE_PREFIX + base
    AttentionInterface.register(name, _probe_for(base))
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
    return name


def _refuse(model, reason: str) -> HarnessError:
    family = getattr(model.config, "model_type", "?")
    return HarnessError(f"{type(model).__name__} ({family}): {reason}; attention analysis and isolation are not "
                        f"available for it: run with analysis.attention=false and isolation=[none]")


def install_probe(model: torch.nn.Module, check_tokens: int = 24) -> str:
    """Switch ``model`` to the probe around its current attention implementation, check that it
    can reproduce the model's attention exactly, and return the implementation it wraps."""
    current = model.config._attn_implementation
    if current.startswith(PROBE_PREFIX):
        return current.removeprefix(PROBE_PREFIX)
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

    if current not in ALL_MASK_ATTENTION_FUNCTIONS:
        raise _refuse(model, f"the probe cannot wrap its attention implementation {current!r}")
    name = register_probe(current)
    try:
        model.set_attn_implementation(name)
    except (ValueError, NotImplementedError, AttributeError, KeyError) as exc:
        raise _refuse(model, f"cannot use a custom attention function ({str(exc).splitlines()[0]})") from None
    family = getattr(model.config, "model_type", "")
    n_layers = getattr(model.config, "num_hidden_layers", None) or getattr(model.config, "n_layer", None)
    if model.config._attn_implementation != name:
        raise _refuse(model, f"it ignores custom attention functions: {OWN_ATTENTION.get(family, 'it runs its own kernels')}")
    seen: dict[int, tuple] = {}
    ids = torch.tensor([[(7 * i + 3) % model.config.vocab_size for i in range(check_tokens)]],
                       device=next(model.parameters()).device)
    with torch.no_grad(), capture_rows(slice(0, check_tokens), lambda layer, lp, s, sink: seen.__setitem__(
            layer, (lp, sink))) as capture:
        model(input_ids=ids)
    if n_layers is None or len(seen) != n_layers:
        what = OWN_ATTENTION.get(family, "the others run their own attention code")
        raise _refuse(model, f"its attention does not go through transformers' AttentionInterface ({len(seen)} of "
                             f"{n_layers} layers reached the probe: {what})")
    unknown = sorted(capture.arguments - HANDLED)
    if unknown:
        raise _refuse(model, f"its attention function takes {', '.join(unknown)}, which the probe cannot reproduce")
    _check_against_eager(model, name, ids, seen)
    return current


def _check_against_eager(model, name: str, ids: torch.Tensor, seen: dict) -> None:
    """The recomputed rows must equal the model's own eager ``output_attentions``."""
    dtype = next(model.parameters()).dtype
    tolerance = 1e-4 if dtype == torch.float32 else 5e-2
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            eager = model(input_ids=ids, output_attentions=True).attentions
    finally:
        model.set_attn_implementation(name)
    for layer, probs in enumerate(eager or ()):
        lp, _ = seen[layer]
        worst = float((lp.exp() - probs.float()).abs().max())
        if not worst <= tolerance:
            raise _refuse(model, f"the probe's recomputed attention differs from the model's eager attention by "
                                 f"{worst:.2g} in layer {layer} (an attention transform it does not know)")
