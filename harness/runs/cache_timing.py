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

Outputs under ``--out``: ``trials.parquet`` (every probe), ``leak.parquet`` (per setting and length:
AUROC with its interval and power, :mod:`harness.analysis.leak`), ``leak.md``, and
``fig_leak.png`` (AUROC against prefix length, one line per setting).
"""

from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path

import pandas as pd

from harness.analysis.leak import leak_table
from harness.io import atomic_write, write_parquet
from harness.model.vllm_backend import VllmWorker

# each isolation setting's (victim's, attacker's) cache salt, and whether the attacker has an engine
# (and so a prefix cache) of its own
SETTINGS = {"none": (None, None, False), "same_salt": ("shared", "shared", False),
            "different_salts": ("tenant-a", "tenant-b", False), "per_tenant_cache": (None, None, True)}
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


def run_experiment(open_engine, vocab: int, lengths: list[int], trials: int, settings: list[str], seed: int = 0,
                   stops=(), progress=None) -> tuple[pd.DataFrame, dict, dict]:
    """``harness cache-timing``'s trials: the settings on one shared engine first, in one random order
    (:func:`run_trials`); then those that give the attacker an engine of its own, in an order of
    their own, with that second engine opened (``open_engine()``, a context manager) only then:
    with two engines up, every request on a two-core machine ran slower and noisier (the leak at 256
    tokens read AUROC 0.84 instead of 0.99). Returns the probes' table, the invariant's counts and
    the shared engine's vLLM version and dtype."""
    phases = [p for p in ([s for s in settings if not SETTINGS[s][2]], [s for s in settings if SETTINGS[s][2]]) if p]
    parts, invariant, done_before = [], {"compared": 0, "identical": 0}, 0
    with contextlib.ExitStack() as stack:
        worker = stack.enter_context(open_engine())
        for k, phase in enumerate(phases):
            own = stack.enter_context(open_engine()) if SETTINGS[phase[0]][2] else None
            part, counts = run_trials(worker, vocab, lengths, trials, phase, seed=seed + k, stops=stops, own_engine=own,
                                      progress=None if progress is None else
                                      lambda done, total, before=done_before: progress(before + done, total))
            part["order"] += done_before
            done_before += len(phase) * len(lengths) * trials
            parts.append(part)
            invariant = {key: invariant[key] + counts[key] for key in invariant}
        engine = {"vllm": worker.vllm_version, "dtype": worker.dtype}
    return pd.concat(parts, ignore_index=True), invariant, engine


def report(leak: pd.DataFrame, invariant: dict, facts: dict) -> str:
    """``leak.md``: what the cache tells another tenant, per setting and length, with intervals."""
    lines = ["# What a shared prefix cache tells another tenant", "",
             f"Engine: vLLM {facts['vllm']} ({facts['dtype']}) serving {facts['model']}, prefix caching on "
             f"({'blocks of ' + str(facts['block_size']) + ' tokens' if facts.get('block_size') else 'its own block size'}"
             f"); {facts['trials']} trials per cell in one random order (`harness cache-timing`; "
             "per_tenant_cache, the attacker on an engine of its own, runs after the other settings, in an order "
             "of its own, with its second engine started only then). AUROC: P(a fresh "
             "candidate's time to first token exceeds a cached one's), 0.5 when the time says nothing; 95% "
             "interval: Newcombe's score interval; power: of the test of 0.5 against a true AUROC of 0.6.", "",
             "| setting | prefix tokens | trials | median s, cached | median s, fresh | served from cache (cached / fresh) "
             "| AUROC [95% CI] | power at 0.6 |", "| --- | ---: | ---: | ---: | ---: | --- | --- | ---: |"]
    for r in leak.itertuples():
        lines.append(f"| {r.setting} | {r.prefix_len} | {r.trials} | {r.median_s_cached:.4f} | {r.median_s_fresh:.4f} "
                     f"| {r.cached_share_cached:.2f} / {r.cached_share_fresh:.2f} | {r.auroc:.3f} "
                     f"[{r.auroc_lo:.3f}, {r.auroc_hi:.3f}] | {r.power_at_0_6:.2f} |")
    if invariant["compared"]:
        lines += ["", f"Invariant: a request served with its prefix from another tenant's cache continued exactly as "
                      f"when computed afresh in {invariant['identical']} of {invariant['compared']} trials."]
    return "\n".join(lines) + "\n"


def draw(leak: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
    for setting, cell in leak.groupby("setting", sort=False):
        cell = cell.sort_values("prefix_len")
        line, = ax.plot(cell.prefix_len, cell.auroc, marker="o", label=setting)
        ax.fill_between(cell.prefix_len, cell.auroc_lo, cell.auroc_hi, color=line.get_color(), alpha=0.2)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--", label="no leak (0.5)")
    ax.set_xscale("log", base=2)
    lengths = sorted(leak.prefix_len.unique())
    ax.set_xticks(lengths, labels=[str(v) for v in lengths])
    ax.minorticks_off()
    ax.set_xlabel("prefix length (tokens)")
    ax.set_ylabel("AUROC, fresh slower than cached")
    ax.set_ylim(0, 1.02)
    ax.set_title("Timing side channel of a shared prefix cache\n(bands: 95% score intervals)", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def write_outputs(out: Path, trials: pd.DataFrame, invariant: dict, facts: dict) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    order = {name: k for k, name in enumerate(SETTINGS)}
    leak = leak_table(trials).sort_values(["setting", "prefix_len"], key=lambda col: col.map(order)
                                          if col.name == "setting" else col, ignore_index=True)
    write_parquet(trials, out / "trials.parquet")
    write_parquet(leak, out / "leak.parquet")
    text = report(leak, invariant, facts)
    atomic_write(out / "leak.md", lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    draw(leak, out / "fig_leak.png")
    return leak
