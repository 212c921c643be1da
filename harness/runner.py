"""One sweep, start to finish: load, assemble, decode, measure, write the run directory.

``run(cfg, run_dir)`` is a plain function (the Hydra entry point in ``cli`` only calls it), so it
can be tested and called from a notebook with a config built in code.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from omegaconf import OmegaConf
from tqdm.auto import tqdm

from .assembly import Condition, build_conditions, check_context
from .decoding import Continuation
from .engine import Engine, Result
from .errors import HarnessError
from .isolation import Isolation, isolations
from .manifest import harness_git_commit, now_iso, package_versions, set_determinism
from .metrics import output_drift
from .models import LoadedModel, load_model
from .probe import install_probe
from .report import write_outputs
from .store import RESULT_SCHEMA_VERSION, ResultStore, fingerprint
from .tables import (KEY_COLUMNS, attention_frame, conditions_frame, headline_attention, sha256_file, write_json,
                     write_parquet)
from .texts import load_prefixes, load_prompts

log = logging.getLogger(__name__)
KIND_OF_GROUP = {"A": None, "B": "neutral", "C": "instruction"}
# Settings that do not change any result: a run directory may be resumed with them changed.
NOT_RESULT_KEYS = {"on_existing", "draw_figures", "debug", "locate", "prefix_cache_mb"}
LOCATE_METRICS = ("norm_edit_distance", "edit_distance", "output_kl", "attn_kl_mean")


def condition_record(model_label: str, result: Result, y_a: Continuation, tokenizer) -> dict:
    """The conditions-table row of one condition."""
    cond, y_x, a = result.condition, result.continuation, result.condition.assembled
    return {
        **condition_keys(model_label, cond),
        "prefix_kind": KIND_OF_GROUP[cond.group],
        **output_drift(y_x.ids, y_a.ids),
        "continuation_text": tokenizer.decode(list(y_x.ids)),
        "continuation_ids": list(y_x.ids),
        "n_continuation_tokens": len(y_x.ids),
        "stopped_on_eos": y_x.stopped_on_eos,
        "input_ids": list(a.input_ids),
        "n_input_tokens": len(a.input_ids),
        "prefix_start": a.prefix_start,
        "prefix_end": a.prefix_end,
        "task_start": a.task_start,
        "task_end": a.task_end,
        "output_kl": result.output_kl,
        **headline_attention(result.attention, result.n_queries),
        "seconds": result.seconds,
    }


def condition_keys(model_label: str, cond: Condition) -> dict:
    return {
        "model": model_label,
        "prompt_id": cond.prompt_id,
        "group": cond.group,
        "prefix_id": cond.prefix_id,
        "prefix_len": cond.prefix_len,
        "isolation": cond.isolation.mode,
        "beta": cond.isolation.beta,
    }


def batches_of(conditions: list[Condition], batch_size: int) -> list[list[Condition]]:
    """Consecutive runs of same-length conditions, at most ``batch_size`` each (no padding needed)."""
    out: list[list[Condition]] = []
    for cond in conditions:
        head = out[-1][0] if out else None
        if (head is not None and len(out[-1]) < batch_size and head.isolation == cond.isolation
                and len(head.assembled.input_ids) == len(cond.assembled.input_ids)):
            out[-1].append(cond)
        else:
            out.append([cond])
    return out


def condition_label(cond: Condition) -> str:
    """``prompt_id/prefix_id/prefix_len[/isolation]`` (``prompt_id/A`` for A): how failures are named."""
    if cond.group == "A":
        return f"{cond.prompt_id}/A"
    iso = "" if cond.isolation.mode == "none" else f"/{cond.isolation.label}"
    return f"{cond.prompt_id}/{cond.prefix_id}/{cond.prefix_len}{iso}"


def condition_key(result_fingerprint: dict, cond: Condition, reference: Condition) -> str:
    """Content hash of everything that determines this condition's result."""
    a, r = cond.assembled, reference.assembled
    return fingerprint({
        **result_fingerprint,
        "keys": [cond.prompt_id, cond.group, cond.prefix_id, cond.prefix_len, cond.isolation.mode,
                 cond.isolation.beta],
        "input_ids": a.input_ids,
        "spans": [a.prefix_start, a.prefix_end, a.task_start, a.task_end],
        "reference_input_ids": r.input_ids,
    })


class InjectedFailure(RuntimeError):
    """Raised for conditions listed in ``debug.fail_conditions`` (to exercise failure handling)."""


@dataclass
class SweepOutcome:
    computed: int
    reused: int
    failures: list[dict]


def run_conditions(engine: Engine, conditions: list[Condition], *, store: ResultStore, keys: dict[Condition, str],
                   model_label: str, tokenizer, batch_size: int, fail_on: frozenset[str] = frozenset(),
                   progress: bool = True) -> SweepOutcome:
    """Compute every condition whose result is not stored yet, storing each as it finishes.

    A runs once per prompt that still has work; a condition (or batch) that raises is recorded as
    a failure and the sweep goes on."""
    by_prompt: dict[str, list[Condition]] = defaultdict(list)
    for cond in conditions:
        by_prompt[cond.prompt_id].append(cond)
    done = sum(store.has(keys[c]) for c in conditions)
    computed, failures = 0, []

    def save(result: Result, y_a: Continuation) -> None:
        store.save(keys[result.condition], condition_record(model_label, result, y_a, tokenizer),
                   result.attention, result.n_queries)

    def fail(conds: list[Condition], exc: Exception) -> None:
        for c in conds:
            entry = {"condition": condition_label(c), "prompt_id": c.prompt_id, "group": c.group,
                     "prefix_id": c.prefix_id, "prefix_len": c.prefix_len}
            store.record_failure(keys[c], entry, exc)
            failures.append({**entry, "error": f"{type(exc).__name__}: {exc}"})
            log.error("condition %s failed: %s: %s", condition_label(c), type(exc).__name__, exc)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def check_injected(conds: list[Condition]) -> None:
        for c in conds:
            if condition_label(c) in fail_on:
                raise InjectedFailure(f"injected failure for {condition_label(c)} (debug.fail_conditions)")

    with tqdm(total=len(conditions), initial=done, desc="conditions", unit="cond", disable=not progress) as bar:
        for conds in by_prompt.values():
            missing = [c for c in conds if not store.has(keys[c])]
            if not missing:
                continue
            (a,) = [c for c in conds if c.group == "A"]
            try:
                check_injected([a])
                ref, a_result = engine.reference(a)
            except Exception as exc:  # noqa: BLE001 - one prompt's failure must not end the sweep
                fail(missing, exc)
                bar.update(len(missing))
                continue
            if a in missing:
                save(a_result, ref.continuation)
                computed += 1
                bar.update()
            others = sorted((c for c in missing if c.group != "A"),
                            key=lambda c: (len(c.assembled.input_ids), c.isolation.label))
            pending = batches_of(others, batch_size)
            while pending:
                batch = pending.pop(0)
                try:
                    check_injected(batch)
                    results = engine.conditions(ref, batch)
                except Exception as exc:  # noqa: BLE001
                    if len(batch) > 1:  # find the culprit (or fit in memory): retry one at a time
                        log.warning("a batch of %d failed (%s: %s); retrying its conditions one at a time",
                                    len(batch), type(exc).__name__, exc)
                        pending[:0] = [[c] for c in batch]
                        continue
                    fail(batch, exc)
                else:
                    for r in results:
                        save(r, ref.continuation)
                    computed += len(batch)
                bar.update(len(batch))
    return SweepOutcome(computed=computed, reused=done, failures=failures)


def tables_from_store(store: ResultStore, conditions: list[Condition], keys: dict[Condition, str],
                      attention: bool) -> dict[str, pd.DataFrame]:
    """The run's tables, rebuilt from the stored results in the sweep's condition order."""
    records, blocks, counts, cond_keys = [], [], [], []
    for cond in conditions:
        if not store.has(keys[cond]):
            continue
        record, block, n_queries = store.load(keys[cond])
        records.append(record)
        blocks.append(block)
        counts.append(n_queries)
        cond_keys.append({k: record[k] for k in KEY_COLUMNS})
    tables = {"conditions.parquet": conditions_frame(records)} if records else {}
    if attention and records:
        tables["attention.parquet"] = attention_frame(cond_keys, blocks, counts)
    return tables


def prepare_run_dir(run_dir: Path, config_fingerprint: str, on_existing: str) -> ResultStore:
    """Open the run directory's store, refusing results of a different configuration unless asked."""
    if on_existing not in ("auto", "resume", "fresh"):
        raise HarnessError(f"on_existing must be auto, resume or fresh, got {on_existing!r}")
    store = ResultStore(run_dir)
    marker = run_dir / "run_fingerprint.json"
    previous = json.loads(marker.read_text())["config"] if marker.is_file() else None
    has_results = any(store.results.glob("*.npz")) or any(store.failures.glob("*.json"))
    if on_existing == "fresh":
        store.clear()
    elif has_results and previous != config_fingerprint and on_existing == "auto":
        raise HarnessError(
            f"{run_dir} holds results of a different configuration; pass on_existing=resume to keep the "
            f"results that still apply (they are keyed by content, so nothing stale is reused), "
            f"on_existing=fresh to delete them, or choose another hydra.run.dir"
        )
    write_json({"config": config_fingerprint}, marker)
    return store


def load_configured_model(m, device: str | None = None) -> LoadedModel:
    """The model a ``model`` config node names (``device`` overrides the node's device)."""
    return load_model(m.name_or_path, revision=m.revision, dtype=m.dtype, device=device or m.device,
                      trust_remote_code=m.trust_remote_code)


def configured_conditions(cfg, tokenizer, prompts, prefixes, *, groups=None, lengths=None,
                          settings: list[Isolation] | None = None) -> list[Condition]:
    """The conditions a run config describes; ``groups``, ``lengths`` and isolation ``settings``
    override the config's (``harness locate`` evaluates one length at a time)."""
    if settings is None:
        settings = isolations(list(cfg.isolation), list(cfg.isolation_betas))
    return build_conditions(
        tokenizer, prompts, prefixes, groups=list(groups or cfg.groups), lengths=list(lengths or cfg.prefix.lengths),
        separator=cfg.prefix.separator, bos_policy=cfg.model.bos, repeat_short=cfg.prefix.too_short == "repeat",
        isolations=settings,
    )


def run(cfg, run_dir: str | Path, progress: bool = True) -> Path:
    """Run the sweep described by ``cfg`` (a :class:`harness.config.RunConfig`) into ``run_dir``.

    Results already stored in ``run_dir`` by an interrupted run of the same configuration are
    reused; raises :class:`SweepFailed` (after writing the tables of the rest) if a condition failed.
    """
    run_dir = Path(run_dir)
    started = now_iso()
    m = cfg.model
    if cfg.batch_size is not None and cfg.batch_size < 1:
        raise HarnessError(f"batch_size must be at least 1 (or null for automatic), got {cfg.batch_size}")
    if cfg.decode.max_new_tokens < 1:
        raise HarnessError(f"decode.max_new_tokens must be at least 1, got {cfg.decode.max_new_tokens}")
    loaded = load_configured_model(m)
    determinism = set_determinism(cfg.seed, loaded.device)
    prompts = load_prompts(cfg.prompts.path, cfg.prompts.limit)
    prefixes = load_prefixes(cfg.prefixes.path)
    conditions = configured_conditions(cfg, loaded.tokenizer, prompts, prefixes)
    check_context(conditions, cfg.decode.max_new_tokens, loaded.max_positions)
    log.info("%d prompts x groups %s x lengths %s = %d conditions on %s (%s, %s)", len(prompts),
             list(cfg.groups), list(cfg.prefix.lengths), len(conditions), m.name_or_path, loaded.dtype,
             loaded.device)

    batch_size = cfg.batch_size or auto_batch_size(loaded, max(len(c.assembled.input_ids) for c in conditions)
                                                   + cfg.decode.max_new_tokens)
    log.info("batch size %d%s", batch_size, "" if cfg.batch_size else " (automatic)")
    cache_budget = prefix_cache_bytes(cfg.prefix_cache_mb, loaded.device)
    config = OmegaConf.to_container(OmegaConf.create(cfg), resolve=True) if not isinstance(cfg, dict) else cfg
    store = prepare_run_dir(run_dir, fingerprint({k: v for k, v in config.items() if k not in NOT_RESULT_KEYS}),
                            cfg.on_existing)
    if cfg.analysis.attention or any(c.isolation.key_bias is not None for c in conditions):
        install_probe(loaded.model)  # masks and biases are applied inside the harness's attention function
    result_fp = {
        "schema": RESULT_SCHEMA_VERSION,
        "model": m.name_or_path,
        "resolved_revision": loaded.resolved_revision,
        "tokenizer": tokenizer_fingerprint(loaded.tokenizer),
        "dtype": loaded.dtype,
        "device": torch.device(loaded.device).type,
        "attn_implementation": loaded.model.config._attn_implementation,
        "max_new_tokens": cfg.decode.max_new_tokens,
        "eos": loaded.tokenizer.eos_token_id,
        "attention_analysis": bool(cfg.analysis.attention),
        "batch_size": batch_size,
    }
    reference_of = {c.prompt_id: c for c in conditions if c.group == "A"}
    keys = {c: condition_key(result_fp, c, reference_of[c.prompt_id]) for c in conditions}
    engine = Engine(loaded.model, loaded.tokenizer.eos_token_id, cfg.decode.max_new_tokens, cfg.analysis.attention,
                    cache_budget)
    outcome = run_conditions(engine, conditions, store=store, keys=keys, model_label=m.name_or_path,
                             tokenizer=loaded.tokenizer, batch_size=batch_size,
                             fail_on=frozenset(cfg.debug.fail_conditions), progress=progress)
    log.info("%d conditions computed, %d reused from earlier runs, %d failed", outcome.computed, outcome.reused,
             len(outcome.failures))
    tables = tables_from_store(store, conditions, keys, cfg.analysis.attention)
    if cfg.analysis.noise_floor and tables:
        tables["noise.parquet"] = measure_noise_floor(engine, [c for c in conditions if c.group == "A"],
                                                      cfg.analysis.noise_prompts, m.name_or_path)
    for name, df in tables.items():
        write_parquet(df, run_dir / name)

    versions = package_versions()
    manifest = {
        "harness_version": versions["prefix-harness"],
        "harness_commit": harness_git_commit(),
        "config": config,
        "model": {
            "name_or_path": m.name_or_path,
            "revision_requested": loaded.revision,
            "resolved_revision": loaded.resolved_revision,
            "dtype": loaded.dtype,
            "device": loaded.device,
            "class": type(loaded.model).__name__,
            "max_positions": loaded.max_positions,
        },
        "seed": cfg.seed,
        "determinism": determinism,
        "versions": versions,
        "counts": {"prompts": len(prompts), "prefixes": len(prefixes), "conditions": len(conditions),
                   "completed": len(tables["conditions.parquet"]) if tables else 0},
        "started": started,
        "finished": now_iso(),
        "batch_size": batch_size,
        "prefix_cache": {"budget_bytes": engine.prefix_cache.budget_bytes, "kept_bytes": engine.prefix_cache.kept_bytes,
                         "heads_computed": engine.prefix_cache.misses, "heads_reused": engine.prefix_cache.hits},
        "attention_analysis": bool(cfg.analysis.attention),
        "result_fingerprint": result_fp,
        "computed_this_run": outcome.computed,
        "reused": outcome.reused,
        "failures": outcome.failures,
        "tables": {name: sha256_file(run_dir / name) for name in tables},
    }
    write_json(manifest, run_dir / "manifest.json")
    write_json({"status": "failed" if outcome.failures else "complete", "conditions": len(conditions),
                "failed": [f["condition"] for f in outcome.failures]}, run_dir / "status.json")
    if cfg.draw_figures and tables:
        write_outputs(tables["conditions.parquet"], tables.get("attention.parquet"), run_dir,
                      noise=tables.get("noise.parquet"))
        log.info("figures in %s, report %s", (run_dir / "figures").resolve(), (run_dir / "report.md").resolve())
    log.info("wrote %s", run_dir.resolve())
    if outcome.failures:
        raise SweepFailed(run_dir, outcome.failures)
    return run_dir


CPU_BATCH = 16


def prefix_cache_bytes(megabytes: int | None, device: str) -> int:
    """The prefix cache's budget: ``megabytes`` MiB, or for None a quarter of the memory free now
    (the GPU's on CUDA, the machine's otherwise)."""
    if megabytes is not None:
        if megabytes < 0:
            raise HarnessError(f"prefix_cache_mb must be 0 or more (or null for automatic), got {megabytes}")
        return megabytes * 2**20
    if device.startswith("cuda"):
        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return free // 4
    try:
        with open("/proc/meminfo") as f:
            available = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        available = 4 * 2**30  # not Linux: assume a modest machine
    return available // 4


def auto_batch_size(loaded, longest: int, cap: int = 64) -> int:
    """A batch size that fits: on a GPU, what half of the free memory holds at ``longest`` tokens
    per row (the KV cache twice, for headroom, plus float32 logits and scores of a row); on a CPU,
    a fixed 16 (enough for every prefix of one length; memory is rarely the limit there)."""
    from .kvcache import kv_cache_bytes, shape_of

    if not loaded.device.startswith("cuda"):
        return CPU_BATCH
    free, _ = torch.cuda.mem_get_info(torch.device(loaded.device))
    config = loaded.model.config
    per_row = 2 * kv_cache_bytes(seq_len=longest, batch=1, dtype=loaded.dtype, **shape_of(config))
    per_row += 4 * longest * (getattr(config, "vocab_size", 0) + 4 * getattr(config, "hidden_size", 1024))
    return int(max(1, min(cap, (free // 2) // per_row)))


def noise_row(model_label: str, probe: str, result: Result, y_a: Continuation) -> dict:
    drift = output_drift(result.continuation.ids, y_a.ids)
    att = result.attention

    def worst(metric):
        return max((float(np.max(block[metric])) for block in att.values()), default=None)

    return {"model": model_label, "prompt_id": result.condition.prompt_id, "probe": probe,
            "edit_distance": drift["edit_distance"], "norm_edit_distance": drift["norm_edit_distance"],
            "output_kl": result.output_kl,
            "attn_kl_mean": headline_attention(att, result.n_queries)["attn_kl_mean"],
            "attn_kl_max": worst("kl"), "attn_js_max": worst("js"), "score_rmse_max": worst("score_rmse")}


def measure_noise_floor(engine: Engine, references: list[Condition], n_prompts: int, model_label: str) -> pd.DataFrame:
    """The drift numerics alone cause, on up to ``n_prompts`` prompts (see :meth:`Engine.noise_floor`)."""
    rows = []
    for a in tqdm(references[:n_prompts], desc="noise floor", unit="prompt"):
        ref, _ = engine.reference(a)
        for probe, result in engine.noise_floor(ref).items():
            rows.append(noise_row(model_label, probe, result, ref.continuation))
    df = pd.DataFrame(rows)
    for col in ("model", "prompt_id", "probe"):
        df[col] = df[col].astype("category")
    return df


class SweepFailed(Exception):
    """Some conditions failed; the others' tables were written. Rerun the same command to retry."""

    def __init__(self, run_dir: Path, failures: list[dict]):
        self.run_dir, self.failures = run_dir, failures
        names = ", ".join(f["condition"] for f in failures[:5]) + (" ..." if len(failures) > 5 else "")
        super().__init__(f"{len(failures)} condition(s) failed in {run_dir}: {names}; the tables hold the others. "
                         f"Rerun the same command with hydra.run.dir={run_dir} to retry only the failed ones")


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return fingerprint([type(tokenizer).__name__, text])


def locate(cfg, run_dir: str | Path, progress: bool = True) -> Path:
    """``harness locate``: the prefix-length interval where drift rises fastest (see harness.locate)."""
    from .locate import bisect_steepest, summary_table

    run_dir = Path(run_dir)
    m, spec = cfg.model, cfg.locate
    if spec.metric not in LOCATE_METRICS:
        raise HarnessError(f"locate.metric must be one of {LOCATE_METRICS}, got {spec.metric!r}")
    loaded = load_configured_model(m)
    set_determinism(cfg.seed, loaded.device)
    prompts = load_prompts(cfg.prompts.path, cfg.prompts.limit)
    prefixes = [p for p in load_prefixes(cfg.prefixes.path) if p.group in spec.groups]
    attention = spec.metric.startswith("attn_")
    if attention:
        install_probe(loaded.model)
    engine = Engine(loaded.model, loaded.tokenizer.eos_token_id, cfg.decode.max_new_tokens, attention,
                    prefix_cache_bytes(cfg.prefix_cache_mb, loaded.device))
    groups = ["A", *[g for g in ("B", "C") if g in spec.groups]]
    batch_size = cfg.batch_size or auto_batch_size(loaded, max(spec.coarse) + 512 + cfg.decode.max_new_tokens)

    def evaluate(length: int) -> pd.Series:
        conds = configured_conditions(cfg, loaded.tokenizer, prompts, prefixes, groups=groups, lengths=[length],
                                      settings=[Isolation()])
        check_context(conds, cfg.decode.max_new_tokens, loaded.max_positions)
        values: dict[str, list[float]] = defaultdict(list)
        for prompt in tqdm(prompts, desc=f"length {length}", unit="prompt", disable=not progress, leave=False):
            mine = [c for c in conds if c.prompt_id == prompt.id]
            ref, _ = engine.reference(mine[0])
            for batch in batches_of(mine[1:], batch_size):
                for r in engine.conditions(ref, batch):
                    record = condition_record(m.name_or_path, r, ref.continuation, loaded.tokenizer)
                    values[prompt.id].append(record[spec.metric])
        return pd.Series({pid: float(np.mean(v)) for pid, v in values.items()})

    interval, seen = bisect_steepest(evaluate, list(spec.coarse), spec.resolution)
    table = summary_table(seen, interval, spec.metric)
    write_parquet(table, run_dir / "locate.parquet")
    write_json({"model": m.name_or_path, "resolved_revision": loaded.resolved_revision, "metric": spec.metric,
                "groups": list(spec.groups), "prompts": len(prompts), "interval": [interval.low, interval.high],
                "rise": interval.rise, "rise_ci95": list(interval.rise_ci), "coarse": list(spec.coarse),
                "resolution": spec.resolution, "finished": now_iso()}, run_dir / "locate.json")
    lo, hi = (table.set_index("prefix_len").loc[n] for n in (interval.low, interval.high))
    print(f"{spec.metric} rises fastest between prefix lengths {interval.low} and {interval.high} tokens "
          f"({m.name_or_path}, {len(prompts)} prompts, groups {'+'.join(spec.groups)}):\n"
          f"  at {interval.low}: {lo['mean']:.4f} [95% CI {lo.ci_low:.4f}, {lo.ci_high:.4f}]\n"
          f"  at {interval.high}: {hi['mean']:.4f} [95% CI {hi.ci_low:.4f}, {hi.ci_high:.4f}]\n"
          f"  rise: {interval.rise:+.4f} [95% CI {interval.rise_ci[0]:+.4f}, {interval.rise_ci[1]:+.4f}], paired by prompt\n"
          f"table: {(run_dir / 'locate.parquet').resolve()}")
    return run_dir
