"""The commands that need no run directory: ``kv-size`` and ``build-prefixes``."""

from __future__ import annotations

from pathlib import Path

from harness.cli.guards import whole
from harness.cli.options import CommandParser, out_path
from harness.errors import HarnessError


def kv_size(args: list[str]) -> int:
    parser = CommandParser(prog="harness kv-size", description="KV-cache size: how many bytes a model's "
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
    from harness.config.composing import group_options
    from harness.model.kv_size import override_key

    key, name = override_key(override), override.partition("=")[2]

    options = group_options("model", None)
    if key == "model" and name not in options and "/" not in name and not Path(name).expanduser().exists():
        import difflib  # not a hub id (those name an owner) nor a directory: a config name mistyped

        near = [o for o in options if o.lower() == name.lower()] or difflib.get_close_matches(name, sorted(options), 1)
        if near:
            raise HarnessError(f"model={name}: no such model config; did you mean model={near[0]}?")
    if key != "model" or name not in options:
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
    parser = CommandParser(prog="harness build-prefixes", description="Build a prefix bank (JSONL) "
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
        p.add_argument("--n", type=lambda text: whole(text, 1), default=40, help="prefixes to build (at least 1)")
        p.add_argument("--min-chars", type=lambda text: whole(text, 1), default=1500)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--id-prefix", default=None, help="default: the corpus or templates file name")
        p.add_argument("--licence", default="unspecified", help="licence of the source text (e.g. CC0-1.0)")
        p.add_argument("--out", type=out_path, required=True, help="the JSONL file to write (a new one: see --force)")
        p.add_argument("--force", action="store_true", help="replace --out if it exists")
    ns = parser.parse_args(args)
    from harness.runs.outdir import check_out_file

    check_out_file(ns.out, ns.force)
    for name in ("corpus", "templates", "fillers", "payloads"):
        given = getattr(ns, name, None)
        if given is not None and given.is_symlink() and not given.exists():  # a loop of links, or a link to nothing
            from harness.paths import broken_link

            raise HarnessError(f"--{name} {given} {broken_link(given)}: give a UTF-8 text file")
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
