"""Linear layers multiplied in a lower precision than the model's weights (``model.linear_dtype``).

A forward pass of a small model on a CPU spends most of its time in the linear layers' matrix
products (two thirds of a SmolLM2-135M sweep's, ``benchmarks/real_models.py``). On a CPU with
AVX-512 BF16 or AMX (and on every recent GPU) a bfloat16 product runs 3-5x faster than a float32
one; on a CPU without them it is emulated, and slower than float32: 0.33x the conditions per second
of float32 on an AVX2-only AMD EPYC (``benchmarks/real_models.py --quick``, SmolLM2), so
:func:`emulated_on` says when a run would pay that. :func:`lower_linears` gives every ``nn.Linear``
of a model a copy of its weight in that dtype and computes ``x @ W.T`` with ``x`` rounded to it
(the kernel accumulates in float32 and rounds the product to bfloat16), then adds the bias in the
model's own dtype. Everything else (attention and its softmax, the norms, the residual stream, the
logits' softmax) stays in the model's dtype, so the attention the probe recomputes is still exactly
the attention the model computed (:mod:`harness.model.probe`).

It is a rounding change, not an exact one: a weight, an input and a product keep 8 significant bits
instead of 24. The run's noise floor measures what it moves (:mod:`harness.measure.noise`: its alone side
runs with the full-precision products, inside :func:`exact_linears`), and the setting is part of
every result's key, so results of the two precisions are never mixed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import torch
import torch.nn.functional as F

_EXACT: ContextVar[bool] = ContextVar("harness_exact_linears", default=False)
_ATTRIBUTE = "_harness_low_weight"


@contextlib.contextmanager
def exact_linears() -> Iterator[None]:
    """Linear layers multiply at their weights' own precision in the enclosed passes."""
    token = _EXACT.set(True)
    try:
        yield
    finally:
        _EXACT.reset(token)


def _lowered_forward(module: torch.nn.Linear, weight: torch.Tensor):
    original = type(module).forward.__get__(module)

    def forward(x: torch.Tensor) -> torch.Tensor:
        if _EXACT.get():
            return original(x)
        shape = x.shape
        # a 2-D product: a strided 3-D input (a last-position slice) would send F.linear to a
        # batched product that copies the transposed weight on every call
        y = F.linear(x.reshape(-1, shape[-1]).to(weight.dtype), weight).to(x.dtype)
        if module.bias is not None:
            y = y + module.bias
        return y.reshape(*shape[:-1], y.shape[-1])

    return forward


def lower_linears(model: torch.nn.Module, dtype: str | None) -> tuple[str | None, int]:
    """Make every ``nn.Linear`` of ``model`` multiply in ``dtype`` (a torch dtype's name; see the
    module docstring). Returns the precision now in force, None where nothing was lowered (no
    ``dtype``, the weights' own, or no ``nn.Linear``: GPT-2's blocks are ``Conv1D``), and how many
    layers it lowered. Idempotent."""
    if dtype is None:
        return None, 0
    target = getattr(torch, dtype)
    lowered = 0
    for module in model.modules():
        if not isinstance(module, torch.nn.Linear) or module.weight.dtype == target:
            continue
        if not hasattr(module, _ATTRIBUTE):
            weight = module.weight.detach().to(target)
            setattr(module, _ATTRIBUTE, weight)
            module.forward = _lowered_forward(module, weight)
        lowered += 1
    return (dtype if lowered else None), lowered


def emulated_on(device: str, dtype: str | None) -> bool:
    """Whether products in ``dtype`` on ``device`` run without the hardware that makes them fast: a
    bfloat16 product on a CPU with neither AVX-512 BF16 nor AMX (oneDNN's own test), which is
    slower than float32, not faster (module docstring). False where that cannot be told."""
    if dtype != "bfloat16" or not str(device).startswith("cpu"):
        return False
    try:
        return not bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a private test: a torch without it says nothing
        return False
