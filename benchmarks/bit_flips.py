"""Bit-flip campaign over a whole run directory and every reader of one.

Single bits of every file of a finished run (its per-condition results, the three tables,
``manifest.json``, ``status.json``, ``run_fingerprint.json``, ``.hydra/config.yaml`` and
``overrides.yaml``, the report, a figure, the log) are flipped one at a time, and each damaged run is
read by each reader the way a user would run it: ``load_run`` (Python), and ``harness resume``,
``harness figures``, ``harness claims`` and ``harness collect`` (the command line, in this process).
Every flip must be

- *detected*: the reader refuses the run in one line (exit 2, or 1 where a command reports an
  incomplete run), or the damaged file is named and rebuilt (resume), or
- *harmless*: the reader's output is exactly what it gives on the undamaged run,

never *silent* (another output, numbers or metadata, without a word) or a *traceback* (exit 3, or
any exception out of ``load_run`` other than the harness's one-line error).

What "the reader's output" is: ``load_run``'s four tables and the manifest; after ``resume``, the run's
tables (timing columns aside); ``figures``: the report it redraws; ``claims``: its claims table;
``collect``: the merged conditions and attention tables.

    python benchmarks/bit_flips.py                 # the default campaign: 21,720 flips (about 50 minutes)
    python benchmarks/bit_flips.py --readers resume figures   # a part of it
    python benchmarks/bit_flips.py --scale 0.05    # a quick look (about 1,100 flips)

Exit status 1 if any flip was silent or a traceback. The run is a tiny sweep (a few seconds); each
flip restores the whole run directory from an undamaged copy before the next.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd

import harness as H
from harness.cli import main as harness
from harness.errors import HarnessError
from harness.runs.rundir import RunDir

TIMING = ("seconds",)
# flips per file for each reader (the cheap reader gets the most)
FLIPS = {"load_run": 1400, "collect": 250, "claims": 100, "resume": 40, "figures": 20}


def tiny_run(where: Path) -> Path:
    """A complete run with every kind of file: two prompts, noise floor, figures and report."""
    overrides = ["model=tiny", "prefix.lengths=[8,16]", "decode.max_new_tokens=4", "prompts.limit=2",
                 "prefixes.per_group=2", "analysis.noise_min=2"]
    return H.run(H.compose(overrides), where / "run", overrides=overrides, progress=False)


def run_files(run: Path) -> list[Path]:
    """Every file of the run a flip can land in (the lock excluded: it holds nothing), results once
    per kind of file: the first and the last stored result."""
    files = [p for p in sorted(run.rglob("*")) if p.is_file() and p.name != RunDir.LOCK and p.stat().st_size]
    results = [p for p in files if p.parent.name == "results"]
    figures = [p for p in files if p.parent.name == RunDir.FIGURES]
    keep = [p for p in files if p not in results and p not in figures]
    return keep + results[:1] + results[-1:] + [p for p in figures if p.suffix == ".png"][:1]


def _without_timing(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in TIMING if c in df.columns]).reset_index(drop=True)


def _tables_equal(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for name in a:
        x, y = a[name], b[name]
        if (x is None) != (y is None):
            return False
        if x is not None and not _without_timing(x).equals(_without_timing(y)):
            return False
    return True


def _quiet(command: list[str]) -> int:
    """``harness COMMAND`` in this process, its output swallowed; its exit status."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return harness(command)


def reader_load_run(run: Path, out: Path):
    t = H.load_run(run)
    return {"conditions": t.conditions, "attention": t.attention, "noise": t.noise}, t.manifest


def same_load_run(a, b) -> bool:
    return _tables_equal(a[0], b[0]) and a[1] == b[1]


def reader_resume(run: Path, out: Path):
    status = _quiet(["resume", str(run)])
    if status != 0:
        return status
    return {name: RunDir(run).table(name) if RunDir(run).has(name) else None for name in RunDir.TABLES}


def reader_figures(run: Path, out: Path):
    status = _quiet(["figures", str(run)])
    return status if status != 0 else (run / RunDir.REPORT).read_text(encoding="utf-8")


def reader_claims(run: Path, out: Path):
    status = _quiet(["claims", str(run), "--out", str(out / "claims")])
    return status if status != 0 else pd.read_parquet(out / "claims" / "claims.parquet")


def reader_collect(run: Path, out: Path):
    status = _quiet(["collect", str(run), "--out", str(out / "collected")])
    if status != 0:
        return status
    return {name: pd.read_parquet(out / "collected" / name) for name in (RunDir.CONDITIONS, RunDir.ATTENTION)}


READERS = {
    "load_run": (reader_load_run, same_load_run),
    "resume": (reader_resume, _tables_equal),
    "figures": (reader_figures, lambda a, b: a == b),
    "claims": (reader_claims, lambda a, b: a.equals(b)),
    "collect": (reader_collect, _tables_equal),
}


def classify(read, same, clean, run: Path, out: Path) -> str:
    try:
        got = read(run, out)
    except HarnessError:
        return "detected"
    except Exception as exc:  # noqa: BLE001 - what the campaign counts
        return f"traceback: {type(exc).__name__}: {str(exc)[:80]}"
    if isinstance(got, int):  # a command's exit status
        return "detected" if got in (1, 2) else f"traceback: exit {got}"
    return "harmless" if same(got, clean) else "silent"


def campaign(pristine: Path, work: Path, reader: str, files: list[Path], flips: int, rng: random.Random) -> dict:
    """``flips`` random single-bit flips in each of ``files`` (paths inside ``pristine``), each read
    by ``reader`` on a fresh copy of the run at ``work``; counts per file and outcome."""
    read, same = READERS[reader]
    out = work.parent / "out"

    def fresh() -> None:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, work)
        out.mkdir()

    fresh()
    clean = read(work, out)
    assert not isinstance(clean, int), f"{reader} refuses the undamaged run (exit {clean})"
    counts: dict[str, Counter] = {}
    for path in files:
        relative = path.relative_to(pristine)
        size = path.stat().st_size
        outcomes = counts.setdefault(str(relative), Counter())
        for _ in range(flips):
            fresh()
            target = work / relative
            data = bytearray(target.read_bytes())
            data[rng.randrange(size)] ^= 1 << rng.randrange(8)
            target.write_bytes(bytes(data))
            outcome = classify(read, same, clean, work, out)
            outcomes[outcome.split(":")[0] if outcome.startswith("traceback") else outcome] += 1
            if outcome.startswith("traceback") or outcome == "silent":
                outcomes[f"  {outcome}"] += 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every reader's flips per file")
    parser.add_argument("--readers", nargs="*", default=list(FLIPS), choices=list(FLIPS))
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the readers' warnings about damage: counted, not printed
    rng = random.Random(ns.seed)
    failed, total = False, 0
    with tempfile.TemporaryDirectory() as tmp:
        pristine = tiny_run(Path(tmp))
        files = run_files(pristine)
        print(f"{'reader':<9} {'file':<34} {'bytes':>7} {'flips':>6} {'detected':>9} {'harmless':>9} {'silent':>7} "
              f"{'traceback':>10}")
        for reader in ns.readers:
            flips = max(1, round(FLIPS[reader] * ns.scale))
            start = time.perf_counter()
            counts = campaign(pristine, Path(tmp) / "work" / "run", reader, files, flips, rng)
            for name, out in counts.items():
                size = (pristine / name).stat().st_size
                print(f"{reader:<9} {name[-34:]:<34} {size:>7} {flips:>6} {out['detected']:>9} {out['harmless']:>9} "
                      f"{out['silent']:>7} {out['traceback']:>10}")
                for kind in sorted(k for k in out if k.startswith("  ")):
                    print(f"    {kind.strip()} (x{out[kind]})")
                failed |= out["silent"] > 0 or out["traceback"] > 0
                total += flips
            print(f"{reader}: {time.perf_counter() - start:.0f} s", flush=True)
    print(f"{total} flips: " + ("FAIL: some were silent or tracebacks" if failed else
                                 "every one detected or harmless"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
