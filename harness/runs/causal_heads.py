"""``harness causal-heads RUN --out DIR``: do the heads an earlier run names carry its effect?

From an earlier run (its config in ``manifest.json``, its per-head ``attention.parquet``):

1. split its B and C prefixes in two halves (:func:`harness.analysis.causal_heads.split_prefixes`);
2. rank heads by their C-minus-B difference (capture by default) on the *choosing* half, and form
   the head sets top-k and random-k (drawn from the same layers, several draws) for each k;
3. rerun A, and B and C on the *testing* half, at one prefix length, under: no isolation, the
   prefix masked in every head (``mask``), in the top-k or random-k heads only (``mask_heads``),
   and visible to those heads only (``only_heads``);
4. write ``causal_conditions.parquet`` (one row per condition and setting), ``head_sets.parquet``
   (the ranking and every set), ``causal_effects.parquet`` (effect, removal and share per measure
   and setting), ``figures/causal_heads.png`` and ``causal_heads.md``.

Heads as a detector are ``harness detect``'s (:mod:`harness.runs.detect`).

Each result is stored under ``DIR/results`` as it finishes (keyed like a sweep's, head set
included), so an interrupted command rerun with the same arguments computes only what is missing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from harness.analysis import causal_heads as ch
from harness.analysis.causal_heads import DEFAULT_KS
from harness.analysis.claims import plain_concatenation
from harness.errors import HarnessError
from harness.inputs.isolation import Isolation
from harness.io import write_json, write_parquet
from harness.reporting.causal_heads import write_causal_report
from harness.runs.compute import compute
from harness.runs.inputs import of_config, refuse_changed
from harness.runs.reading import RunTables, read_runs, refuse_collected
from harness.runs.rundir import RunDir
from harness.runs.schema import ATTENTION_METRICS
from harness.runs.store import ResultStore

log = logging.getLogger(__name__)

def settings_for(sets: dict[str, tuple[tuple[int, int], ...]], converse: bool) -> list[Isolation]:
    """No isolation, ``mask``, and per head set ``mask_heads`` (and ``only_heads`` if ``converse``)."""
    out = [Isolation(), Isolation("mask")]
    modes = ("mask_heads", "only_heads") if converse else ("mask_heads",)
    return out + [Isolation(mode, heads=heads, head_set=name) for mode in modes for name, heads in sets.items()]


def _length(conditions: pd.DataFrame, prefix_len: int | None) -> int:
    lengths = sorted(int(n) for n in conditions.loc[conditions.group != "A", "prefix_len"].unique())
    if prefix_len is None:
        return lengths[0]
    if prefix_len not in lengths:
        raise HarnessError(f"prefix length {prefix_len} is not in the run (it has {lengths}); pick one with --length")
    return prefix_len


def causal_heads(run_dir: Path, out_dir: Path, ks: Sequence[int] = DEFAULT_KS, draws: int = 3,
                 rank_by: str = "capture", segment: str = "task", prefix_len: int | None = None, seed: int = 0,
                 converse: bool = True, device: str | None = None, progress: bool = True, causal: bool = True,
                 trust_damaged: bool = False, allow_mixed_settings: bool = False,
                 notes: list[str] = ()) -> dict[str, pd.DataFrame]:
    """Run the causal test described in the module docstring (``causal=False``: the ranking and head
    sets only, from the run's tables, without loading the model); returns the
    tables it wrote. The run's state is the caller's to check (:func:`harness.runs.reading.reading_notes`,
    as ``harness causal-heads`` does); its tables are read checked (``trust_damaged``,
    ``allow_mixed_settings``: :func:`harness.runs.reading.read_runs`)."""
    run = RunDir(run_dir)
    manifest = run.manifest(trust_damaged)
    refuse_collected(run, manifest or {}, "with no model configuration of its own to patch heads in" if causal else
                     "whose tables pool several runs' (heads are ranked within one run's)", one_run=True)
    if manifest is None or "config" not in manifest:
        raise HarnessError(f"{run_dir} has no manifest.json with the run's config: point at a finished sweep's "
                           f"directory")
    tables = RunTables(*read_runs([Path(run_dir)], trust_damaged, allow_mixed_settings), None, manifest)
    if tables.attention is None or tables.attention.empty:
        raise HarnessError(f"{run_dir} has no attention table to name heads from: run the sweep with "
                           f"analysis.attention=true")
    own_a = [m for m in ATTENTION_METRICS if m.endswith("_a")]  # A's own, at the same rows of B and C alike
    if rank_by in own_a:
        raise HarnessError(f"--rank-by {rank_by} is group A's own quantity, the same in a B and a C condition of one "
                           f"prompt: its C minus B is 0 at every head and ranks nothing; use capture or kl_shared")
    measures = [m for m in ATTENTION_METRICS if m in tables.attention and m not in own_a]
    if rank_by not in measures:  # a key, a count or a text column is no measure to rank heads by
        raise HarnessError(f"--rank-by {rank_by!r} is not an attention measure of {run_dir}/attention.parquet "
                           f"(one of {', '.join(measures)}; capture or kl_shared are the usual ones)")
    conditions, attention, _ = plain_concatenation(tables.conditions, tables.attention, "heads are named on")
    tables = RunTables(conditions, attention, None, manifest)
    groups = set(tables.conditions.group.astype(str))
    if not {"B", "C"} <= groups:
        raise HarnessError(f"{run_dir} has groups {sorted(groups)}: heads are named by C minus B, so the run needs "
                           f"both (groups=[A,B,C])")
    length = _length(tables.conditions, prefix_len)
    settings = {"prefix_len": length, "rank_by": rank_by, "segment": segment, "seed": seed, "ks": sorted(set(ks)),
                "draws": draws, "converse": converse}  # what makes the test this one (causal_heads.json holds them)
    held = [name for name in CAUSAL_FILES if (Path(out_dir) / name).is_file()]
    if not causal and held:  # first: whatever its settings, the ranking alone would replace the test's page
        raise HarnessError(f"--out {out_dir} holds a causal test ({', '.join(held[:2])}, ...); --ranking-only would "
                           f"replace its page and remove its tables: give another --out (nothing is overwritten)")
    _refuse_other_settings(Path(out_dir), settings)
    choose, test = ch.split_prefixes(tables.conditions, seed)
    if not choose or not test:
        raise HarnessError(f"{run_dir} has too few prefixes to choose heads on one half and test on the other")
    rows = tables.conditions[tables.conditions.group.isin(["B", "C"])]
    for half, prefixes in (("choosing", choose), ("testing", test)):  # each half compares C with B
        lacking = sorted({"B", "C"} - set(rows.loc[rows.prefix_id.astype(str).isin(prefixes), "group"].astype(str)))
        if lacking:
            raise HarnessError(f"{run_dir}: heads are chosen on one half of its B and C prefixes and tested on the "
                               f"other, and the {half} half holds no group {lacking[0]} prefix: each group needs at "
                               f"least 2 prefixes (a sweep with prefixes.per_group=2 or more)")
    ranking = ch.rank_heads(tables.attention, choose, rank_by, segment, length)
    heads_per_layer = int(tables.attention["head"].max()) + 1
    sets = ch.head_sets(ranking, ks, draws, heads_per_layer, seed)
    left_out = sorted(k for k in set(ks) if not 0 < k < len(ranking))
    if left_out and len(left_out) == len(set(ks)):
        raise HarnessError(f"--k {' '.join(map(str, left_out))}: the model has {len(ranking)} heads in all, and a set "
                           f"must leave some out; give sizes below {len(ranking)}")
    if left_out:
        log.warning("--k %s left out: the model has %d heads in all", " ".join(map(str, left_out)), len(ranking))
    repeats = []  # said on the page too: its table lists every draw, repeats as if they were others
    for k in sorted({ch.parse_set(name)[1] for name in sets if name.startswith("random")}):
        drawn = {sets[f"random{k}.{d}"] for d in range(1, draws + 1)}
        if len(drawn) < draws:  # a small model has few sets of k heads shaped like the top k
            repeats.append(f"only {len(drawn)} distinct random set(s) of {k} heads shaped like the top {k} exist in "
                           f"this model: its {draws} draws repeat them (rows of the same set are the same draw)")
            log.warning("%s", repeats[-1])
    set_rows = [{"head_set": name, **dict(zip(("kind", "k"), ch.parse_set(name))), "heads": [list(h) for h in heads]}
                for name, heads in sets.items()]
    out = {"head_ranking.parquet": ranking, "head_sets.parquet": pd.DataFrame(set_rows)}
    about = {"run": str(run_dir), "model": str(manifest["config"]["model"]["name_or_path"]), **settings,
             "choosing_prefixes": sorted(choose), "testing_prefixes": sorted(test),
             "n_prompts": int(tables.conditions.prompt_id.nunique()), "n_conditions": 0, "notes": [*notes, *repeats]}
    effects = pd.DataFrame()
    if causal:  # the run's experiment is built again from its config: from the files it was made from
        refuse_changed(str(run_dir), manifest.get("inputs"), of_config(manifest["config"]),
                       "its heads would be tested on other prompts or prefixes than the run named them on",
                       config=manifest["config"])
        records = _causal_sweep(manifest["config"], sets, test, length, converse, Path(out_dir), device, progress)
        effects = ch.causal_effects(records[records.group != "A"], seed=seed)
        out.update({"causal_conditions.parquet": records, "causal_effects.parquet": effects})
        about["n_conditions"] = len(records)
    for name, df in out.items():
        write_parquet(df, Path(out_dir) / name)
    write_json(about, Path(out_dir) / "causal_heads.json")
    written = write_causal_report(effects, ranking, about, Path(out_dir))
    _drop_earlier(Path(out_dir), [Path(out_dir) / name for name in out] + written)
    return out


def _refuse_other_settings(out_dir: Path, settings: dict) -> None:
    """An ``--out`` holding a causal test of other settings is another analysis: refused, not replaced
    (a rerun with the same settings resumes it)."""
    try:
        earlier = json.loads((out_dir / "causal_heads.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    differ = [f"{k} {earlier[k]} there, {v} here" for k, v in settings.items() if k in earlier and earlier[k] != v]
    if differ:
        held = ("a causal test" if any((out_dir / name).is_file() for name in CAUSAL_FILES) else
                "a head ranking (--ranking-only)")  # no causal test was ever run there
        raise HarnessError(f"--out {out_dir} holds {held} of other settings ({'; '.join(differ)}): give another "
                           f"--out (nothing is overwritten), or the same settings to resume it")


CAUSAL_FILES = ("causal_conditions.parquet", "causal_effects.parquet", "figures/causal_heads.png",
                "figures/causal_heads.pdf")  # what only a causal test (not --ranking-only) writes


def _drop_earlier(out_dir: Path, written: list[Path]) -> None:
    """Remove what an earlier causal-heads run into ``out_dir`` wrote and this one did not (a causal
    test's tables and figure beside a ranking-only page): one directory describes one analysis."""
    gone = [name for name in CAUSAL_FILES if (out_dir / name).is_file() and out_dir / name not in written]
    for name in gone:
        (out_dir / name).unlink(missing_ok=True)
    if gone:
        log.info("removed %s, from an earlier causal-heads run into %s with other options", ", ".join(gone), out_dir)


def _causal_sweep(config: dict, sets: dict, test: set, length: int, converse: bool, out_dir: Path,
                  device: str | None, progress: bool) -> pd.DataFrame:
    """A, and B and C on the testing prefixes under every setting: one row per condition, with its
    ``setting`` label; each result stored under ``out_dir/results`` as it finishes."""
    from omegaconf import OmegaConf

    from harness.runs.experiment import Experiment

    exp = Experiment.build(OmegaConf.create(config), device=device, attention=False, lengths=[length],
                           settings=settings_for(sets, converse), describe=False)
    conditions = [c for c in exp.conditions if c.group == "A" or str(c.prefix_id) in test]
    log.info("%d head sets x %d prefixes on the testing half: %d conditions", len(sets),
             len({c.prefix_id for c in conditions if c.group != "A"}), len(conditions))
    done = compute(exp, conditions, store=ResultStore(out_dir), extra=lambda c: {"setting": c.isolation.label},
                   progress=progress)
    if done.failures:
        raise HarnessError(f"{len(done.failures)} conditions failed (first: {done.failures[0][1]}); rerun the "
                           f"same command to retry them")
    # the label comes from the condition: two head sets that happen to be equal share one stored result
    records = pd.DataFrame([{**row.record, "setting": c.isolation.label} for c, row in done.rows.items()])
    return records.drop(columns=["input_ids"], errors="ignore")
