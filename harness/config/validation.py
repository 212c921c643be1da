"""What types cannot say about a config (positive lengths, a model some source claims, a backend
that can do what the config asks, ...), checked once before any model is loaded."""

from __future__ import annotations

import weakref

from omegaconf import DictConfig, OmegaConf

from harness.config.schema import GROUPS, Group, RunConfig, as_plain
from harness.errors import HarnessError
from harness.inputs.isolation import isolation_problems
from harness.inputs.prefix_source import source_problems
from harness.model.backends import backend_problems
from harness.model.sources import gguf_source, source_for
from harness.paths import adapter_dir

# The configs validate() returned (by identity): validated once, a config is not checked again.
_VALIDATED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def is_validated(cfg) -> bool:
    """Whether ``cfg`` is a config :func:`validate` returned (and so needs no second check)."""
    return _VALIDATED.get(id(cfg)) is cfg


def validate(cfg) -> DictConfig:
    """Check everything types cannot express, before any model is loaded; returns the config merged
    into the schema (which refuses keys it does not have, e.g. an added ``+decode.max_tokens``),
    read-only, so that what was checked is what runs (and is returned as it is if passed again).
    Raises :class:`HarnessError` naming the key."""
    if cfg is None:  # is_validated(None) would hold: a missing entry reads as None
        raise HarnessError("validate: give a config (H.compose(overrides) makes one)")
    if is_validated(cfg):
        return cfg
    # {'model': 'tiny'}: a config group given by name, where the config holds the group's settings
    named = isinstance(cfg, dict) and any(isinstance(cfg.get(g), str) for g in GROUPS)
    if not isinstance(cfg, (DictConfig, RunConfig, dict)) or named:  # a list of overrides: OmegaConf's text otherwise
        raise HarnessError(f"validate takes a config, as H.compose(overrides) makes it (e.g. H.compose(['model=tiny'])), "
                           f"got {type(cfg).__name__} {cfg!r:.60}")
    try:
        typed = OmegaConf.merge(OmegaConf.structured(RunConfig), as_plain(cfg))
    except Exception as exc:  # omegaconf's errors name the key on their first line
        raise HarnessError(f"invalid configuration: {str(exc).strip().splitlines()[0]}") from None
    if OmegaConf.missing_keys(typed):  # ~model removed what every run needs
        raise HarnessError(f"the configuration leaves {', '.join(sorted(OmegaConf.missing_keys(typed)))} without a "
                           f"value: give it (e.g. model=NAME, one of its configs)")
    problems = []

    def positive(key: str, values) -> None:
        bad = [v for v in values if not (isinstance(v, int) and v > 0)]
        if bad:
            problems.append(f"{key} must hold positive integers, got {bad}")

    try:  # some model source must claim the model (harness.model.sources): no guessing at load time
        if not str(typed.model.name_or_path).strip():  # Path('') is '.': "no config.json in ." named no model
            raise HarnessError("model.name_or_path is empty: give a hub id or a local directory, or model=NAME for "
                               "one of the model configs")
        source = source_for(typed.model.name_or_path, gguf_source(typed.model.gguf))
        unrevised = {"builtin": "a tiny model made in memory", "shipped": "a model this package ships",
                     "local": "a local directory"}
        if typed.model.revision is not None and source.name in unrevised:  # a manifest would record a pin of nothing
            raise HarnessError(f"model.revision={typed.model.revision} pins a commit of a hub model, and "
                               f"{typed.model.name_or_path} is {unrevised[source.name]}, which has no revisions (the "
                               f"manifest names it by the sha256 of its weights or files): leave model.revision out")
    except HarnessError as exc:
        problems.append(str(exc))
    if typed.model.context_limit is not None and typed.model.context_limit < 1:
        problems.append(f"model.context_limit must be a positive number of tokens (or null), got "
                        f"{typed.model.context_limit}")
    if typed.model.adapter is not None and not adapter_dir(typed.model.adapter).is_dir():
        problems.append(f"model.adapter={typed.model.adapter} is neither a directory nor an adapter shipped in "
                        f"harness/assets")
    if len(set(typed.locate.groups)) != len(typed.locate.groups):
        problems.append(f"locate.groups lists a group twice: {[g.name for g in typed.locate.groups]}")
    if not 0 <= typed.seed < 2**32:  # what numpy and torch take
        problems.append(f"seed must be between 0 and 2**32 - 1, got {typed.seed}")
    if not typed.prefix.lengths and list(typed.groups) != [Group.A]:
        problems.append("prefix.lengths is empty: give at least one prefix length (e.g. prefix.lengths=[32])")
    positive("prefix.lengths", typed.prefix.lengths)
    if len(set(typed.prefix.lengths)) != len(typed.prefix.lengths):
        problems.append(f"prefix.lengths lists a length twice: {list(typed.prefix.lengths)}")
    if Group.A not in typed.groups:
        problems.append("groups must include A (the reference): drift is measured against it")
    if len(set(typed.groups)) != len(typed.groups):
        problems.append(f"groups lists a group twice: {[g.name for g in typed.groups]}")
    if typed.decode.max_new_tokens < 1:
        problems.append(f"decode.max_new_tokens must be at least 1, got {typed.decode.max_new_tokens}")
    if typed.batch_size is not None and typed.batch_size < 1:
        problems.append(f"batch_size must be at least 1 (or null for automatic), got {typed.batch_size}")
    if typed.prefix_cache_mb is not None and typed.prefix_cache_mb < 0:
        problems.append(f"prefix_cache_mb must be 0 or more (or null for automatic), got {typed.prefix_cache_mb}")
    if not typed.prompts.path.strip():
        problems.append("prompts.path is empty: give a JSONL file (or prompts=NAME, a shipped set)")
    if typed.prompts.limit is not None and typed.prompts.limit < 1:
        problems.append(f"prompts.limit must be positive (or null for all), got {typed.prompts.limit}")
    if typed.prefixes.per_group is not None and typed.prefixes.per_group < 1:
        problems.append(f"prefixes.per_group must be positive (or null for all), got {typed.prefixes.per_group}")
    problems.extend(source_problems(typed.prefixes.path, typed.prefixes.corpus, typed.prefixes.templates,
                                    typed.prefix.injection_at.value))
    noise = typed.analysis
    if noise.noise_floor and not (0 < noise.noise_fraction <= 1):
        problems.append(f"analysis.noise_fraction must be in (0, 1] (or analysis.noise_floor=false), "
                        f"got {noise.noise_fraction}")
    if noise.noise_floor and not (1 <= noise.noise_min <= noise.noise_max):
        problems.append(f"analysis.noise_min and noise_max must satisfy 1 <= noise_min <= noise_max (or "
                        f"analysis.noise_floor=false), got {noise.noise_min} and {noise.noise_max}")
    problems.extend(isolation_problems([m.value for m in typed.isolation], list(typed.isolation_betas)))
    problems.extend(backend_problems(  # one rule for every backend, from what it declares it can do
        typed.backend.name, typed.backend, attention=typed.analysis.attention, noise_floor=typed.analysis.noise_floor,
        isolation=[m.value for m in typed.isolation], linear_dtype=typed.model.linear_dtype,
        adapter=typed.model.adapter))
    if len(set(typed.locate.coarse)) < 2:
        problems.append(f"locate.coarse needs at least two distinct lengths, got {list(typed.locate.coarse)}")
    elif len(set(typed.locate.coarse)) != len(typed.locate.coarse):
        problems.append(f"locate.coarse lists a length twice: {list(typed.locate.coarse)}")
    positive("locate.coarse", typed.locate.coarse)
    if typed.locate.resolution < 1:
        problems.append(f"locate.resolution must be at least 1, got {typed.locate.resolution}")
    if not typed.locate.groups or Group.A in typed.locate.groups:
        problems.append(f"locate.groups must name B and/or C, got {[g.name for g in typed.locate.groups]}")
    if problems:
        raise HarnessError("; ".join(problems))
    OmegaConf.set_readonly(typed, True)
    _VALIDATED[id(typed)] = typed
    return typed
