"""How long each ``harness <command> --help`` takes in a fresh process, beside what any Python
process pays (``python -c pass``) and what importing torch alone costs: a help that is slow is one
that imports what it documents before parsing its arguments.

    python benchmarks/help_time.py [--rounds 3]

Prints the median wall seconds of each over the rounds (each round runs every command once, in
turn, so drift on a shared machine touches all alike).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from harness.cli import COMMANDS


def seconds(argv: list[str]) -> tuple[float, int]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - start, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    runs = {"python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import torch'": [sys.executable, "-c", "import torch"],
            "harness --help": [sys.executable, "-m", "harness", "--help"],
            **{f"harness {c} --help": [sys.executable, "-m", "harness", c, "--help"] for c in COMMANDS}}
    times: dict[str, list[float]] = {name: [] for name in runs}
    codes: dict[str, int] = {}
    for _ in range(ns.rounds):
        for name, argv in runs.items():
            t, codes[name] = seconds(argv)
            times[name].append(t)
    print(f"{'command':<40} {'median s':>9} {'exit':>5}")
    for name in runs:
        print(f"{name:<40} {statistics.median(times[name]):>9.2f} {codes[name]:>5}")


if __name__ == "__main__":
    main()
