"""The commands that need no run directory: ``kv-size``, ``build-prefixes`` and ``cache-timing``."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.errors import HarnessError


def kv_size(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness kv-size", description="KV-cache size: how many bytes a model's "
                                     "key/value cache takes for a batch and sequence length.")
    parser.add_argument("overrides", nargs="*", help="key=value: model=<a model config (conf/model: tiny, demo, "
                        "smollm2-135m-instruct-q4_1, ...), hub id or local dir>, layers, kv_heads, head_dim, seq_len, "
                        "batch, dtype")
    ns = parser.parse_args(args)
    from harness.model.kv_size import describe, parse_overrides

    given = parse_overrides(ns.overrides)  # refused here, before a model config is resolved, when malformed
    resolved = [part for o in ns.overrides for part in _model_config_source(o, "dtype" not in given)]
    print(describe(resolved))
    return 0


def _model_config_source(override: str, with_dtype: bool) -> list[str]:
    """``model=NAME`` where NAME is a model config (conf/model, as ``harness sweep model=NAME``
    reads it): ``model=`` what that config loads (its GGUF's local copy, the built-in, the hub id),
    so that a config name is not looked up on the hub, and (``with_dtype``) ``dtype=`` the config's.
    Any other override as given."""
    key, _, name = override.partition("=")
    from harness.cli.hydra_apps import group_options

    if key != "model" or name not in group_options("model", None):
        return [override]
    from harness.config import compose, validate
    from harness.model.sources import gguf_source

    model = validate(compose([f"model={name}"])).model
    dtype = [f"dtype={model.dtype.value}"] if with_dtype else []
    source = gguf_source(model.gguf)
    if source is not None:
        from harness.model.gguf import dequantized_copy

        return [f"model={dequantized_copy(source)[0]}", *dtype]
    return [f"model={model.name_or_path}", *dtype]


def build_prefixes(args: list[str]) -> int:
    """``harness build-prefixes neutral|instruction ...``: build a bank, check it, write it."""
    parser = argparse.ArgumentParser(prog="harness build-prefixes", description="Build a prefix bank (JSONL) "
                                     "from a text corpus (neutral, group B) or attack templates (instruction, C).")
    sub = parser.add_subparsers(dest="what", required=True)
    neutral = sub.add_parser("neutral", help="cut neutral prefixes from a plain-text corpus")
    neutral.add_argument("--corpus", type=Path, required=True, help="UTF-8 text, paragraphs separated by blank lines")
    neutral.add_argument("--genre", default="corpus")
    instr = sub.add_parser("instruction", help="instruction-like prefixes from templates padded with filler prose")
    instr.add_argument("--templates", type=Path, required=True, help="JSONL: {style, text with {payload}, ...}")
    instr.add_argument("--fillers", type=Path, required=True, help="UTF-8 prose used as padding (whole sentences)")
    instr.add_argument("--payloads", type=Path, default=None, help="JSONL: {payload, target?} for {payload}")
    for p in (neutral, instr):
        p.add_argument("--n", type=int, default=40)
        p.add_argument("--min-chars", type=int, default=1500)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--id-prefix", default=None, help="default: the corpus or templates file name")
        p.add_argument("--licence", default="unspecified", help="licence of the source text (e.g. CC0-1.0)")
        p.add_argument("--out", type=Path, required=True, help="the JSONL file to write (a new one: see --force)")
        p.add_argument("--force", action="store_true", help="replace --out if it exists")
    ns = parser.parse_args(args)
    from harness.cli.guards import check_out_file

    check_out_file(ns.out, ns.force)
    for name in ("corpus", "templates", "fillers", "payloads"):
        given = getattr(ns, name, None)
        if given is not None and given.is_dir():
            raise HarnessError(f"--{name} {given} is a directory: give a UTF-8 text file")
        if given is not None and given.resolve() == ns.out.resolve():  # --force would replace what it reads
            raise HarnessError(f"--out {ns.out} is the --{name} file it is built from; give another file name")
    from harness.inputs.prefix_bank import build_bank

    n = build_bank(ns.what, ns.out, n=ns.n, min_chars=ns.min_chars, seed=ns.seed, id_prefix=ns.id_prefix,
                   licence=ns.licence, corpus=getattr(ns, "corpus", None), genre=getattr(ns, "genre", "corpus"),
                   templates=getattr(ns, "templates", None), fillers=getattr(ns, "fillers", None),
                   payloads=getattr(ns, "payloads", None))
    print(f"wrote {n} {ns.what} prefixes to {ns.out}")
    return 0


# harness.runs.cache_timing.SETTINGS' names, here so that --help needs no heavy import (a test keeps them equal)
CACHE_SETTINGS = ("none", "same_salt", "different_salts", "per_tenant_cache")


def cache_timing(args: list[str]) -> int:
    """``harness cache-timing``: the prefix-cache side channel and isolation on a vLLM engine
    (:mod:`harness.runs.cache_timing`)."""
    parser = argparse.ArgumentParser(prog="harness cache-timing", description="What a shared prefix cache tells "
                                     "another tenant: time to first token of cached and fresh prefixes on a vLLM "
                                     "engine, per prefix length and isolation setting (no salt, one salt, a salt "
                                     "per tenant), and whether a request served from another tenant's cache "
                                     "continues as when computed afresh. Needs the vLLM environment (make vllm).")
    parser.add_argument("--model", default="demo", help="a model config name (conf/model): demo, "
                        "smollm2-135m-instruct-q4_1, ... (default demo)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128, 256, 1024],
                        help="prefix lengths in tokens (the engine caches whole blocks: 128 tokens on a CPU)")
    parser.add_argument("--block-size", type=int, default=None, help="the prefix cache's block in tokens "
                        "(default: vLLM's own, 128 on a CPU): nothing shorter than one block is ever shared")
    parser.add_argument("--trials", type=int, default=100, help="trials per setting and length (default 100)")
    parser.add_argument("--settings", nargs="+", default=list(CACHE_SETTINGS), choices=CACHE_SETTINGS)
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--python", default=None, help="the vLLM environment's Python (default: "
                        "$PREFIX_HARNESS_VLLM_PYTHON, else .venv-vllm/bin/python)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="a new directory for the tables, report and figure")
    ns = parser.parse_args(args)

    if ns.trials < 2 or any(n < 1 for n in ns.lengths):
        raise HarnessError("--trials must be at least 2 and every --lengths value positive")
    from harness.model.vllm_backend import VllmWorker, block_size_problem

    if block_size_problem(ns.block_size, "--block-size"):
        raise HarnessError(block_size_problem(ns.block_size, "--block-size"))
    from harness.model.vllm_backend import INSTALL, vllm_python

    try:  # before the model loads; its own option names the Python (not backend.python)
        vllm_python(ns.python)
    except HarnessError:
        given = f"--python {ns.python} is not an executable file; " if ns.python else ""
        raise HarnessError(f"cache-timing needs a Python with vLLM installed: {given}build it with {INSTALL}, or give "
                           f"--python PATH (or set PREFIX_HARNESS_VLLM_PYTHON)") from None
    from harness.cli.guards import check_out

    check_out(ns.out)  # never inside a run directory
    if ns.out.exists() and (not ns.out.is_dir() or any(ns.out.iterdir())):
        raise HarnessError(f"--out {ns.out} already {'holds files' if ns.out.is_dir() else 'is a file'}; give a new "
                           f"directory (nothing is overwritten)")
    from tqdm.auto import tqdm

    from harness.config import compose, validate
    from harness.model.decoding import stop_ids
    from harness.model.loading import load_from_config
    from harness.runs.cache_timing import max_model_len, run_experiment, write_outputs

    try:
        cfg = validate(compose([f"model={ns.model}"]))
    except HarnessError:
        raise
    except Exception:  # Hydra: no such config (a hub id or a directory is not a config name)
        raise HarnessError(f"--model {ns.model} is not a model config name (conf/model: demo, "
                           f"smollm2-135m-instruct-q4_1, ...); harness sweep takes hub ids and directories") from None
    loaded = load_from_config(cfg.model, device="cpu")
    if loaded.location is None:
        raise HarnessError(f"model {ns.model} is built in memory; vLLM needs one stored on disk or the hub")
    vocab = len(loaded.tokenizer)
    stops = stop_ids(loaded.model, loaded.tokenizer)
    context = max(max_model_len(ns.lengths), 256)

    started = []  # each engine's log in --out, numbered (a fresh engine per setting)
    ns.out.mkdir(parents=True, exist_ok=True)

    def open_engine() -> VllmWorker:
        started.append(ns.out / f"vllm-{len(started) + 1}.log")
        return VllmWorker(loaded.location, dtype=ns.dtype, max_model_len=context, seed=ns.seed, python=ns.python,
                          block_size=ns.block_size, log_path=started[-1])

    with tqdm(total=ns.trials * len(ns.lengths) * len(ns.settings), desc="trials", unit="trial") as bar:
        trials, invariant, engine = run_experiment(open_engine, vocab, ns.lengths, ns.trials, ns.settings,
                                                   seed=ns.seed, stops=stops,
                                                   progress=lambda done, total: bar.update(done - bar.n))
    facts = {**engine, "model": cfg.model.name_or_path, "trials": ns.trials, "block_size": ns.block_size}
    leak = write_outputs(ns.out, trials, invariant, facts)
    print((ns.out / "leak.md").read_text(encoding="utf-8"))
    print(f"wrote {ns.out}/trials.parquet, leak.parquet, leak.md, fig_leak.png ({len(leak)} cells)")
    return 0
