"""One sweep, start to finish: load, assemble, decode, measure, write the run directory.

``run(cfg, run_dir)`` is a plain function (the Hydra entry point in ``cli`` only calls it), so it
can be tested and called from a notebook with a config built in code.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path

from omegaconf import OmegaConf
from tqdm.auto import tqdm

from .assembly import Condition, build_conditions, check_context
from .decoding import Continuation
from .engine import Engine, Result
from .manifest import harness_git_commit, now_iso, package_versions, set_determinism
from .metrics import output_drift
from .models import load_model
from .probe import install_probe
from .report import write_outputs
from .tables import attention_frame, conditions_frame, headline_attention, sha256_file, write_json, write_parquet
from .texts import load_prefixes, load_prompts

log = logging.getLogger(__name__)
KIND_OF_GROUP = {"A": None, "B": "neutral", "C": "instruction"}


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
        "isolation": "none",
    }


def batches_of(conditions: list[Condition], batch_size: int) -> list[list[Condition]]:
    """Consecutive runs of same-length conditions, at most ``batch_size`` each (no padding needed)."""
    out: list[list[Condition]] = []
    for cond in conditions:
        if out and len(out[-1]) < batch_size and len(out[-1][0].assembled.input_ids) == len(cond.assembled.input_ids):
            out[-1].append(cond)
        else:
            out.append([cond])
    return out


def run_conditions(engine: Engine, conditions: list[Condition], batch_size: int,
                   progress: bool = True) -> list[tuple[Result, Continuation]]:
    """Every condition's result with its prompt's A continuation; A runs once per prompt."""
    by_prompt: dict[str, list[Condition]] = defaultdict(list)
    for cond in conditions:
        by_prompt[cond.prompt_id].append(cond)
    out = []
    with tqdm(total=len(conditions), desc="conditions", unit="cond", disable=not progress) as bar:
        for conds in by_prompt.values():
            (a,) = [c for c in conds if c.group == "A"]
            ref, a_result = engine.reference(a)
            out.append((a_result, ref.continuation))
            bar.update()
            others = sorted((c for c in conds if c.group != "A"), key=lambda c: len(c.assembled.input_ids))
            for batch in batches_of(others, batch_size):
                out.extend((r, ref.continuation) for r in engine.conditions(ref, batch))
                bar.update(len(batch))
    return out


def run(cfg, run_dir: str | Path, progress: bool = True) -> Path:
    """Run the sweep described by ``cfg`` (a :class:`harness.config.RunConfig`) into ``run_dir``."""
    run_dir = Path(run_dir)
    started = now_iso()
    m = cfg.model
    loaded = load_model(m.name_or_path, revision=m.revision, dtype=m.dtype, device=m.device,
                        trust_remote_code=m.trust_remote_code)
    determinism = set_determinism(cfg.seed, loaded.device)
    prompts = load_prompts(cfg.prompts.path, cfg.prompts.limit)
    prefixes = load_prefixes(cfg.prefixes.path)
    conditions = build_conditions(
        loaded.tokenizer, prompts, prefixes, groups=list(cfg.groups), lengths=list(cfg.prefix.lengths),
        separator=cfg.prefix.separator, bos_policy=m.bos, repeat_short=cfg.prefix.too_short == "repeat",
    )
    check_context(conditions, cfg.decode.max_new_tokens, loaded.max_positions)
    log.info("%d prompts x groups %s x lengths %s = %d conditions on %s (%s, %s)", len(prompts),
             list(cfg.groups), list(cfg.prefix.lengths), len(conditions), m.name_or_path, loaded.dtype,
             loaded.device)

    if cfg.analysis.attention:
        install_probe(loaded.model)
    engine = Engine(loaded.model, loaded.tokenizer.eos_token_id, cfg.decode.max_new_tokens, cfg.analysis.attention)
    results = run_conditions(engine, conditions, cfg.batch_size, progress)
    records = [condition_record(m.name_or_path, r, y_a, loaded.tokenizer) for r, y_a in results]
    tables = {"conditions.parquet": conditions_frame(records)}
    if cfg.analysis.attention:
        tables["attention.parquet"] = attention_frame(
            [condition_keys(m.name_or_path, r.condition) for r, _ in results],
            [r.attention for r, _ in results],
            [r.n_queries for r, _ in results],
        )
    for name, df in tables.items():
        write_parquet(df, run_dir / name)

    manifest = {
        "harness_version": package_versions()["prefix-harness"],
        "harness_commit": harness_git_commit(),
        "config": OmegaConf.to_container(OmegaConf.create(cfg), resolve=True) if not isinstance(cfg, dict) else cfg,
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
        "versions": package_versions(),
        "counts": {"prompts": len(prompts), "prefixes": len(prefixes), "conditions": len(records)},
        "started": started,
        "finished": now_iso(),
        "batch_size": cfg.batch_size,
        "attention_analysis": bool(cfg.analysis.attention),
        "tables": {name: sha256_file(run_dir / name) for name in tables},
    }
    write_json(manifest, run_dir / "manifest.json")
    if cfg.draw_figures:
        write_outputs(tables["conditions.parquet"], tables.get("attention.parquet"), run_dir)
        log.info("figures in %s, report %s", (run_dir / "figures").resolve(), (run_dir / "report.md").resolve())
    log.info("wrote %s", run_dir.resolve())
    return run_dir
