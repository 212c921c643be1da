"""The commands that need no run directory: ``kv-size`` and ``build-prefixes``."""

from __future__ import annotations

import argparse
from pathlib import Path


def kv_size(args: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="harness kv-size", description="KV-cache size: how many bytes a model's "
                                     "key/value cache takes for a batch and sequence length.")
    parser.add_argument("overrides", nargs="*", help="key=value: model=<hub id, local dir, demo or "
                        "builtin:tiny-llama>, layers, kv_heads, head_dim, seq_len, batch, dtype")
    ns = parser.parse_args(args)
    from harness.model.kv_size import describe

    print(describe(ns.overrides))
    return 0


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
        p.add_argument("--out", type=Path, required=True)
    ns = parser.parse_args(args)
    from harness.inputs.prefix_bank import build_bank

    n = build_bank(ns.what, ns.out, n=ns.n, min_chars=ns.min_chars, seed=ns.seed, id_prefix=ns.id_prefix,
                   licence=ns.licence, corpus=getattr(ns, "corpus", None), genre=getattr(ns, "genre", "corpus"),
                   templates=getattr(ns, "templates", None), fillers=getattr(ns, "fillers", None),
                   payloads=getattr(ns, "payloads", None))
    print(f"wrote {n} {ns.what} prefixes to {ns.out}")
    return 0
