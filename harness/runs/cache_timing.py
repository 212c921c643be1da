"""The prefix-cache experiments on a vLLM engine: ``harness cache-timing``.

Serving engines share cached prefix blocks between requests; this measures what that tells
another tenant and what isolation leaves of it. One engine (prefix caching on) serves two tenants.
A trial, at one prefix length and one isolation setting: a fresh random prefix of that many tokens
is sent by the victim (so the engine caches it); the attacker then probes two candidates, each one
new token, timed as time to first token: the victim's prefix (``cached``) and another fresh random
prefix of the same length (``fresh``), each followed by the attacker's own question, in random
order. Settings: ``none`` (no salt), ``same_salt`` (both tenants give one ``cache_salt``),
``different_salts`` (each tenant its own), ``per_tenant_cache`` (each tenant its own engine, so its
own prefix cache: the attacker probes an engine the victim never used). Trials of every cell are
interleaved in one random order, so drift in the machine's speed falls on all cells alike
(``harness cache-timing`` runs ``per_tenant_cache`` after the others, in an order of its own, with
the second engine started only then: two engines up slowed every request on a small machine).

The invariant (``invariant``): in the ``none`` setting, where the attacker's request is served from
the victim's cache, its greedy continuation is compared with the same request computed after the
cache is emptied; a shared cache must add no contamination of its own (agreement rate).

A run directory like a sweep's (:class:`harness.runs.rundir.RunDir`): ``trials.parquet`` (every
probe) and ``leak.parquet`` (per setting and length: AUROC with its interval and power,
:mod:`harness.analysis.leak`), each listed with its sha256 in ``manifest.json`` (the engine's
settings too), ``status.json``, ``.hydra/``, ``leak.md`` and ``figures/fig_leak.{png,pdf}``
(:mod:`harness.reporting.leak`; ``harness figures RUN`` redraws them). Each phase (the shared
engine's settings, then ``per_tenant_cache``) is stored under ``results/`` as it ends, keyed by
what it measured: ``harness resume RUN`` after an interruption measures only the phases missing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from pathlib import Path

import pandas as pd

from harness.analysis.leak import leak_table
from harness.config import CacheSetting, override_list, recorded_config, validate
from harness.errors import HarnessError
from harness.io import read_table, sha256_file, write_json, write_parquet, write_sealed_json
from harness.model.vllm_backend import VllmWorker
from harness.reporting.leak import write_leak_outputs
from harness.runs.environment import harness_git_commit, now_iso, package_versions
from harness.runs.reading import is_cache_timing
from harness.runs.rundir import RunDir
from harness.runs.store import fingerprint

log = logging.getLogger(__name__)

# each isolation setting's (victim's, attacker's) cache salt, and whether the attacker has an engine
# (and so a prefix cache) of its own
SETTINGS = {"none": (None, None, False), "same_salt": ("shared", "shared", False),
            "different_salts": ("tenant-a", "tenant-b", False), "per_tenant_cache": (None, None, True)}
assert set(SETTINGS) == {c.value for c in CacheSetting}, "a setting the config offers has no salts here"
KIND = "cache-timing"  # the manifest's "kind": what harness figures redraws
TABLES = ("trials.parquet", "leak.parquet")
QUESTION_LEN = 8  # tokens of the attacker's own question after each candidate
# vLLM's workers spin for 0.1 s waiting for their next message after each one (its shared-memory
# queue's spin loop) before they park: a request timed on one engine while the other still spins
# shares the cores with it. Measured with two engines on two cores and no pause: the leak at 256
# tokens fell from AUROC 0.999 to 0.85 in every setting. So switching engines waits this long first.
SWITCH_PAUSE_S = 0.25
WARMUP = 2  # untimed requests per length on each engine before the trials
INVARIANT_TOKENS = 8  # greedy tokens the invariant compares


def max_model_len(lengths: list[int]) -> int:
    """The engine's context a run at these prefix lengths needs: the longest prefix, the question
    and the invariant's continuation."""
    return max(lengths) + QUESTION_LEN + INVARIANT_TOKENS


def run_trials(worker: VllmWorker, vocab: int, lengths: list[int], trials: int, settings: list[str], seed: int = 0,
               question_len: int = QUESTION_LEN, invariant_tokens: int = INVARIANT_TOKENS, stops=(),
               progress=None, own_engine: VllmWorker | None = None, switch_pause_s: float = SWITCH_PAUSE_S
               ) -> tuple[pd.DataFrame, dict]:
    """Every trial (module docstring), in one random order: the probes' table and the invariant's
    counts. Token ids are drawn uniformly from ``[10, vocab)`` (special tokens sit low).
    ``own_engine`` is the attacker's own engine, which ``per_tenant_cache`` needs."""
    if own_engine is None and any(SETTINGS[s][2] for s in settings):
        raise ValueError("per_tenant_cache needs the attacker's own engine (own_engine)")
    rng = random.Random(seed)
    order = [(s, length, t) for s in settings for length in lengths for t in range(trials)]
    rng.shuffle(order)
    rows, same, compared = [], 0, 0

    def tokens(n: int) -> list[int]:
        return [rng.randrange(10, vocab) for _ in range(n)]

    # a new engine's first requests are slow (tens to hundreds of ms more): untimed ones first, at
    # every length, on each engine the trials use
    for engine in {id(e): e for e in (worker, own_engine) if e is not None}.values():
        for length in lengths:
            for _ in range(WARMUP):
                engine.probe(tokens(length + question_len))
    last = [worker]

    def on(engine):
        """``engine``, ready to be timed: if the other engine was the last used, after it has stopped
        spinning (SWITCH_PAUSE_S) and after an untimed request that wakes this one (an engine idle
        for a moment answered its first request 0.1-0.2 s late, whatever the request)."""
        if engine is not last[0]:
            time.sleep(switch_pause_s)
            engine.probe(tokens(question_len))
            last[0] = engine
        return engine

    for k, (setting, length, trial) in enumerate(order):
        victim_salt, attacker_salt, separate = SETTINGS[setting]
        attacker = own_engine if separate else worker
        victim = tokens(length)
        on(worker).probe(victim + tokens(question_len), salt=victim_salt)  # the victim's request caches its prefix
        question = tokens(question_len)
        candidates = [("cached", victim), ("fresh", tokens(length))]
        rng.shuffle(candidates)
        for kind, prefix in candidates:
            seconds, cached = on(attacker).probe(prefix + question, salt=attacker_salt)
            rows.append({"setting": setting, "prefix_len": length, "trial": trial, "candidate": kind,
                         "seconds": seconds, "cached_tokens": cached,
                         "cached_share": cached / (length + question_len), "order": k})
        if setting == "none" and invariant_tokens:
            # the attacker's request as served (its prefix from the victim's cache), then computed afresh
            (served,), _ = on(worker).generate([victim + question], invariant_tokens, stops)
            worker.reset_cache()
            (fresh,), _ = worker.generate([victim + question], invariant_tokens, stops)
            compared += 1
            same += served.ids == fresh.ids
        if progress is not None:
            progress(k + 1, len(order))
    return pd.DataFrame(rows), {"compared": compared, "identical": same}


def phases_of(settings: list[str]) -> list[list[str]]:
    """The settings in the order they run: those on the shared engine, then those that give the
    attacker an engine of its own (each list a phase; empty ones left out)."""
    return [p for p in ([s for s in settings if not SETTINGS[s][2]], [s for s in settings if SETTINGS[s][2]]) if p]


def run_experiment(open_engine, vocab: int, lengths: list[int], trials: int, settings: list[str], seed: int = 0,
                   stops=(), progress=None, stored: dict | None = None, keep=None) -> tuple[pd.DataFrame, dict, dict]:
    """``harness cache-timing``'s trials: the settings on one shared engine first, in one random order
    (:func:`run_trials`); then those that give the attacker an engine of its own, in an order of
    their own, with that second engine opened (``open_engine()``, a context manager) only then:
    with two engines up, every request on a two-core machine ran slower and noisier (the leak at 256
    tokens read AUROC 0.84 instead of 0.99). ``stored``: phases (:func:`phases_of`) measured before,
    index -> (trials, invariant counts, engine facts), not run again (no engine opens when all are);
    ``keep(index, trials, counts, engine)`` is called as each phase ends. Returns the probes'
    table, the invariant's counts and the engine's vLLM version and dtype."""
    stored = stored or {}
    parts, invariant, done_before, engine = [], {"compared": 0, "identical": 0}, 0, {}
    with contextlib.ExitStack() as stack:
        worker = None
        for k, phase in enumerate(phases_of(settings)):
            if k in stored:
                part, counts, engine = stored[k]
                if progress is not None:
                    progress(done_before + len(part) // 2, None)
            else:
                if worker is None:
                    worker = stack.enter_context(open_engine())
                    engine = {"vllm": worker.vllm_version, "dtype": worker.dtype}
                own = stack.enter_context(open_engine()) if SETTINGS[phase[0]][2] else None
                part, counts = run_trials(worker, vocab, lengths, trials, phase, seed=seed + k, stops=stops,
                                          own_engine=own, progress=None if progress is None else
                                          lambda done, total, before=done_before: progress(before + done, total))
                part["order"] += done_before
                if keep is not None:
                    keep(k, part, counts, engine)
            done_before += len(phase) * len(lengths) * trials
            parts.append(part)
            invariant = {key: invariant[key] + counts[key] for key in invariant}
    return pd.concat(parts, ignore_index=True), invariant, engine




def timing_problems(cfg) -> list[str]:
    """What ``harness cache-timing`` refuses in a validated config, before anything loads."""
    timing, problems = cfg.timing, []
    if cfg.backend.name != "vllm":
        problems.append(f"harness cache-timing measures a vLLM engine's prefix cache: backend={cfg.backend.name} has "
                        f"none (leave backend out: the command sets backend=vllm)")
    if timing.trials < 2:
        problems.append(f"timing.trials must be at least 2, got {timing.trials}")
    if not timing.lengths or any(n < 1 for n in timing.lengths) or len(set(timing.lengths)) != len(timing.lengths):
        problems.append(f"timing.lengths must be distinct positive token counts, got {list(timing.lengths)}")
    if not timing.settings:
        problems.append("timing.settings is empty: name at least one (none, same_salt, different_salts, "
                        "per_tenant_cache)")
    elif len(set(timing.settings)) != len(timing.settings):
        problems.append(f"timing.settings must name each setting at most once, got "
                        f"{[s.value for s in timing.settings]}")
    return problems


def run(cfg, run_dir: str | Path, *, overrides: list[str] | None = None, progress: bool = True,
        open_worker=None) -> Path:
    """``harness cache-timing``: the trials of ``cfg.timing`` on the vLLM engine ``cfg.backend``
    describes, into the run directory ``run_dir`` (module docstring); ``overrides``: the command
    line, kept for ``harness resume``. ``open_worker(location, max_model_len, log_path)``: a
    stand-in for the engine (tests); by default a :class:`VllmWorker`."""
    overrides = None if overrides is None else override_list(overrides)  # a string would be recorded letter by letter
    cfg = validate(cfg)
    problems = timing_problems(cfg)
    if problems:
        raise HarnessError("; ".join(problems))
    from harness.model.loading import load_from_config

    if open_worker is None:
        from harness.model.vllm_backend import vllm_python

        vllm_python(cfg.backend.python)  # the environment, before the model's files are read
    rundir, config = RunDir(run_dir), recorded_config(cfg, overrides)
    if rundir.path.is_dir() and rundir.made_by_a_sweep() and not is_cache_timing(rundir):
        raise HarnessError(f"{rundir} is a sweep's run directory; cache-timing writes a directory of its own: choose "
                           f"another hydra.run.dir")
    measured = {k: v for k, v in config.items() if k in ("model", "backend", "timing", "seed")}
    # the tokenizer, stop ids and config only: before the claim, so a refused model leaves no directory
    loaded = load_from_config(cfg.model, device="cpu", weights=False)
    if loaded.location is None:
        raise HarnessError(f"model {cfg.model.name_or_path} is built in memory; vLLM needs one stored on disk or the "
                           f"hub")
    with rundir.claim(fingerprint(measured), cfg.on_existing.value) as store:
        rundir.take_over(store, fingerprint(measured), cfg.on_existing.value)
        if cfg.on_existing.value == "fresh":  # the phases measured before go too
            for path in (rundir / "results").glob("phase-*"):
                path.unlink()
        rundir.write_hydra(config, overrides)
        started = now_iso()
        try:
            rundir.write_status("running")
            trials, invariant, engine = _measure(cfg, rundir, loaded, progress, open_worker)
            return _write(cfg, config, rundir, loaded, trials, invariant, engine, started)
        except HarnessError as exc:
            rundir.write_status("error", error=str(exc))
            raise
        except KeyboardInterrupt:
            rundir.write_status("interrupted", error="interrupted (Ctrl-C or SIGTERM)")  # readers say how to resume
            raise


def _measure(cfg, rundir: RunDir, loaded, progress: bool, open_worker) -> tuple[pd.DataFrame, dict, dict]:
    """Every phase's trials: those stored under results/ read back, the others measured and stored."""
    from harness.model.decoding import stop_ids

    timing, backend = cfg.timing, cfg.backend
    settings, lengths = [s.value for s in timing.settings], list(timing.lengths)
    context = max(max_model_len(lengths), 256)
    logs = []  # each engine's log in the run directory, numbered (a fresh engine per phase)
    results = rundir / "results"
    results.mkdir(exist_ok=True)

    def key(k: int, phase: list[str]) -> str:
        return fingerprint({"model": cfg.model.name_or_path, "revision": loaded.resolved_revision,
                            "dtype": backend.dtype, "block_size": backend.block_size, "lengths": lengths,
                            "trials": timing.trials, "phase": phase, "seed": cfg.seed + k,
                            "question": QUESTION_LEN, "invariant": INVARIANT_TOKENS})[:24]

    phases = phases_of(settings)
    stored = {}
    for k, phase in enumerate(phases):
        table, facts = results / f"phase-{key(k, phase)}.parquet", results / f"phase-{key(k, phase)}.json"
        if table.is_file() and facts.is_file():
            info = json.loads(facts.read_text(encoding="utf-8"))
            if info.get("sha256") == sha256_file(table):  # a damaged phase is measured again
                stored[k] = (read_table(table), info["invariant"], info["engine"])
    if stored:
        log.info("%d of %d phases stored by an earlier run: reused", len(stored), len(phases))

    def keep(k: int, part: pd.DataFrame, counts: dict, engine: dict) -> None:
        name = f"phase-{key(k, phases[k])}"
        write_parquet(part, results / f"{name}.parquet")
        write_json({"sha256": sha256_file(results / f"{name}.parquet"), "invariant": counts, "engine": engine},
                   results / f"{name}.json")

    def open_engine():
        logs.append(rundir / f"vllm-{len(logs) + 1}.log")
        if open_worker is not None:
            return open_worker(loaded.location, context, logs[-1])
        return VllmWorker(loaded.location, dtype=backend.dtype or cfg.model.dtype.value, max_model_len=context,
                          seed=cfg.seed, python=backend.python, block_size=backend.block_size,
                          request_timeout_s=backend.request_timeout_s, log_path=logs[-1])

    from tqdm.auto import tqdm

    with tqdm(total=timing.trials * len(lengths) * len(settings), desc="trials", unit="trial",
              disable=not progress) as bar:
        return run_experiment(open_engine, len(loaded.tokenizer), lengths, timing.trials, settings, seed=cfg.seed,
                              stops=stop_ids(loaded.model, loaded.tokenizer), stored=stored, keep=keep,
                              progress=lambda done, total: bar.update(done - bar.n))


def leak_of(trials: pd.DataFrame) -> pd.DataFrame:
    """The leak table of a run's trials, its settings in the order :data:`SETTINGS` lists them."""
    order = {name: k for k, name in enumerate(SETTINGS)}
    return leak_table(trials).sort_values(["setting", "prefix_len"], key=lambda col: col.map(order)
                                          if col.name == "setting" else col, ignore_index=True)


def _write(cfg, config: dict, rundir: RunDir, loaded, trials: pd.DataFrame, invariant: dict, engine: dict,
           started: str) -> Path:
    """The tables, manifest (sealed, with every table's sha256), page, figure, and status last."""
    leak = leak_of(trials)
    write_parquet(trials, rundir / "trials.parquet")
    write_parquet(leak, rundir / "leak.parquet")
    versions = package_versions()
    facts = {**engine, "model": cfg.model.name_or_path, "trials": cfg.timing.trials,
             "block_size": cfg.backend.block_size, "python": str(cfg.backend.python or "")}
    write_sealed_json({
        "kind": KIND, "harness_version": versions["prefix-harness"], "harness_commit": harness_git_commit(),
        "config": config, "engine": facts, "invariant": invariant, "started": started, "finished": now_iso(),
        "model": {"name_or_path": cfg.model.name_or_path, "location": str(loaded.location),
                  "resolved_revision": loaded.resolved_revision},
        "seed": cfg.seed, "versions": versions,
        "tables": {name: sha256_file(rundir / name) for name in TABLES},
    }, rundir / RunDir.MANIFEST)
    write_leak_outputs(rundir.path, leak, invariant, facts)
    rundir.write_status("complete", trials=len(trials))
    log.info("wrote %s (%d cells; leak.md, figures/fig_leak.png)", rundir.path.resolve(), len(leak))
    return rundir.path


def redraw(run_dir: Path, out: Path, leak: pd.DataFrame) -> list[Path]:
    """``harness figures RUN`` on a cache-timing run: the page and figure again, into ``out``, from
    its leak table (read checked, as every reader reads it: ``RunDir(run_dir).table``)."""
    manifest = RunDir(run_dir).manifest(trust_damaged=True) or {}
    return write_leak_outputs(out, leak, manifest.get("invariant") or {}, manifest.get("engine") or {})
