"""Typed configuration schema for a sweep, registered with Hydra's ConfigStore.

The YAML files under ``conf/`` fill in these dataclasses; because every node is typed, a key that
does not exist here (a typo) is an error at composition time, not a silently ignored setting.
Call :func:`register_configs` once before Hydra composes (the CLI does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import MISSING, OmegaConf

DATA_DIR = Path(__file__).parent / "data"
GROUPS = ("A", "B", "C")


@dataclass
class ModelConfig:
    """Which model to load and how. ``name_or_path`` is a hub id, a local directory, or
    ``builtin:tiny-llama`` / ``builtin:tiny-gpt2`` (random tiny models built in memory)."""

    name_or_path: str = MISSING
    revision: str | None = None
    dtype: str = "float32"  # float32 | float16 | bfloat16
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    trust_remote_code: bool = False
    bos: str = "auto"  # auto | always | never
    notes: str = ""


@dataclass
class PromptsConfig:
    """A JSONL file of task prompts, one ``{"id": ..., "text": ...}`` object per line."""

    name: str = MISSING
    path: str = MISSING
    limit: int | None = None  # run on the first N prompts only


@dataclass
class PrefixesConfig:
    """A JSONL file of prefixes: ``{"id": ..., "kind": "neutral" | "instruction", "text": ...}``.
    Neutral prefixes make group B, instruction-like ones group C."""

    name: str = MISSING
    path: str = MISSING


@dataclass
class PrefixConfig:
    """How prefixes are cut: each is exactly ``L`` tokens, the separator included."""

    lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    separator: str = "\n\n"
    too_short: str = "error"  # error | repeat


@dataclass
class DecodeConfig:
    """Greedy decoding; the only free setting is how long to continue."""

    max_new_tokens: int = 32  # at least 1


@dataclass
class AnalysisConfig:
    attention: bool = True  # per-layer, per-head attention drift (off: behaviour only)
    noise_floor: bool = True  # A against itself: batched, and without the KV cache
    noise_prompts: int = 8  # how many prompts the noise floor is measured on


@dataclass
class LocateConfig:
    """``harness locate``: coarse lengths, then bisection down to ``resolution`` tokens."""

    coarse: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128, 256])
    resolution: int = 8
    metric: str = "norm_edit_distance"  # or edit_distance, output_kl, attn_kl_mean
    groups: list[str] = field(default_factory=lambda: ["B", "C"])  # whose drift is pooled


@dataclass
class DebugConfig:
    """For testing failure handling: conditions named ``prompt_id/prefix_id/prefix_len`` (or
    ``prompt_id/A``) raise instead of running."""

    fail_conditions: list[str] = field(default_factory=list)


@dataclass
class RunConfig:
    """Everything that defines one sweep (one run directory)."""

    model: ModelConfig = MISSING
    prompts: PromptsConfig = MISSING
    prefixes: PrefixesConfig = MISSING
    prefix: PrefixConfig = field(default_factory=PrefixConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    groups: list[str] = field(default_factory=lambda: list(GROUPS))
    # Isolation interventions (harness/isolation.py): none, mask, mask_reset, decay, delimit.
    isolation: list[str] = field(default_factory=lambda: ["none"])
    isolation_betas: list[float] = field(default_factory=lambda: [1.0, 4.0, 16.0])  # for decay
    seed: int = 0
    # Conditions of one prompt with equal input length run as one batch (never padded); null picks a
    # size from the device's free memory (harness.runner.auto_batch_size).
    batch_size: int | None = None
    # MiB of BOS + prefix KV kept so every prompt reuses it (harness.prefix_cache): speed only, the
    # results are the same whatever it is. null = a quarter of the free memory; 0 = recompute each time.
    prefix_cache_mb: int | None = None
    draw_figures: bool = True
    # A run directory that already holds results: auto = resume when the configuration is the
    # same, refuse when it differs; resume = keep what still applies; fresh = delete and restart.
    on_existing: str = "auto"
    locate: LocateConfig = field(default_factory=LocateConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)


def register_configs() -> None:
    """Register the schema with Hydra and the ``harness_data`` path resolver (idempotent)."""
    from hydra.core.config_store import ConfigStore

    if not OmegaConf.has_resolver("harness_data"):
        OmegaConf.register_new_resolver("harness_data", lambda name: str(DATA_DIR / name))
    ConfigStore.instance().store(name="run_schema", node=RunConfig)
