"""One sweep, start to finish: load, assemble, decode, measure, write the run directory.

``run(cfg, run_dir)`` is a plain function (the Hydra entry point in ``cli`` only calls it), so it
can be tested and called from a notebook with a config built in code.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from pathlib import Path

import torch
from omegaconf import OmegaConf
from tqdm.auto import tqdm

from .assembly import Condition, build_conditions, check_context
from .decoding import Continuation, greedy_decode
from .manifest import harness_git_commit, now_iso, package_versions, set_determinism
from .metrics import output_drift
from .models import LoadedModel, load_model
from .tables import conditions_frame, sha256_file, write_json, write_parquet
from .texts import load_prefixes, load_prompts

log = logging.getLogger(__name__)
KIND_OF_GROUP = {"A": None, "B": "neutral", "C": "instruction"}


def condition_record(model_label: str, cond: Condition, y_x: Continuation, y_a: Continuation,
                     tokenizer, seconds: float) -> dict:
    """The conditions-table row of one decoded condition."""
    a = cond.assembled
    return {
        "model": model_label,
        "prompt_id": cond.prompt_id,
        "group": cond.group,
        "prefix_id": cond.prefix_id,
        "prefix_len": cond.prefix_len,
        "isolation": "none",
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
        "decode_seconds": seconds,
    }


def decode_conditions(loaded: LoadedModel, model_label: str, conditions: list[Condition],
                      max_new_tokens: int, progress: bool = True) -> list[dict]:
    """Decode every condition; A's continuation is computed once per prompt and reused."""
    by_prompt: dict[str, list[Condition]] = defaultdict(list)
    for cond in conditions:
        by_prompt[cond.prompt_id].append(cond)
    eos = loaded.tokenizer.eos_token_id
    records = []
    bar = tqdm(total=len(conditions), desc="conditions", unit="cond", disable=not progress)

    def decode(cond: Condition) -> tuple[Continuation, float]:
        ids = torch.tensor([cond.assembled.input_ids], device=loaded.device)
        t0 = time.perf_counter()
        (y,) = greedy_decode(loaded.model, ids, max_new_tokens, eos)
        return y, time.perf_counter() - t0

    for conds in by_prompt.values():
        (a,) = [c for c in conds if c.group == "A"]
        y_a, secs = decode(a)
        records.append(condition_record(model_label, a, y_a, y_a, loaded.tokenizer, secs))
        bar.update()
        for cond in conds:
            if cond.group == "A":
                continue
            y_x, secs = decode(cond)
            records.append(condition_record(model_label, cond, y_x, y_a, loaded.tokenizer, secs))
            bar.update()
    bar.close()
    return records


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

    records = decode_conditions(loaded, m.name_or_path, conditions, cfg.decode.max_new_tokens, progress)
    conditions_path = run_dir / "conditions.parquet"
    write_parquet(conditions_frame(records), conditions_path)

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
        "tables": {"conditions.parquet": sha256_file(conditions_path)},
    }
    write_json(manifest, run_dir / "manifest.json")
    log.info("wrote %s", run_dir.resolve())
    return run_dir
