"""Bit-flip campaign: flip single bits of a stored result file and of a run's tables, one at a time,
and read each damaged copy the way the harness does. Every flip must be *detected* (the result is
refused as damaged, or the table refused as not the one the run wrote) or *harmless* (the file
reads back to exactly the same content); a *silent* change (different content read without a word)
or a *traceback* (any other exception) is a failure.

    python benchmarks/bit_flips.py [--flips 10000] [--seed 0]

``--flips`` random single-bit flips per file (a result file and conditions.parquet: 20,000 in all by
default); ``--every-byte`` flips one random bit of every byte instead. Exit status 1 if any flip was
silent or a traceback. Runs a tiny sweep first (a few seconds).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

import harness as H
from harness.errors import HarnessError
from harness.runs.rundir import RunDir
from harness.runs.store import CorruptResult, ResultStore


def tiny_run(where: Path) -> Path:
    cfg = H.compose(["model=tiny", "prefix.lengths=[8]", "decode.max_new_tokens=4", "prompts.limit=1",
                     "prefixes.per_group=2", "draw_figures=false", "analysis.noise_floor=false"])
    return H.run(cfg, where / "run", progress=False)


def same_result(a, b) -> bool:
    if a.record != b.record or a.n_queries != b.n_queries or a.attention.keys() != b.attention.keys():
        return False
    return all(a.attention[s].keys() == b.attention[s].keys()
               and all(np.array_equal(a.attention[s][m], b.attention[s][m], equal_nan=True) for m in a.attention[s])
               for s in a.attention)


def flips(size: int, n: int | None, rng: random.Random):
    """(byte, bit) positions: ``n`` random ones, or one random bit of every byte."""
    if n is None:
        return [(i, rng.randrange(8)) for i in range(size)]
    return [(rng.randrange(size), rng.randrange(8)) for _ in range(n)]


def campaign(path: Path, read, same, positions) -> Counter:
    """Flip each position in turn (restoring the file after each), read, and classify."""
    original = path.read_bytes()
    clean = read()
    outcomes = Counter()
    for byte, bit in positions:
        damaged = bytearray(original)
        damaged[byte] ^= 1 << bit
        path.write_bytes(bytes(damaged))
        try:
            got = read()
        except (CorruptResult, HarnessError):
            outcomes["detected"] += 1
        except Exception as exc:  # noqa: BLE001 - what the campaign counts
            outcomes["traceback"] += 1
            outcomes[f"traceback: {type(exc).__name__}"] += 1
        else:
            outcomes["harmless" if same(got, clean) else "silent"] += 1
    path.write_bytes(original)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flips", type=int, default=10_000, help="random single-bit flips per file")
    parser.add_argument("--every-byte", action="store_true", help="flip one bit of every byte instead")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    rng = random.Random(ns.seed)
    with tempfile.TemporaryDirectory() as tmp:
        run = tiny_run(Path(tmp))
        store = ResultStore(run)
        result = sorted((run / "results").glob("*.npz"))[-1]
        key = result.stem
        table = run / RunDir.CONDITIONS
        files = [
            ("result file", result, lambda: store.load(key), same_result),
            ("conditions.parquet", table, lambda: RunDir(run).table(RunDir.CONDITIONS),
             lambda a, b: a.equals(b) and isinstance(a, pd.DataFrame)),
        ]
        failed = False
        print(f"{'file':<20} {'bytes':>7} {'flips':>7} {'detected':>9} {'harmless':>9} {'silent':>7} {'traceback':>10}"
              f" {'seconds':>8}")
        for name, path, read, same in files:
            positions = flips(path.stat().st_size, None if ns.every_byte else ns.flips, rng)
            start = time.perf_counter()
            out = campaign(path, read, same, positions)
            print(f"{name:<20} {path.stat().st_size:>7} {len(positions):>7} {out['detected']:>9} {out['harmless']:>9} "
                  f"{out['silent']:>7} {out['traceback']:>10} {time.perf_counter() - start:>8.1f}")
            for kind, count in sorted(out.items()):
                if kind.startswith("traceback: "):
                    print(f"    {kind}: {count}")
            failed |= out["silent"] > 0 or out["traceback"] > 0
    print("FAIL: some flips were silent or tracebacks" if failed else "every flip detected or harmless")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
