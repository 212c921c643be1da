"""``harness collect``: many run directories (a multirun, or several sweeps) into one table set.

Incomplete jobs are reported, never silently dropped: the combined manifest lists every source
with its status, and the command exits non-zero unless ``--allow-partial`` is given. A key that
appears in several runs (group A is rerun by every job of a length sweep) is kept once; if the
copies disagree, that is reported too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from .callbacks import job_dirs, job_problem
from .errors import HarnessError
from .manifest import now_iso
from .tables import (CONDITION_COLUMNS, KEY_COLUMNS, TIMING_COLUMNS, concat_tables, read_attention,
                     read_conditions, sha256_file, write_json, write_parquet)


def find_runs(paths: list[Path]) -> list[Path]:
    """Each path is a run directory, or a sweep directory whose job directories are collected."""
    runs = []
    for path in paths:
        if not path.is_dir():
            raise HarnessError(f"{path}: not a directory")
        if (path / "conditions.parquet").is_file() or (path / ".hydra").is_dir():
            runs.append(path)
            continue
        jobs = job_dirs(path) or sorted(p.parent for p in path.glob("*/conditions.parquet"))
        if not jobs:
            raise HarnessError(f"{path}: neither a run directory nor a sweep directory with job directories")
        runs += jobs
    return runs


def dedupe(df: pd.DataFrame, keys: list[str], compare: list[str]) -> tuple[pd.DataFrame, int, int]:
    """Drop repeated keys (first copy kept); returns (frame, n_dropped, n_disagreeing)."""
    dup = df.duplicated(keys, keep=False)
    if not dup.any():
        return df, 0, 0
    as_text = df.loc[dup, keys + compare].astype(str)
    disagree = int((as_text.groupby(keys, observed=True)[compare].nunique() > 1).any(axis=1).sum())
    out = df.drop_duplicates(keys, keep="first").reset_index(drop=True)
    return out, len(df) - len(out), disagree


def collect(paths: list[Path], out: Path, allow_partial: bool = False) -> int:
    runs = find_runs(paths)
    sources, conditions, attention, problems = [], [], [], []
    for run in runs:
        problem = job_problem(run) if (run / ".hydra").is_dir() or (run / "status.json").exists() else None
        has_tables = (run / "conditions.parquet").is_file()
        if problem:
            problems.append(problem)
        manifest = json.loads((run / "manifest.json").read_text()) if (run / "manifest.json").is_file() else {}
        sources.append({"run": str(run.resolve()), "status": "complete" if not problem else problem,
                        "tables": manifest.get("tables", {}), "model": manifest.get("model", {})})
        if has_tables:
            conditions.append(read_conditions(run))
            if (run / "attention.parquet").is_file():
                attention.append(read_attention(run))
    if not conditions:
        raise HarnessError("no tables found in " + ", ".join(map(str, paths)))
    merged = {"conditions.parquet": concat_tables(conditions)}
    merged["conditions.parquet"], dropped, disagree = dedupe(
        merged["conditions.parquet"], KEY_COLUMNS,
        [c for c in CONDITION_COLUMNS if c not in KEY_COLUMNS + TIMING_COLUMNS and c != "continuation_ids"
         and c != "input_ids"] + ["continuation_ids"])
    if attention:
        merged["attention.parquet"], _, _ = dedupe(concat_tables(attention), KEY_COLUMNS + ["layer", "head", "segment"], ["kl"])
    out.mkdir(parents=True, exist_ok=True)
    for name, df in merged.items():
        write_parquet(df, out / name)
    write_json({
        "collected": now_iso(),
        "sources": sources,
        "incomplete": problems,
        "duplicate_keys_dropped": dropped,
        "duplicate_keys_disagreeing": disagree,
        "tables": {name: sha256_file(out / name) for name in merged},
    }, out / "manifest.json")
    n = len(merged["conditions.parquet"])
    print(f"collected {len(runs)} runs, {n} conditions into {out.resolve()}"
          + (f" ({dropped} repeated rows, e.g. group A in every job, kept once)" if dropped else ""))
    if disagree:
        print(f"warning: {disagree} repeated keys have different results in different runs; the first was kept")
    if problems:
        print(f"{'warning' if allow_partial else 'error'}: {len(problems)} run(s) incomplete:\n  " + "\n  ".join(problems))
        return 0 if allow_partial else 1
    return 0


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness collect", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="run directories or sweep directories")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--allow-partial", action="store_true", help="exit 0 even if some runs are incomplete")
    ns = parser.parse_args(args)
    return collect(ns.paths, ns.out, ns.allow_partial)
