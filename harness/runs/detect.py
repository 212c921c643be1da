"""``harness detect RUN... --out DIR``: would an attention-based detector catch the runs' attacks?

For every B and C condition of the runs (rebuilt from each run's recorded config: the same input
ids), one forward pass (:func:`harness.measure.focus.focus_pass`, no continuation: a detector sees
only the input), each stored under ``DIR/results`` as it finishes, so a rerun of the same command
computes only what is missing. Then, per model, placement and prefix length
(:mod:`harness.analysis.detection`):

* ``halves``: each prefix source split in two halves (matched sets kept together, stratified by
  group); the detectors' heads, k and thresholds chosen on one, everything reported on the other;
* ``held-out source``: chosen on one source's choosing half (the hand-written bank, say), reported
  on another's testing half (a public benchmark's), and the reverse;
* ``held-out templates``: chosen on the sets of half a benchmark's attack templates, reported on the
  sets of the others;
* ``over-defence``: the share of benign inputs that read like instructions (``prefixes=spikee-fp``
  runs) that each detector flags at its 1% threshold.

Writes ``detector_scores.parquet`` (a row per condition and detector), ``detector.parquet`` (a row
per detector, model, placement, length, source and split), ``detector_heads.parquet`` (the heads
and k each detector chose), ``detector.md``, ``figures/detector_roc.{png,pdf}``, ``manifest.json``
(sealed, with the tables' sha256) and ``status.json``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from harness.analysis import detection as dt
from harness.errors import HarnessError
from harness.inputs.isolation import Isolation
from harness.io import write_parquet
from harness.runs.environment import now_iso, package_versions
from harness.runs.inputs import of_config, refuse_changed
from harness.runs.reading import refuse_collected
from harness.runs.rundir import RunDir
from harness.runs.store import CorruptResult, ResultStore, fingerprint

log = logging.getLogger(__name__)
DETECT_VERSION = 1  # bump when what a stored input's arrays mean changes
INPUT_COLUMNS = ["model", "placement", "source", "run", "prompt_id", "group", "prefix_id", "prefix_len", "pair",
                 "attack", "span_role", "injection_at"]
TABLES = ("detector_scores.parquet", "detector.parquet", "detector_heads.parquet")


COMMAND = "harness detect"


def is_detect_output(path: Path) -> bool:
    """Whether ``path`` is an earlier ``harness detect`` output (finished or not), which a rerun of
    the command resumes: its ``status.json`` names the command."""
    try:
        return (RunDir(path).status() or {}).get("command") == COMMAND
    except HarnessError:
        return False


def _source(config: dict) -> str:
    """What a run's prefixes are called on the page: a corpus by its name, a prefix file as the bank it is."""
    prefixes = config.get("prefixes") or {}
    return str(prefixes.get("corpus") or f"bank {prefixes.get('name') or 'file'}")


def measure_runs(run_dirs: list[Path], store: ResultStore, device: str | None = None, batch_size: int | None = None,
                 progress: bool = True, trust_damaged: bool = False) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """Every B/C condition of the runs, one row each (:data:`INPUT_COLUMNS` and ``input``), and
    each one's array ``[3, layers, heads]`` (task mass, data mass, capture), read from ``store``
    where there and computed where not. An input two runs both hold (the same model, prompt and
    prefix: runs that differ only in how they continued) is one input, scored once: read from each,
    it would count as two observations."""
    from omegaconf import OmegaConf
    from tqdm import tqdm

    from harness.measure.focus import focus_batches, focus_pass
    from harness.runs.experiment import Experiment

    rows, arrays, seen, repeated = [], [], set(), 0
    for run_dir in run_dirs:
        manifest = RunDir(run_dir).manifest(trust_damaged)
        refuse_collected(RunDir(run_dir), manifest or {}, "with no model configuration of its own to score inputs with")
        if manifest is None or "config" not in manifest:
            raise HarnessError(f"{run_dir} has no manifest.json with the run's config: point at a finished sweep's "
                               f"directory")
        config = manifest["config"]
        refuse_changed(str(run_dir), manifest.get("inputs"), of_config(config),
                       "its inputs would be scored from other prompts or prefixes than the run's", config=config)
        # a detector reads the input as it arrives: plain concatenation, whatever isolation the run swept
        exp = Experiment.build(OmegaConf.create(config), device=device, attention=True, settings=[Isolation()])
        try:
            keys = {c: fingerprint({"detect": DETECT_VERSION, "input": key}) for c, key in exp.keys().items()}
            batches = focus_batches(exp.conditions, batch_size or exp.batch_size)
            todo = [b for b in batches if not all(store.has(keys[c]) for c in b)]
            bar = tqdm(total=sum(map(len, todo)), desc=f"detect {Path(run_dir).name}", unit="input", disable=not progress)
            for batch in todo:
                for result in focus_pass(exp.loaded.model, exp.engine.prefix_cache, batch):
                    c = result.condition
                    store.save(keys[c], {"prompt_id": c.prompt_id, "prefix_id": c.prefix_id},
                               {"input": {"task_mass": result.task_mass, "data_mass": result.data_mass,
                                          "capture": result.capture}}, {"input": 1})
                bar.update(len(batch))
            bar.close()
            for batch in batches:
                for c in batch:
                    o = c.insertion_columns()
                    same = (exp.model_label, c.placement, c.prompt_id, c.group, c.prefix_id, c.prefix_len,
                            o["injection_at"])  # the input itself: its key also holds how the run continued it
                    if same in seen:
                        repeated += 1
                        continue
                    seen.add(same)
                    try:
                        stored = store.load(keys[c])
                    except CorruptResult as exc:
                        raise HarnessError(f"{store.path(keys[c])} is damaged ({exc}): delete it and rerun the command"
                                           ) from None
                    rows.append({"model": exp.model_label, "placement": c.placement, "source": _source(config),
                                 "run": str(run_dir), "prompt_id": c.prompt_id, "group": c.group,
                                 "prefix_id": c.prefix_id, "prefix_len": c.prefix_len, "pair": c.pair,
                                 "attack": o["attack"], "span_role": o["span_role"], "injection_at": o["injection_at"]})
                    arrays.append(np.stack([stored.attention["input"][m] for m in ("task_mass", "data_mass", "capture")]))
        finally:
            exp.close()
    if repeated:
        log.warning("%d input(s) appear in more than one of these runs: each is scored once", repeated)
    inputs = pd.DataFrame(rows, columns=INPUT_COLUMNS)
    return dt.input_units(inputs).assign(input=np.arange(len(inputs))), arrays


def head_table(inputs: pd.DataFrame, arrays: list[np.ndarray]) -> pd.DataFrame:
    """The per-head table the detectors read: one row per input, layer and head (``arrays[i]``:
    input i's ``[3, layers, heads]``; models of different shapes side by side)."""
    parts = []
    shapes = pd.Series([a.shape for a in arrays], index=inputs.index)
    for _, members in inputs.groupby(shapes, sort=False):
        stacked = np.stack([arrays[i] for i in members.index])
        n, _, layers, heads = stacked.shape
        layer, head = np.meshgrid(np.arange(layers), np.arange(heads), indexing="ij")
        parts.append(pd.DataFrame({"input": np.repeat(members.input.to_numpy(), layers * heads),
                                   "layer": np.tile(layer.ravel(), n), "head": np.tile(head.ravel(), n),
                                   "task_mass": stacked[:, 0].reshape(-1), "data_mass": stacked[:, 1].reshape(-1),
                                   "capture": stacked[:, 2].reshape(-1)}))
    per = pd.concat(parts, ignore_index=True)
    return per.merge(inputs[["input", "group", "prompt_id", "unit", "attack"]], on="input")


def _scores(inputs: pd.DataFrame, heads: pd.DataFrame, fitted: dict) -> dict[str, pd.DataFrame]:
    """Each detector's scores of ``inputs``: their rows with ``score``."""
    rows = inputs.set_index("input")
    return {name: rows.loc[s.index].assign(score=s.to_numpy()).reset_index()
            for name, s in dt.score(heads[heads.input.isin(inputs.input)], fitted).items()}


def evaluate_cell(inputs: pd.DataFrame, heads: pd.DataFrame, seed: int, n_resamples: int = dt.N_RESAMPLES
                  ) -> tuple[list[dict], list[dict], list[pd.DataFrame]]:
    """The detector rows, chosen heads and halves-split scores of one model x placement x length."""
    rows, chosen, scored = [], [], []
    attacked = sorted(s for s, g in inputs.groupby("source").group if (g == "C").any())
    benign_only = sorted(set(inputs.source) - set(attacked))
    split = pd.Series("", index=inputs.index)
    for source in attacked:
        here = inputs.source == source
        split[here] = dt.halves(inputs[here], seed)
    fits = {}
    for source in attacked:
        choose = inputs[(inputs.source == source) & (split == "choose")]
        fits[source] = (dt.fit(heads[heads.input.isin(choose.input)]), choose)
    plans = [(s, s, "halves") for s in attacked] + [
        (s, t, "held-out source") for s in attacked for t in attacked if s != t]
    for chosen_on, tested_on, kind in plans:  # read on the testing half of the source tested on
        fitted, choose = fits[chosen_on]
        test = inputs[(inputs.source == tested_on) & (split == "test")]
        rows += _rows(fitted, choose, test, heads, chosen_on, tested_on, kind, seed, n_resamples)
        if kind == "halves":
            both = inputs[inputs.source == chosen_on]
            sides = split[both.index].set_axis(both.input.to_numpy())
            for detector, frame in _scores(both, heads, fitted).items():
                scored.append(frame.assign(detector=detector, split=sides.loc[frame.input].to_numpy()))
                spec = fitted[detector]
                chosen.append({"source": chosen_on, "split": kind, "detector": detector, "k": spec["k"],
                               "heads": [list(h) for h in spec["heads"]] if spec["heads"] else None,
                               "threshold_1pct": spec["threshold_1pct"], "threshold_01pct": spec["threshold_01pct"],
                               "n_benign_choosing": spec["n_benign"]})
            for fp in benign_only:  # over-defence: benign instruction-like inputs flagged at the 1% threshold
                rows += _rows(fitted, choose, inputs[inputs.source == fp], heads, chosen_on, fp, "over-defence", seed,
                              n_resamples)
        by_template = dt.template_halves(inputs[inputs.source == chosen_on], seed) if kind == "halves" else None
        if by_template is not None:
            here = inputs[inputs.source == chosen_on]
            choose_t, test_t = here[by_template == "choose"], here[by_template == "test"]
            if set(test_t.input) == set(test.input):  # the templates split the inputs as the halves did
                log.info("%s: its templates split the inputs exactly as the halves do: no held-out-templates rows",
                         chosen_on)
                continue
            rows += _rows(dt.fit(heads[heads.input.isin(choose_t.input)]), choose_t, test_t, heads, chosen_on,
                          chosen_on, "held-out templates", seed, n_resamples)
    return rows, chosen, scored


def _rows(fitted, choose, test, heads, chosen_on, tested_on, split, seed, n_resamples) -> list[dict]:
    n_choose = int((choose.group == "B").sum())
    notes = dt.negatives_note(n_choose, int((test.group == "B").sum()))
    out = []
    for detector, scores in _scores(test, heads, fitted).items():
        spec = fitted[detector]
        thresholds = {label: spec[f"threshold_{label}"] for label in dt.FPRS}
        result = dt.evaluate(scores, thresholds, seed, n_resamples if split != "over-defence" else 0)
        out.append({"detector": detector, "chosen_on": chosen_on, "source": tested_on, "split": split,
                    "k": spec["k"], "n_heads": len(spec["heads"]) if spec["heads"] else None,
                    "n_negative_choosing": n_choose, **result,
                    **{f"note_{label}": note for label, note in notes.items()}})
    return out


def refuse_without_groups(run_dirs: list[Path], trust_damaged: bool = False) -> None:
    """Refuse runs without group B or C, from their tables: a detector is scored on attacks (C)
    against benign inputs (B), and the model need not compute anything to say so. A collected set
    is refused as :func:`measure_runs` refuses it (it has no model configuration to score with)."""
    for run_dir in run_dirs:
        refuse_collected(RunDir(run_dir), RunDir(run_dir).manifest(trust_damaged) or {},
                         "with no model configuration of its own to score inputs with")
    tables = {run_dir: RunDir(run_dir).conditions(trust_damaged) for run_dir in run_dirs}
    held = {str(g) for table in tables.values() for g in table.group.unique()}
    lacking = sorted({"B", "C"} - held)
    if lacking:
        raise HarnessError(f"the runs hold no group {lacking[0]} input: a detector is scored on C (the attacks) "
                           f"against B (benign inputs), so it needs both (groups=[A,B,C])")
    cell = ["model", "placement", "prefix_len"]
    attacked = {tuple(map(str, k)) for t in tables.values() for k in t[t.group == "C"][cell].drop_duplicates().itertuples(
        index=False, name=None)}
    for run_dir, table in tables.items():  # a benign-only run is read against a detector chosen in its own cell
        x = table[table.group == "B"]
        alone = [k for k in x[cell].drop_duplicates().itertuples(index=False, name=None)
                 if tuple(map(str, k)) not in attacked]
        if alone:
            model, placement, length = alone[0]
            raise HarnessError(f"{run_dir} has benign inputs at {length} tokens ({model}, {placement}) and no run "
                               f"here has attacks there: over-defence is read against a detector chosen on attacks "
                               f"of the same model, placement and length; add such a run, or leave {run_dir} out")


def detect(run_dirs: list[Path], out_dir: Path, seed: int = 0, device: str | None = None, batch_size: int | None = None,
           progress: bool = True, trust_damaged: bool = False, n_resamples: int = dt.N_RESAMPLES,
           notes: list[str] = ()) -> dict:
    """Score, choose, evaluate and write (the module docstring; ``notes``: what the reader said of
    the runs, on the page); returns the tables written."""
    from harness.io import sha256_file, write_sealed_json
    from harness.reporting.detection import write_detector_report

    refuse_without_groups(run_dirs, trust_damaged)
    out = RunDir(out_dir)
    out.path.mkdir(parents=True, exist_ok=True)
    started = now_iso()
    out.write_status("running", command=COMMAND)
    store = ResultStore(out.path)
    inputs, arrays = measure_runs(list(run_dirs), store, device, batch_size, progress, trust_damaged)
    if inputs.empty or {"B", "C"} - set(inputs.group.astype(str)):
        raise HarnessError("the runs hold no B and C conditions to score")
    heads = head_table(inputs, arrays)
    rows, chosen, scored = [], [], []
    for (model, placement, length), cell in inputs.groupby(["model", "placement", "prefix_len"], sort=True):
        r, c, s = evaluate_cell(cell, heads[heads.input.isin(cell.input)], seed, n_resamples)
        where = {"model": model, "placement": placement, "prefix_len": int(length)}
        rows += [{**where, **x} for x in r]
        chosen += [{**where, **x} for x in c]
        scored += s
    tables = {"detector.parquet": pd.DataFrame(rows), "detector_heads.parquet": pd.DataFrame(chosen),
              "detector_scores.parquet": (pd.concat(scored, ignore_index=True).drop(columns=["input", "unit", "set_unit"])
                                          if scored else pd.DataFrame())}
    for name, df in tables.items():
        write_parquet(df, out / name)
    write_detector_report(tables["detector.parquet"], tables["detector_scores.parquet"], tables["detector_heads.parquet"],
                          out.path, [str(r) for r in run_dirs], notes)
    write_sealed_json({"command": COMMAND, "runs": [str(r) for r in run_dirs], "seed": seed,
                       "inputs": len(inputs), "detect_version": DETECT_VERSION, "started": started,
                       "finished": now_iso(), "versions": package_versions(),
                       "tables": {name: sha256_file(out / name) for name in tables}}, out / RunDir.MANIFEST)
    out.write_status("complete", command=COMMAND, inputs=len(inputs))
    return tables
