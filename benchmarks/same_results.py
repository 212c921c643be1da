"""Whether two versions of the harness give the same results: tables, reports and model cards.

A refactor that claims "results unchanged" is checked here, not by eye. ``record`` runs, through
the command line only (so it works on any version of the package layout):

- a sweep on a tiny random model of every family the attention probe supports (``tests/zoo.py``,
  written to disk as safetensors once, under ``DIR/models``): 2 prompts x 2 + 2 prefixes x 2
  lengths, isolation none / mask_reset / decay, noise floor on, report drawn;
- the commands of ``make demo`` (three sweeps and the side-by-side report), unless ``--no-demo``;
- both shipped story models' cards rebuilt with ``harness-train-demo --recard`` from their
  ``training.json`` (and ``lineage.json``): the records in ``demo_training/records/NAME``, or on a
  checkout from before the trainer left the harness, ``harness train-demo --recard`` and the
  records in ``harness/assets/NAME``.

``compare`` then checks two recorded directories: every parquet table equal (values and dtypes)
except the ``seconds`` timing column, every ``report.md`` and model card equal byte for byte.

    python benchmarks/same_results.py record /tmp/before     # on the old checkout
    python benchmarks/same_results.py record /tmp/after      # on the new one
    python benchmarks/same_results.py compare /tmp/before /tmp/after

A version whose default computation changes on purpose (``decode.path=teacher_forced`` reads
continuations off the teacher-forced pass) is checked on the old path:
``record /tmp/after --overrides decode.path=stepwise``, compared with ``--ignore`` for the columns it
adds (``conditions.parquet:tf_divergence``).

A family sweep takes a few seconds each (about two minutes in all), the demo about five.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
TIMING = ["seconds"]
# Columns renamed on purpose since the layout change (old name -> new name), compared under the new name.
RENAMED = {"noise.parquet": {"probe": "comparison"}}
SWEEP = ["prompts.limit=2", "prefixes.per_group=2", "prefix.lengths=[16,32]", "decode.max_new_tokens=8",
         "isolation=[none,mask_reset,decay]", "isolation_betas=[4.0]"]


def write_models(models: Path) -> list[str]:
    """Save every probe-supported tiny family to ``models/<family>`` (once); returns the families."""
    sys.path.insert(0, str(ROOT))
    from tests.zoo import BYPASSES_INTERFACE, FAMILIES, tiny_model

    families = sorted(f for f in FAMILIES if f not in BYPASSES_INTERFACE)
    for family in families:
        if not (models / family / "config.json").is_file():
            model, tok = tiny_model(family, seed=0)
            model.save_pretrained(models / family)
            tok.save_pretrained(models / family)
    return families


def harness(*args: str, cwd: Path = ROOT) -> None:
    # PYTHONPATH: this checkout's package, whichever checkout the virtual environment installed
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"harness {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def trainer(*args: str) -> None:
    """``harness-train-demo ARGS`` of this checkout, or where the trainer is still part of the harness,
    ``harness train-demo ARGS`` (the same options)."""
    if (ROOT / "demo_training" / "train_demo.py").is_file():
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-m", "demo_training.train_demo", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"harness-train-demo {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    else:
        harness("train-demo", *args)


def records(card: str) -> Path:
    """Where this checkout keeps what a shipped model's card is written from."""
    moved = ROOT / "demo_training" / "records" / card
    return moved if moved.is_dir() else ROOT / "harness" / "assets" / card


def record(out: Path, demo: bool, overrides: list[str] = ()) -> None:
    """``overrides`` go to every sweep (``decode.path=stepwise``: the path of earlier versions)."""
    out.mkdir(parents=True, exist_ok=True)
    families = write_models(out / "models")
    for family in families:
        harness("sweep", "model=tiny", f"model.name_or_path={out / 'models' / family}", *SWEEP, *overrides,
                f"hydra.run.dir={out / 'families' / family}")
        print(f"swept {family}", flush=True)
    for card in ("demo-model", "demo-obedient"):
        target = out / "cards" / card
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in ("training.json", "lineage.json"):
            if (records(card) / name).is_file():
                shutil.copy(records(card) / name, target)
        trainer("--recard", str(target))
    print("rebuilt the model cards", flush=True)
    if demo:  # the commands of `make demo`
        demo_out = out / "demo"
        harness("sweep", "experiment=demo", *overrides, f"hydra.run.dir={demo_out / 'default'}")
        harness("sweep", "experiment=demo-directives", "draw_figures=false", *overrides,
                f"hydra.run.dir={demo_out / 'directives'}")
        harness("sweep", "experiment=demo-directives-plain", "draw_figures=false", *overrides,
                f"hydra.run.dir={demo_out / 'directives-plain'}")
        harness("figures", str(demo_out / "directives"), str(demo_out / "directives-plain"), "--out",
                str(demo_out / "directives-both"))
        print("ran the demo's sweeps", flush=True)


def compare(before: Path, after: Path, ignore: list[str]) -> int:
    """``ignore``: file names (``noise.parquet``, ``report.md``) or ``file:column`` pairs a change
    is expected to alter, left out of the comparison (and said so)."""
    problems, checked = [], 0
    skip_files = {i for i in ignore if ":" not in i}
    skip_columns: dict[str, list[str]] = {}
    for item in ignore:
        if ":" in item:
            name, column = item.split(":", 1)
            skip_columns.setdefault(name, []).append(column)
    for old in sorted(before.rglob("*")):
        rel = old.relative_to(before)
        if "models" in rel.parts[:1] or not old.is_file():
            continue
        new = after / rel
        if old.name in skip_files:
            continue
        if old.suffix == ".parquet" and "results" not in rel.parts:
            if not new.is_file():
                problems.append(f"{rel}: missing in {after}")
                continue
            a, b = (pd.read_parquet(p) for p in (old, new))
            if "model" in a:  # the tiny families are named by their path, under each recorded directory
                a["model"] = a["model"].cat.rename_categories(lambda m: m.replace(str(before), str(after)))
            dropped = TIMING + skip_columns.get(old.name, [])
            a, b = (t.drop(columns=[c for c in dropped if c in t.columns]) for t in (a, b))
            a = a.rename(columns={k: v for k, v in RENAMED.get(old.name, {}).items() if v not in a.columns})
            try:
                pd.testing.assert_frame_equal(a, b, check_exact=True)
            except AssertionError as exc:
                problems.append(f"{rel}: {str(exc).splitlines()[0]}")
            checked += 1
        elif old.name in ("report.md", "README.md"):
            if not new.is_file() or new.read_bytes() != old.read_bytes().replace(str(before).encode(), str(after).encode()):
                problems.append(f"{rel}: differs")
            checked += 1
    for card in ("demo-model", "demo-obedient"):  # the rebuilt cards against the shipped ones
        shipped = ROOT / "harness" / "assets" / card / "README.md"
        rebuilt = after / "cards" / card / "README.md"
        if rebuilt.is_file() and rebuilt.read_bytes() != shipped.read_bytes():
            problems.append(f"cards/{card}/README.md: differs from the shipped card")
    print(f"compared {checked} tables, reports and cards" + (f" (left out: {', '.join(ignore)})" if ignore else ""))
    for p in problems:
        print("DIFFERENT", p)
    print("identical (timings aside)" if not problems else f"{len(problems)} difference(s)")
    return 1 if problems or not checked else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the sweeps and rebuild the cards into DIR")
    rec.add_argument("dir", type=Path)
    rec.add_argument("--no-demo", action="store_true", help="skip make demo (five minutes)")
    rec.add_argument("--overrides", nargs="*", default=[], metavar="KEY=VALUE",
                     help="config overrides for every sweep, e.g. decode.path=stepwise (the earlier versions' path)")
    cmp_ = sub.add_parser("compare", help="compare two recorded directories")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    cmp_.add_argument("--ignore", action="append", default=[], metavar="FILE[:COLUMN]",
                      help="a file or a file's column the change is meant to alter (repeatable)")
    ns = parser.parse_args()
    if ns.command == "record":
        record(ns.dir.resolve(), not ns.no_demo, ns.overrides)
        return 0
    return compare(ns.before, ns.after, ns.ignore)


if __name__ == "__main__":
    sys.exit(main())
