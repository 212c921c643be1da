"""How long ``make test`` takes against an earlier version's suite, measured side by side.

This machine's speed drifts by a third within an hour (shared hosts), so a suite time measured
once and compared with one taken on another day says little. This script runs the baseline's
suite and this checkout's suite back to back, alternating, in the same environment (this
virtual environment's packages; the baseline's own code through PYTHONPATH, from a temporary
git worktree), and prints each time and the paired ratios.

    python benchmarks/suite_time.py                     # against 0.1.0 (4cc3d4a), one round
    python benchmarks/suite_time.py --rounds 2

Each suite runs as its own ``make test`` ran it: the baseline's ``pytest -q tests``, this
version's ``pytest -q -n 2 tests``. A round takes about seven minutes on two CPU cores.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_suite(cwd: Path, args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one pytest run and its summary line; fails loudly if a test fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"], cwd=cwd, env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    summary = (done.stdout.strip().splitlines() or [""])[-1]
    if done.returncode != 0 or not re.search(r"\d+ passed", summary):
        sys.exit(f"suite in {cwd} failed: {summary}\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return seconds, summary.strip("= ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="4cc3d4a", help="git revision of the earlier version")
    parser.add_argument("--baseline-args", default="-q tests", help="its make test's pytest arguments")
    parser.add_argument("--args", default="-q -n 2 tests", help="this version's make test's pytest arguments")
    parser.add_argument("--rounds", type=int, default=1)
    ns = parser.parse_args()

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(old), ns.baseline], check=True)
        try:
            rows = []
            for round_ in range(ns.rounds):
                t_old, s_old = run_suite(old, ns.baseline_args.split(), {**env, "PYTHONPATH": str(old)})
                t_new, s_new = run_suite(ROOT, ns.args.split(), env)
                rows.append((t_old, t_new))
                print(f"round {round_ + 1}: baseline {t_old:6.1f} s ({s_old}); this version {t_new:6.1f} s "
                      f"({s_new}); ratio {t_new / t_old:.2f}", flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=True)
    ratios = [new / old_ for old_, new in rows]
    print(f"this version / {ns.baseline}: " + ", ".join(f"{r:.2f}" for r in ratios)
          + f" (wall time of the whole pytest command, {len(rows)} paired round(s))")


if __name__ == "__main__":
    main()
