"""``harness check-determinism RUN_DIR``: rerun a sample of a run's conditions, one at a time, in
this (fresh) process, and report every token or metric that differs from the stored tables.

Greedy decoding with fixed weights should reproduce tokens exactly; metrics may differ by float
rounding when the original run batched conditions. Differences above ``--tolerance`` or any
token difference make the exit status non-zero.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from .config import RunConfig, register_configs
from .engine import Engine
from .errors import HarnessError
from .manifest import set_determinism
from .probe import install_probe
from .runner import configured_conditions, load_configured_model
from .tables import ATTENTION_METRICS, read_attention, read_conditions
from .texts import load_prefixes, load_prompts


def row_key(prompt_id, group, prefix_id, prefix_len, isolation, beta) -> tuple:
    missing = lambda v: v is None or (isinstance(v, float) and np.isnan(v))  # noqa: E731
    return (prompt_id, group, None if missing(prefix_id) else prefix_id, int(prefix_len), isolation,
            None if missing(beta) else float(beta))


def sample_evenly(items: list, n: int) -> list:
    if n >= len(items):
        return list(items)
    return [items[i] for i in sorted(set(np.linspace(0, len(items) - 1, n).round().astype(int)))]


def check(run_dir: Path, sample: int, tolerance: float) -> int:
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        raise HarnessError(f"{run_dir}: no manifest.json; is this a run directory?")
    manifest = json.loads(manifest_path.read_text())
    register_configs()
    cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), manifest["config"])
    m = cfg.model
    loaded = load_configured_model(m, device=manifest["model"]["device"])
    if loaded.resolved_revision != manifest["model"]["resolved_revision"]:
        print(f"warning: model revision changed since the run ({manifest['model']['resolved_revision']} -> "
              f"{loaded.resolved_revision}); differences may come from that")
    set_determinism(cfg.seed, loaded.device)
    conditions = configured_conditions(cfg, loaded.tokenizer, load_prompts(cfg.prompts.path, cfg.prompts.limit),
                                       load_prefixes(cfg.prefixes.path))
    table = read_conditions(run_dir)
    stored = {row_key(r.prompt_id, r.group, r.prefix_id, r.prefix_len, r.isolation, r.beta): r
              for r in table.itertuples(index=False)}
    has_attention = bool(cfg.analysis.attention) and (run_dir / "attention.parquet").is_file()
    stored_att = read_attention(run_dir) if has_attention else None
    if has_attention or any(c.isolation.key_bias is not None for c in conditions):
        install_probe(loaded.model)
    engine = Engine(loaded.model, loaded.tokenizer.eos_token_id, cfg.decode.max_new_tokens, has_attention)

    chosen = sample_evenly([c for c in conditions if c.group != "A"], sample)
    token_diffs, metric_diffs, compared = [], {}, 0
    for prompt_id in dict.fromkeys(c.prompt_id for c in chosen):
        a = next(c for c in conditions if c.prompt_id == prompt_id and c.group == "A")
        ref, a_result = engine.reference(a)
        results = [a_result] + [engine.conditions(ref, [c])[0] for c in chosen if c.prompt_id == prompt_id]
        for res in results:
            c = res.condition
            row = stored.get(row_key(c.prompt_id, c.group, c.prefix_id, c.prefix_len, c.isolation.mode,
                                     c.isolation.beta))
            if row is None:
                continue  # not in the stored tables (e.g. it failed in the run)
            compared += 1
            label = f"{c.prompt_id}/{c.group}/{c.prefix_id}/{c.prefix_len}"
            if list(row.continuation_ids) != list(res.continuation.ids):
                token_diffs.append(label)
            if res.output_kl is not None and pd.notna(row.output_kl):
                metric_diffs.setdefault("output_kl", []).append(abs(res.output_kl - row.output_kl))
            if stored_att is not None:
                sel = stored_att[(stored_att.prompt_id == c.prompt_id) & (stored_att.group == c.group)
                                 & (stored_att.prefix_len == c.prefix_len)
                                 & (stored_att.isolation == c.isolation.mode)
                                 & ((stored_att.beta == c.isolation.beta) if c.isolation.beta is not None
                                    else stored_att.beta.isna())
                                 & ((stored_att.prefix_id == c.prefix_id) if c.prefix_id else stored_att.prefix_id.isna())]
                for segment, block in res.attention.items():
                    part = sel[sel.segment == segment].sort_values(["layer", "head"])
                    for metric in ATTENTION_METRICS:
                        diff = np.abs(part[metric].to_numpy() - block[metric].ravel())
                        metric_diffs.setdefault(metric, []).append(float(diff.max()) if len(diff) else 0.0)
    print(f"rechecked {compared} conditions of {run_dir} at batch size 1 in a fresh process "
          f"(the run used batch size {manifest.get('batch_size')})")
    print(f"  token differences: {len(token_diffs)}" + (": " + ", ".join(token_diffs[:10]) if token_diffs else ""))
    worst = {metric: max(v) for metric, v in metric_diffs.items()}
    for metric, value in worst.items():
        print(f"  max |difference| {metric}: {value:.3g}")
    bad = [metric for metric, value in worst.items() if value > tolerance]
    if token_diffs or bad:
        print(f"NOT reproduced: {len(token_diffs)} token differences; metrics above {tolerance}: {bad or 'none'}")
        return 1
    print(f"reproduced: identical tokens, metrics within {tolerance}")
    return 0


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness check-determinism", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--sample", type=int, default=8, help="how many B/C conditions to recheck")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="largest metric difference accepted")
    ns = parser.parse_args(args)
    return check(ns.run_dir, ns.sample, ns.tolerance)
