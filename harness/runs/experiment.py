"""An experiment: a run config made concrete, once.

:meth:`Experiment.build` loads the model and tokenizer, seeds and pins determinism, reads the
prompts and prefixes, assembles the conditions, installs the attention probe when (and only when)
something needs it (attention analysis, or an isolation setting applied inside attention), sizes
the batch and the prefix cache, and computes the fingerprint every stored result is keyed by.
``harness sweep``, ``locate`` and ``check-determinism``, the benchmarks and the tests all start
from one, and run its conditions with :meth:`Experiment.drive`.
"""

from __future__ import annotations

import inspect
import json
import logging
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import torch

from harness.config import Group, validate
from harness.errors import HarnessError
from harness.inputs.chat import unread_chat_settings
from harness.inputs.checks import CHECKS_VERSION
from harness.inputs.conditions import Condition, build_conditions, check_context
from harness.inputs.isolation import Isolation, isolations
from harness.inputs.prefix_source import PrefixSource, load_prefix_source
from harness.inputs.texts import Prefix, Prompt, load_prompts
from harness.measure.driver import DriveOutcome, drive
from harness.measure.metrics import METRICS
from harness.model.backends import BACKENDS, EngineRequest, start_backend
from harness.model.decoding import stop_ids
from harness.model.linear_precision import emulated_on, lower_linears
from harness.model.loading import LoadedModel, load_from_config
from harness.model.probe import install_probe
from harness.model.resources import auto_batch_size, keep_freed_memory, prefix_cache_bytes
from harness.runs.environment import set_determinism
from harness.runs.store import RESULT_SCHEMA_VERSION, fingerprint

log = logging.getLogger(__name__)


@dataclass
class Experiment:
    cfg: object  # the validated run config
    loaded: LoadedModel
    prompts: list[Prompt]
    prefixes: list[Prefix]
    conditions: list[Condition]
    engine: object  # what continues the conditions: harness.measure.engine.Engine, or a backend's own
    batch_size: int
    determinism: dict
    result_fingerprint: dict  # everything besides the condition itself that determines a result
    attn_base: str = ""  # the attention implementation the model computes with (the probe wraps it)
    allocator: dict | None = None  # the CPU allocator's settings (speed only: harness.model.resources)
    lowered_linears: int = 0  # linear layers multiplying in model.linear_dtype (harness.model.linear_precision)
    backend: dict | None = None  # what continues the conditions: its name and facts (harness.model.backends)
    source: PrefixSource | None = None  # where the prefixes came from (a corpus: its package, version, file hashes)
    skipped: list = None  # (prefix_id, length, reason) of conditions left out (prefix.too_short=skip)

    @classmethod
    def build(cls, cfg, *, device: str | None = None, attention: bool | None = None, lengths: list[int] | None = None,
              groups: list[str] | None = None, settings: list[Isolation] | None = None,
              log_dir: Path | None = None, describe: bool = True) -> Experiment:
        """Build from a run config; ``device`` overrides the config's, ``attention`` its analysis
        switch, and ``lengths``, ``groups`` and isolation ``settings`` the conditions it describes
        (``harness locate`` evaluates its own lengths). ``log_dir``: where an engine process writes
        its log (a sweep's run directory; else a temporary file). ``describe``: log the design (a
        caller that computes a part of it says what it computes instead)."""
        cfg = validate(cfg)
        m = cfg.model
        allocator = keep_freed_memory()  # before the model's tensors are allocated
        attention = bool(cfg.analysis.attention) if attention is None else attention
        prompts = load_prompts(cfg.prompts.path, cfg.prompts.limit)
        source = load_prefix_source(cfg.prefixes.path, cfg.prefixes.corpus, cfg.prefixes.per_group, cfg.seed,
                                    cfg.prefixes.templates)
        prefixes = source.prefixes
        loaded = load_from_config(m, device=device, weights=BACKENDS[cfg.backend.name].harness_weights)
        if m.context_limit is not None:
            loaded.max_positions = min(m.context_limit, loaded.max_positions or m.context_limit)
        determinism = set_determinism(cfg.seed, loaded.device)
        exp = cls(cfg, loaded, prompts, prefixes, [], None, 0, determinism, {})  # type: ignore[arg-type]
        exp.source = source
        exp.allocator = allocator if loaded.device == "cpu" else None
        exp.conditions = exp.conditions_at(lengths=lengths, groups=groups, settings=settings)
        # what shapes every chat render: on a raw placement, refused (a placement's own settings,
        # which an experiment may set for all the placements it sweeps, are said below instead)
        chat_settings = [k for k, v in (("chat.system_prompt", cfg.chat.system_prompt),
                                        ("chat.template_kwargs", dict(cfg.chat.template_kwargs))) if v]
        if exp.placement == "raw" and chat_settings:  # a raw concatenation renders no chat template
            raise HarnessError(f"{' and '.join(chat_settings)} shape chat placements, and this run's placement is raw "
                               f"(prefix.placement={cfg.prefix.placement.value}): they would be ignored; give a chat "
                               f"placement (prefix.placement=system, document, ...) or leave them out")
        template = getattr(loaded.tokenizer, "chat_template", None)
        # conf/prefixes/<benchmark>.yaml sets chat.generic_tool_role for its tool turns: not the user's to hear of
        by_source = ("generic_tool_role",) if cfg.prefixes.corpus else ()
        for unread in unread_chat_settings(cfg.chat, exp.placement, template, by_source):
            log.warning("not used by this run: %s", unread)
        exp.attn_base = loaded.model.config._attn_implementation
        if attention or any(c.isolation.key_bias is not None for c in exp.conditions):
            # masks and biases are applied inside the harness's attention function
            exp.attn_base = install_probe(loaded.model)
        # after the probe's check against eager attention (it checks the attention function; lowered
        # products would make its two passes round apart before attention is reached)
        linear_dtype, exp.lowered_linears = lower_linears(loaded.model, m.linear_dtype and m.linear_dtype.value)
        if exp.lowered_linears and emulated_on(loaded.device, linear_dtype):
            log.warning("model.linear_dtype=%s on a CPU without native %s products (no AVX-512 BF16 or AMX): they "
                        "are emulated, slower than float32 (0.33x in benchmarks/real_models.py on such a CPU); "
                        "add model.linear_dtype=null to compute at full precision", linear_dtype, linear_dtype)
        longest = max(len(c.assembled.input_ids) for c in exp.conditions) + cfg.decode.max_new_tokens
        exp.batch_size = cfg.batch_size or auto_batch_size(loaded.model, loaded.dtype, loaded.device, longest)
        stops = stop_ids(loaded.model, loaded.tokenizer)
        # what continues the conditions: the backend the config names (harness.model.backends)
        exp.engine, exp.backend = start_backend(cfg.backend.name, EngineRequest(
            loaded, frozenset(stops), cfg.decode.max_new_tokens, longest, cfg.seed, m.dtype.value,
            cfg.decode.path.value, attention, prefix_cache_bytes(cfg.prefix_cache_mb, loaded.device), linear_dtype,
            cfg.backend, log_dir))
        exp.result_fingerprint = {
            "schema": RESULT_SCHEMA_VERSION,
            "metrics": [m.name for m in METRICS],  # a new measure is computed for every stored condition
            "checks": CHECKS_VERSION,  # stored results carry their obeyed answers: other rules, other results
            "model": m.name_or_path,
            "resolved_revision": loaded.resolved_revision,
            "model_code": model_code_sha256(loaded.model) if m.trust_remote_code else None,
            "tokenizer": tokenizer_fingerprint(loaded.tokenizer),
            "dtype": loaded.dtype,
            # results from before linear precisions existed multiplied at the weights' own
            **({"linear_dtype": linear_dtype} if linear_dtype else {}),
            "device": torch.device(loaded.device).type,
            # CPU reductions are split over threads: another thread count rounds differently
            "cpu_threads": torch.get_num_threads() if loaded.device == "cpu" else None,
            "attn_implementation": exp.attn_base,
            "max_new_tokens": cfg.decode.max_new_tokens,
            # results from before decode paths existed were stepwise: their keys stay valid for it;
            # the other paths' KL and choices are read straight off the logits since read-off v2
            **({"decode_path": cfg.decode.path.value, "read_off": 2} if cfg.decode.path.value != "stepwise" else {}),
            "eos": sorted(stops),
            "attention_analysis": attention,
            "batch_size": exp.batch_size,
            "special_tokens": cfg.special_tokens.value,
            "versions": {name: _version(name) for name in ("torch", "transformers")},
            # which engine (and version, precision) continued them; the harness's adds nothing
            **BACKENDS[cfg.backend.name].result_key(exp.backend),
            # a public benchmark's texts as read: another version or file is another result
            **({"prefix_source": {k: source.facts[k] for k in ("corpus", "package", "version", "files")}}
               if source.facts else {}),
        }
        settings_n = len({c.isolation for c in exp.conditions if c.group != "A"})
        (log.info if describe else log.debug)(
            "%d prompts x groups %s x lengths %s%s = %d conditions on %s (%s, %s), batch size %d%s",
            len(prompts), groups or [g.name for g in cfg.groups], list(lengths or cfg.prefix.lengths),
            f" x {settings_n} isolation settings" if settings_n > 1 else "", len(exp.conditions),
            m.name_or_path, loaded.dtype, loaded.device, exp.batch_size, "" if cfg.batch_size else " (automatic)")
        if describe and exp.skipped:  # the count above is after them: said here, not only in the manifest
            left = skipped_summary(exp.skipped)
            log.warning("prefix.too_short=skip left out prefixes (%s), each one condition per prompt; e.g. %s",
                        ", ".join(f"{n} at {length} tokens" for length, n in left["prefixes_by_length"].items()),
                        left["example"])
        return exp

    @property
    def placement(self) -> str:
        """``prefix.placement``, with ``auto`` resolved to the model's default placement."""
        chosen = self.cfg.prefix.placement.value
        return self.cfg.model.default_placement.value if chosen == "auto" else chosen

    @property
    def model_label(self) -> str:
        return self.cfg.model.name_or_path

    @property
    def tokenizer(self):
        return self.loaded.tokenizer

    def conditions_at(self, lengths: list[int] | None = None, groups: list[str] | None = None,
                      settings: list[Isolation] | None = None) -> list[Condition]:
        """The conditions of the config, or of other ``lengths``, ``groups`` and isolation
        ``settings``; refuses any that do not fit the model's context window."""
        cfg = self.cfg
        if settings is None:
            settings = isolations(list(cfg.isolation), list(cfg.isolation_betas))
        lengths = list(lengths or cfg.prefix.lengths)
        longest = max(lengths, default=0) + cfg.decode.max_new_tokens
        if self.loaded.max_positions is not None and longest > self.loaded.max_positions:
            # before any prefix is built: prefix.too_short=repeat would otherwise fill memory first
            raise HarnessError(f"prefix length {max(lengths)} plus {cfg.decode.max_new_tokens} new tokens exceeds the "
                               f"model's context window of {self.loaded.max_positions}; use shorter prefix lengths "
                               f"(prefix.lengths; for locate, locate.coarse) or decode.max_new_tokens")
        skipped: list = []
        conditions = build_conditions(
            self.loaded.tokenizer, self.prompts, self.prefixes,
            groups=list(groups or [g.value for g in cfg.groups]),
            lengths=lengths, separator=cfg.prefix.separator,
            bos_policy=cfg.model.bos.value, too_short=cfg.prefix.too_short.value,
            isolations=settings, parse_special=cfg.special_tokens.value == "control",
            placement=self.placement, chat=cfg.chat, injection_at=cfg.prefix.injection_at.value,
            skipped=skipped,
        )
        self.skipped = skipped
        asked = set(groups or [g.value for g in cfg.groups]) - {"A"}
        if asked and skipped and not any(c.group != "A" for c in conditions):  # every prefix left out
            prefix_id, length, why = skipped[0]  # why: what does not fit (its advice, skip, is what was done)
            raise HarnessError(f"every B and C condition was left out at lengths {lengths} ({len(skipped)} skipped; "
                               f"first: {prefix_id} at {length} tokens: {why}); give longer prefix.lengths (for "
                               f"locate, locate.coarse)")
        check_context(conditions, cfg.decode.max_new_tokens, self.loaded.max_positions)
        return conditions

    def keys(self, conditions: list[Condition] | None = None) -> dict[Condition, str]:
        """The content hash each condition's result is stored under: the result fingerprint, the
        condition's keys, its input ids and spans, and its reference A's input ids."""
        conditions = self.conditions if conditions is None else conditions
        reference_of = {c.prompt_id: c for c in conditions if c.group == Group.A.value}
        return {c: fingerprint({**self.result_fingerprint, **c.identity(reference_of[c.prompt_id])})
                for c in conditions}

    def close(self) -> None:
        """Stop what the experiment started besides the model (an engine's process, where it has one)."""
        worker = getattr(self.engine, "worker", None)
        if worker is not None:
            worker.close()

    def drive(self, conditions: list[Condition] | None = None, **kwargs) -> DriveOutcome:
        """Run ``conditions`` (default: all) through the engine (:func:`harness.measure.driver.drive`)."""
        kwargs.setdefault("batch_size", self.batch_size)
        return drive(self.engine, self.conditions if conditions is None else conditions, **kwargs)


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    template = getattr(tokenizer, "chat_template", None)
    return fingerprint([type(tokenizer).__name__, text, template])


def model_code_sha256(model: torch.nn.Module) -> str:
    """sha256 of the Python files next to the model class's source: remote code can change a
    result without changing a weight."""
    import hashlib

    source = Path(inspect.getsourcefile(type(model)) or "")
    h = hashlib.sha256()
    for f in sorted(source.parent.glob("*.py")) if source.is_file() else []:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def skipped_summary(skipped: list[tuple[str, int, str]]) -> dict | None:
    """What ``prefix.too_short=skip`` left out: per length, how many prefixes (each one condition per
    prompt and isolation setting), and the first reason given; None when nothing was."""
    if not skipped:
        return None
    by_length: dict[int, set] = {}
    for prefix_id, length, _ in skipped:
        by_length.setdefault(int(length), set()).add(prefix_id)
    return {"prefixes_by_length": {str(n): len(ids) for n, ids in sorted(by_length.items())},
            "example": skipped[0][2]}
