"""Low-rank adapters (LoRA): a small trained change to a big model's linear layers.

The obedient demo model built on SmolLM2 is a few hundred thousand adapter numbers on top of a
135M-parameter model that ships as a GGUF file in a package: the repository ships the adapter,
the weights come from the package. An adapted linear layer computes

    y = W x + (alpha / rank) * B (A x),    A: [rank, in_features], B: [out_features, rank]

During training (:func:`add_adapters`) W is frozen and only A and B learn. To run the model the
change is merged into W (:func:`merge_adapter`): the model is then an ordinary model of its
family, so every exactness guarantee of the harness holds unchanged.

On disk an adapter is a directory with ``adapter.safetensors`` (float32 ``<module>.lora_A`` and
``<module>.lora_B``) and ``adapter.json`` (rank, alpha, the adapted module names, and the base
model's identity, checked when merged)."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import torch

from harness.errors import HarnessError

ADAPTER_WEIGHTS = "adapter.safetensors"
ADAPTER_CONFIG = "adapter.json"


class LoRALinear(torch.nn.Module):
    """A frozen ``torch.nn.Linear`` plus a trainable low-rank change. ``lora_B`` starts at zero, so
    the adapted model starts exactly as the base model."""

    def __init__(self, base: torch.nn.Linear, rank: int, alpha: float, seed: int):
        super().__init__()
        self.base, self.scale = base, alpha / rank
        base.weight.requires_grad_(False)
        if base.bias is not None:
            base.bias.requires_grad_(False)
        gen = torch.Generator().manual_seed(seed)
        a = torch.empty(rank, base.in_features)
        torch.nn.init.kaiming_uniform_(a, a=math.sqrt(5), generator=gen)
        self.lora_A = torch.nn.Parameter(a.to(base.weight.device))
        self.lora_B = torch.nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., in_features]
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scale

    def delta(self) -> torch.Tensor:
        """The change to the base weight: [out_features, in_features]."""
        return (self.lora_B @ self.lora_A) * self.scale


def _named_linears(model: torch.nn.Module, targets: tuple[str, ...]) -> list[tuple[str, torch.nn.Linear]]:
    found = [(name, module) for name, module in model.named_modules()
             if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets]
    if not found:
        raise HarnessError(f"no linear layer of the model is named one of {list(targets)}; "
                           f"adaptable names are e.g. q_proj, k_proj, v_proj, o_proj")
    return found


def add_adapters(model: torch.nn.Module, rank: int, alpha: float, targets: tuple[str, ...],
                 seed: int = 0) -> list[str]:
    """Freeze every parameter of ``model`` and wrap each linear layer whose last name is in
    ``targets`` (``q_proj`` ...) in a :class:`LoRALinear`; returns the wrapped modules' names."""
    if rank < 1:
        raise HarnessError(f"the adapter rank must be at least 1, got {rank}")
    for p in model.parameters():
        p.requires_grad_(False)
    names = []
    for i, (name, linear) in enumerate(_named_linears(model, targets)):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, LoRALinear(linear, rank, alpha, seed + i))
        names.append(name)
    return names


def adapter_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The trained adapter of a model :func:`add_adapters` wrapped: float32 copies of A and B."""
    out = {}
    for name, module in model.named_modules():
        if isinstance(module, LoRALinear):
            out[f"{name}.lora_A"] = module.lora_A.detach().float().cpu().contiguous()
            out[f"{name}.lora_B"] = module.lora_B.detach().float().cpu().contiguous()
    return out


def merge_wrapped(model: torch.nn.Module) -> torch.nn.Module:
    """Replace each :class:`LoRALinear` of ``model`` by its base layer with the change merged in,
    computed as :func:`merge_adapter` computes it from a saved adapter (same weights, bit for bit)."""
    tensors = adapter_tensors(model)
    scale = {name: module.scale for name, module in model.named_modules() if isinstance(module, LoRALinear)}
    for name in scale:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, getattr(parent, child).base)
    _merge(model, tensors, scale)
    return model


def _merge(model: torch.nn.Module, tensors: dict[str, torch.Tensor], scale: dict[str, float]) -> None:
    with torch.no_grad():
        for name, s in scale.items():
            linear = model.get_submodule(name)
            delta = (tensors[f"{name}.lora_B"] @ tensors[f"{name}.lora_A"]) * s  # float32, on the CPU
            linear.weight.copy_((linear.weight.float().cpu() + delta).to(linear.weight.dtype))


def save_adapter(model: torch.nn.Module, out: Path, *, rank: int, alpha: float, base: dict) -> int:
    """Write the adapter of a wrapped ``model`` to ``out`` (``adapter.safetensors`` and
    ``adapter.json``, with ``base``: the base model's identity); returns the weights' size in bytes."""
    from safetensors.torch import save_file

    from harness.io import atomic_write, write_json

    tensors = adapter_tensors(model)
    modules = sorted({k.rsplit(".", 1)[0] for k in tensors})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / ADAPTER_WEIGHTS, lambda tmp: save_file(tensors, str(tmp)))
    write_json({"rank": rank, "alpha": alpha, "modules": modules, "base": base}, out / ADAPTER_CONFIG)
    return (out / ADAPTER_WEIGHTS).stat().st_size


def adapter_sha256(path: Path) -> str:
    """Content hash of an adapter directory (its weights and its description)."""
    digest = hashlib.sha256()
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        digest.update((path / name).read_bytes())
    return digest.hexdigest()


def read_adapter(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """``(description, tensors)`` of a saved adapter, with a clear error for a missing or damaged one."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    config_file, weights_file = path / ADAPTER_CONFIG, path / ADAPTER_WEIGHTS
    if not config_file.is_file() or not weights_file.is_file():
        raise HarnessError(f"{path} is not an adapter: it needs {ADAPTER_CONFIG} and {ADAPTER_WEIGHTS}")
    try:
        description = json.loads(config_file.read_text(encoding="utf-8"))
        tensors = load_file(str(weights_file))
    except (json.JSONDecodeError, SafetensorError) as exc:
        raise HarnessError(f"the adapter in {path} is damaged ({type(exc).__name__}: "
                           f"{(str(exc).splitlines() or [''])[0]}); restore it from the repository") from None
    _check_description(path, description)
    missing = [m for m in description["modules"] if f"{m}.lora_A" not in tensors or f"{m}.lora_B" not in tensors]
    if missing or not description["modules"]:
        raise HarnessError(f"the adapter in {path} lacks the weights of {missing or 'every module'}")
    rank = description["rank"]
    for m in description["modules"]:
        a, b = tensors[f"{m}.lora_A"], tensors[f"{m}.lora_B"]
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != rank or b.shape[1] != rank:
            raise HarnessError(f"the adapter in {path} is damaged: {m}'s lora_A is {tuple(a.shape)} and lora_B "
                               f"{tuple(b.shape)}, not [{rank}, in] and [out, {rank}] for its rank {rank}")
    return description, tensors


def _check_description(path: Path, description) -> None:
    """``adapter.json`` holds what merging needs: a rank of at least 1, a number alpha, module names."""
    where = f"{path / ADAPTER_CONFIG}"
    if not isinstance(description, dict):
        raise HarnessError(f"{where} must be a JSON object with rank, alpha and modules, not a "
                           f"{type(description).__name__}")
    rank, alpha, modules = description.get("rank"), description.get("alpha"), description.get("modules")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise HarnessError(f"{where}: rank must be a whole number of at least 1, got {rank!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise HarnessError(f"{where}: alpha must be a number, got {alpha!r}")
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise HarnessError(f"{where}: modules must be a list of module names, got {modules!r}")


def merge_adapter(model: torch.nn.Module, path: Path, base_sha256: str | None) -> dict:
    """Merge the adapter saved in ``path`` into ``model``'s weights. ``base_sha256``: the loaded
    base's identity (a GGUF's sha256), refused when the adapter was trained on another base.
    Returns the adapter's description."""
    description, tensors = read_adapter(path)
    trained_on = description.get("base", {}).get("gguf_sha256")
    if trained_on and base_sha256 and trained_on != base_sha256:
        raise HarnessError(f"the adapter in {path} was trained on the model with GGUF sha256 {trained_on[:16]}..., "
                           f"not on this one ({base_sha256[:16]}...); point model.gguf at the file it names")
    scale = description["alpha"] / description["rank"]
    names = dict(model.named_modules())
    unknown = [m for m in description["modules"] if not isinstance(names.get(m), torch.nn.Linear)]
    if unknown:
        raise HarnessError(f"the adapter in {path} adapts {unknown[:3]}, which this model does not have as linear "
                           f"layers: it belongs to another architecture")
    for m in description["modules"]:
        shape = (names[m].out_features, names[m].in_features)
        got = (tensors[f"{m}.lora_B"].shape[0], tensors[f"{m}.lora_A"].shape[1])
        if got != shape:
            raise HarnessError(f"the adapter in {path} does not fit {m}: {got} against the model's {shape}")
    _merge(model, tensors, dict.fromkeys(description["modules"], scale))
    return description

