"""``harness check-determinism RUN_DIR``: rerun a sample of a run's conditions, one at a time, in
this (fresh) process, and report every token or metric that differs from the stored tables.

Greedy decoding with fixed weights should reproduce tokens exactly; metrics may differ by float
rounding when the original run batched conditions. Differences above ``--tolerance`` or any
token difference make the exit status non-zero.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from harness.config import RunConfig, register_configs
from harness.errors import HarnessError
from harness.inputs.conditions import KEY_FIELDS
from harness.measure.metrics import METRICS
from harness.numbers import num
from harness.paths import shell_path
from harness.runs.compute import compute
from harness.runs.experiment import Experiment
from harness.runs.inputs import of_config, refuse_changed
from harness.runs.reading import has_table, reading_notes, refuse_collected
from harness.runs.rundir import RunDir
from harness.runs.schema import ATTENTION_METRICS, row_key
from harness.runs.store import RESULT_SCHEMA_VERSION

# the condition table's measures a rerun recomputes (numbers and flags; lists and texts are compared as
# tokens). Not the logit margins and the near-tie flag made of them: in logit units, and at another batch
# size they move by more than a KL tolerance without any token changing
CONDITION_MEASURES = tuple(m.name for m in METRICS if m.level == "condition"
                           and m.dtype in ("float64", "int64", "Int64", "bool", "boolean")
                           and m.name not in ("min_margin_a", "min_margin_x", "near_tie"))

# measures of the model's numbers (float, not computed from the tokens): the ones float rounding moves
ROUNDED = frozenset(m.name for m in METRICS if m.dtype == "float64" and m.compute is None) | set(ATTENTION_METRICS)


def sample_evenly(items: list, n: int) -> list:
    if n >= len(items):
        return list(items)
    return [items[i] for i in sorted(set(np.linspace(0, len(items) - 1, n).round().astype(int)))]


def check(run_dir: Path, sample: int, tolerance: float, trust_damaged: bool = False) -> int:
    run = RunDir(run_dir)
    reading_notes([run_dir], allow_failed=True, trust_damaged=trust_damaged, takes="one")  # unfinished: its resume
    manifest = run.manifest()
    if manifest is None:
        raise HarnessError(f"{run_dir}: no manifest.json; is this a run directory?")
    refuse_collected(run, manifest, "with no sweep of its own to rerun", one_run=True)
    for name in (run.CONDITIONS, run.ATTENTION):  # before the model loads: a damaged table is refused at once
        run.check_table(name, trust_damaged)
    schema = (manifest.get("result_fingerprint") or {}).get("schema")
    if schema != RESULT_SCHEMA_VERSION:
        raise HarnessError(f"{run_dir} was written by an earlier version of the harness (result schema {schema}, "
                           f"this version writes {RESULT_SCHEMA_VERSION}): recompute it under this version with "
                           f"`harness resume {shell_path(run_dir)} on_existing=resume`, then check it")
    register_configs()
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(RunConfig), manifest["config"])
    except Exception as exc:  # noqa: BLE001 - omegaconf's errors name the key on their first line
        raise HarnessError(f"{run_dir}/manifest.json holds a configuration this version cannot read "
                           f"({str(exc).strip().splitlines()[0]})") from None
    refuse_changed(str(run_dir), manifest.get("inputs"), of_config(cfg),
                   "a recheck would read other inputs than the stored results were made from",
                   config=manifest["config"])
    has_attention = bool(cfg.analysis.attention) and has_table(run, run.ATTENTION, trust_damaged)
    exp = Experiment.build(cfg, device=manifest["model"]["device"], attention=has_attention)
    if exp.loaded.resolved_revision != manifest["model"]["resolved_revision"]:
        print(f"warning: model revision changed since the run ({manifest['model']['resolved_revision']} -> "
              f"{exp.loaded.resolved_revision}); differences may come from that")
    table = run.table(run.CONDITIONS, trust_damaged)
    stored = {row_key(*(getattr(r, k) for k in KEY_FIELDS)): r for r in table.itertuples(index=False)}
    stored_att = None
    if has_attention:
        att = run.table(run.ATTENTION, trust_damaged)
        stored_att = {row_key(*key): part.sort_values(["segment", "layer", "head"])
                      for key, part in att.groupby(list(KEY_FIELDS), observed=True, dropna=False)}

    # a run of group A alone (groups=[A]) is checked on its references
    chosen = sample_evenly([c for c in exp.conditions if c.group != "A"] or list(exp.conditions), sample)
    references = [c for c in exp.conditions
                  if c.group == "A" and c.prompt_id in {x.prompt_id for x in chosen} and c not in chosen]
    token_diffs, metric_diffs, compared, sampled = [], {}, 0, set(chosen)
    for c, row in compute(exp, references + chosen, batch_size=1, progress=False).rows.items():
        key = row_key(*c.key().values())
        stored_row = stored.get(key)
        if stored_row is None:
            continue  # not in the stored tables (e.g. it failed in the run)
        compared += c in sampled  # the A references are compared too, but counted apart
        stored_ids, ids = stored_row.continuation_ids, row.record["continuation_ids"]
        if stored_ids is None or ids is None:  # decode.path=none decodes no B/C continuation
            if (stored_ids is None) != (ids is None):
                token_diffs.append(f"{c.prompt_id}/{c.group}/{c.prefix_id}/{c.prefix_len}")
        elif list(stored_ids) != list(ids):
            token_diffs.append(f"{c.prompt_id}/{c.group}/{c.prefix_id}/{c.prefix_len}")
        for metric in CONDITION_MEASURES:  # every stored measure, not only output_kl (an edited edit distance passed)
            new, old = row.record.get(metric), getattr(stored_row, metric, None)
            if new is None or old is None or pd.isna(new) or pd.isna(old):
                continue
            metric_diffs.setdefault(metric, []).append(abs(float(new) - float(old)))
        if stored_att is not None and key in stored_att:
            part = stored_att[key]
            for segment, block in row.attention.items():
                seg = part[part.segment == segment]
                for metric in ATTENTION_METRICS:
                    diff = np.abs(seg[metric].to_numpy() - block[metric].ravel())
                    metric_diffs.setdefault(metric, []).append(float(diff.max()) if len(diff) else 0.0)

    print(f"rechecked {compared} conditions of {run_dir}" + (f" (and the A references of their {len(references)} "
          f"prompts)" if references else "") + f" at batch size 1 in a fresh process (the run used batch size "
          f"{manifest.get('batch_size')})")
    print(f"  token differences: {len(token_diffs)}" + (": " + ", ".join(token_diffs[:10]) if token_diffs else ""))
    worst = {metric: max(v) for metric, v in metric_diffs.items()}
    for metric, value in worst.items():
        print(f"  max |difference| {metric}: {num(value)}")
    bad = [metric for metric, value in worst.items() if value > tolerance]
    if not compared:
        print("NOT checked: none of the sampled conditions is in the stored tables")
        return 1
    if bad and not token_diffs and set(bad) <= ROUNDED and (manifest.get("batch_size") or 1) > 1:
        # the same tokens, and numbers apart by what computing 16 conditions at once instead of one rounds
        # differently: that is the run's noise floor, not a run that cannot be reproduced
        above = 10.0 ** np.ceil(np.log10(max(worst[m] for m in bad)))
        print(f"NOT reproduced within {tolerance}: identical tokens, and {', '.join(bad)} "
              f"{'differ' if len(bad) > 1 else 'differs'} by up to "
              f"{num(max(worst[m] for m in bad))}: the run computed {manifest.get('batch_size')} conditions a batch "
              f"and this check one at a time, whose float rounding differs (the run's noise floor, noise.parquet, "
              f"measures it). That is rounding, not a nondeterministic run; --tolerance {above:g} accepts it")
        return 1
    if token_diffs or bad:
        print(f"NOT reproduced: {len(token_diffs)} token differences; metrics above {tolerance}: {bad or 'none'}")
        return 1
    print(f"reproduced: identical tokens, metrics within {tolerance}")
    return 0
