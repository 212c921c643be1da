"""What continues the conditions: a registry of backends, like the registries of placements,
isolation modes and model sources.

A backend is one :class:`Backend` definition: what it can do (:class:`Capabilities`: the config's
refusals come from these, one rule for every backend, :func:`backend_problems`), a check of its
own settings (``backend.*``), how it starts (``start``: ``"module:function"``, imported only when
a sweep uses it, so a backend's heavy imports cost nothing to the others), and what of the facts
it reports on starting enters every result's key (``result_key``: results of another engine or
version are other results). ``harness`` (the harness's own engine: every measure) and ``vllm``
(an output-only vLLM engine) are registered here; :func:`register_backend`, or an entry point in
the ``prefix_harness.backends`` group (a function called with no arguments that registers), adds
one from outside the package (CONTRIBUTING.md, "A new backend").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.plugins import load_plugins


@dataclass(frozen=True)
class Capabilities:
    """What a backend computes besides greedy continuations (each False: refused in the config)."""

    attention: bool = False  # per-layer, per-head attention measures (analysis.attention)
    noise_floor: bool = False  # the run's own numerical noise: batched against alone (analysis.noise_floor)
    isolation: bool = False  # isolation settings other than none (they act inside attention)
    adapters: bool = False  # a model.adapter merged into the weights in memory
    linear_dtype: bool = False  # linear products in another precision (model.linear_dtype)


@dataclass(frozen=True)
class EngineRequest:
    """What starting an engine needs, as values: the loaded model (its tokenizer, location and
    context), the stop ids, the decoding and analysis settings, the backend's own settings
    (``settings``: the ``backend`` config node) and where its process may write a log."""

    loaded: Any  # harness.model.loading.LoadedModel
    stops: frozenset
    max_new_tokens: int
    longest: int  # the longest input plus max_new_tokens: the context the engine must hold
    seed: int
    dtype: str  # the model's dtype (model.dtype)
    decode_path: str
    attention: bool
    prefix_cache_bytes: int
    linear_dtype: str | None
    settings: Any
    log_dir: Path | None = None


def _no_problems(settings) -> list[str]:
    return []


def _no_key(facts: dict) -> dict:
    return {}


@dataclass(frozen=True)
class Backend:
    name: str
    doc: str
    can: Capabilities
    start: str  # "module:function": (EngineRequest) -> (engine, facts for the manifest, with "name")
    settings_problems: Callable[[Any], list[str]] = _no_problems  # its own backend.* settings
    result_key: Callable[[dict], dict] = _no_key  # the facts' part of every result's key
    stored_model: bool = False  # needs a model stored on disk or on the hub (not one built in memory)
    # the harness computes with the loaded weights; False: the backend serves them itself, and the
    # harness loads the model's tokenizer, config and structure only (no second copy in memory)
    harness_weights: bool = True
    reads: tuple[str, ...] = ()  # the backend.* settings it reads (one it does not, set, is refused)
    experiment: str | None = None  # an experiment config that sets what it cannot do off, for the refusals


BACKENDS: dict[str, Backend] = {}
DTYPES = ("float32", "float16", "bfloat16")


@dataclass
class BackendConfig:
    """The run config's ``backend`` node: which backend continues the conditions (``name``, chosen
    with ``backend=NAME``: conf/backend/), the shipped vLLM backend's settings, and a plug-in's own
    (``options``, read by its ``start`` and checked by its ``settings_problems``)."""

    name: str = "harness"
    # the vLLM environment's Python (null: $PREFIX_HARNESS_VLLM_PYTHON, else .venv-vllm/bin/python)
    python: str | None = None
    # the dtype vLLM computes in (null: model.dtype); bfloat16 is faster, float32 agrees (docs/vllm.md)
    dtype: str | None = None
    block_size: int = 32  # prefix-cache block in tokens: vLLM's CPU default, 128, shares no 64-token prefix
    compile: bool = False  # torch.compile the model: about a minute more to start, faster calls
    # conditions sent to the engine in one call: more keeps it busier, fewer loses less to an interruption
    chunk: int = 512
    # vLLM's own parallelism (GPUs): the model split over this many GPUs of a node / stages of a pipeline
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    # seconds the engine may take to answer one request before it is killed (its conditions fail,
    # the finished stay stored, the log is named); null: wait for ever
    request_timeout_s: float | None = 3600.0
    options: dict = field(default_factory=dict)  # a plug-in backend's own settings


def register_backend(backend: Backend) -> Backend:
    """Add ``backend`` to the registry (a name already taken is an error: one definition each)."""
    if backend.name in BACKENDS and BACKENDS[backend.name] != backend:
        raise HarnessError(f"a backend named {backend.name!r} is already registered")
    if ":" not in backend.start:
        raise HarnessError(f"backend {backend.name!r}: start must be 'module:function', got {backend.start!r}")
    BACKENDS[backend.name] = backend
    return backend


def backend_problems(name: str, settings, *, attention: bool, noise_floor: bool, isolation: list[str],
                     linear_dtype, adapter) -> list[str]:
    """What a run asks of backend ``name`` that it cannot do, from its declared capabilities (one
    rule for every backend), then its own settings' problems."""
    if name not in BACKENDS:
        return [f"backend {name!r} is not registered (backends: {', '.join(sorted(BACKENDS))}); a backend of your "
                f"own is registered with harness.model.backends.register_backend or an entry point "
                f"(CONTRIBUTING.md)"]
    can, problems = BACKENDS[name].can, []
    if settings is not None:  # a setting another backend reads, given to this one, would be ignored
        defaults = BackendConfig()
        unread = [key for key in vars(defaults) if key not in ("name", "options", *BACKENDS[name].reads)
                  and getattr(settings, key, getattr(defaults, key)) != getattr(defaults, key)]
        if unread:
            reader = next((other for other, b in BACKENDS.items() if unread[0] in b.reads), None)
            problems.append(f"backend.{unread[0]} is not a setting of backend={name} (it would be ignored)"
                            + (f"; backend={reader} reads it" if reader else ""))
    if attention and not can.attention:
        experiment = BACKENDS[name].experiment
        problems.append(f"backend={name} measures outputs only: add analysis.attention=false"
                        + (f" (or experiment={experiment})" if experiment else ""))
    if noise_floor and not can.noise_floor:
        problems.append(f"backend={name} has no noise floor of its own (the floor compares the harness engine's "
                        f"batched and alone computations): add analysis.noise_floor=false")
    if any(m != "none" for m in isolation) and not can.isolation:
        problems.append(f"backend={name} cannot apply isolation settings (they act inside the harness's attention): "
                        f"use isolation=[none]")
    if linear_dtype is not None and not can.linear_dtype:
        problems.append(f"model.linear_dtype lowers the harness engine's products; backend={name} computes at its "
                        f"own precision: add model.linear_dtype=null")
    if adapter is not None and not can.adapters:
        problems.append(f"backend={name} serves the weights as stored: model.adapter is merged in memory by the "
                        f"harness only; save the merged model and point model.name_or_path at it")
    return problems + [p for p in BACKENDS[name].settings_problems(settings) if p]


def start_backend(name: str, request: EngineRequest):
    """Start backend ``name``'s engine: ``(engine, facts)`` (facts: what the manifest records)."""
    backend = BACKENDS[name]
    if backend.stored_model and request.loaded.location is None:
        raise HarnessError(f"backend={name} needs a model stored on disk or on the hub; "
                           f"{request.loaded.name_or_path} is built in memory")
    module, function = backend.start.split(":")
    engine, facts = getattr(importlib.import_module(module), function)(request)
    return engine, {"name": name, **facts}


def _vllm_settings(settings) -> list[str]:
    from harness.model.vllm_backend import block_size_problem, vllm_python

    try:  # before anything loads: the model would load for nothing
        vllm_python(settings.python, probe=True)
        environment = []
    except HarnessError as exc:
        environment = [str(exc)]

    dtype = [] if settings.dtype in (None, *DTYPES) else [
        f"backend.dtype must be one of {', '.join(DTYPES)} (or null: model.dtype), got {settings.dtype}"]
    if settings.request_timeout_s is not None and not settings.request_timeout_s > 0:
        dtype.append(f"backend.request_timeout_s must be a positive number of seconds (or null: none), got "
                     f"{settings.request_timeout_s}")
    return environment + dtype + [block_size_problem(settings.block_size, "backend.block_size")] + [
        f"backend.{key} must be at least 1, got {getattr(settings, key)}"
        for key in ("chunk", "tensor_parallel_size", "pipeline_parallel_size") if getattr(settings, key) < 1]


def _vllm_key(facts: dict) -> dict:
    # the prefix cache's block size and compilation change how vLLM splits its products
    return {"backend": f"vllm {facts['vllm']} {facts['dtype']} block {facts['block_size']}"
                       f"{' compiled' if facts['compile'] else ''}", "decode_path": "vllm"}


register_backend(Backend(
    "harness", "the harness's own engine: every measure (attention, noise floor, isolation, output KL)",
    Capabilities(attention=True, noise_floor=True, isolation=True, adapters=True, linear_dtype=True),
    start="harness.measure.engine:start"))  # its results keep the keys they had before backends existed
register_backend(Backend(
    "vllm", "a vLLM engine in its own environment (harness.model.vllm_backend): output measures only",
    Capabilities(), start="harness.measure.vllm_engine:start", settings_problems=_vllm_settings,
    result_key=_vllm_key, stored_model=True, harness_weights=False, experiment="vllm-outputs",
    reads=("python", "dtype", "block_size", "compile", "chunk", "tensor_parallel_size", "pipeline_parallel_size",
           "request_timeout_s")))
load_plugins("backends")
