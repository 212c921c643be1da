"""What ``harness cache-timing`` (a Hydra application, :func:`harness.cli.hydra_apps.cache_timing`;
the experiment itself: :mod:`harness.runs.cache_timing`) says for ``--help``, and how it reads the
options of earlier releases."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.cli.overrides import hydra_quoted
from harness.errors import HarnessError

CACHE_TIMING_HELP = """harness cache-timing [overrides]: what a shared prefix cache tells another tenant.

Times the first token of cached and fresh prefixes on a vLLM engine (prefix caching on), per
prefix length and isolation setting, into a run directory (harness.runs.cache_timing; needs the
vLLM environment: make vllm). Overrides, in the grammar of harness sweep:
  model=demo                      a model config (conf/model), or model.name_or_path=DIR
  timing.lengths=[64,128,256,1024] prefix lengths in tokens
  timing.trials=100               trials per setting and length (at least 2)
  timing.settings=[none,same_salt,different_salts,per_tenant_cache]
  backend.block_size=128          the prefix cache's block (nothing shorter is ever shared)
  backend.dtype=bfloat16 backend.python=PATH seed=0 hydra.run.dir=DIR
harness resume DIR finishes an interrupted run; harness figures DIR redraws its page and figure."""

# the options of earlier releases (harness cache-timing --model demo --out DIR ...): one release more
OLD_OPTIONS = {"--model": "model", "--lengths": "timing.lengths", "--trials": "timing.trials",
               "--settings": "timing.settings", "--block-size": "backend.block_size", "--dtype": "backend.dtype",
               "--python": "backend.python", "--seed": "seed", "--out": "hydra.run.dir"}
LISTS = ("--lengths", "--settings")


def translate_cache_timing_options(args: list[str]) -> list[str]:
    """``--model demo --lengths 64 256 --out DIR`` as ``model=demo timing.lengths=[64,256]
    hydra.run.dir=DIR``, with a notice naming the new form; overrides pass unchanged."""
    out, old, new, i = [], [], [], 0
    while i < len(args):
        name, _, inline = args[i].partition("=")
        if name not in OLD_OPTIONS:
            out.append(args[i])
            i += 1
            continue
        values = [inline] if inline else []
        i += 1
        # a list takes values up to the next option or override; any other option its one value, '=' and all
        while i < len(args) and not args[i].startswith("-") and (name in LISTS and "=" not in args[i] or not values):
            values.append(args[i])
            i += 1
        if not values:
            raise HarnessError(f"{name} needs a value (the new form: {OLD_OPTIONS[name]}=VALUE)")
        value = f"[{','.join(values)}]" if name in LISTS else values[0]
        if name not in LISTS and any(c in value for c in "=,[]{}()' "):  # a path with Hydra's syntax in it
            value = hydra_quoted(value)
        if name == "--model" and ("/" in value or Path(value).exists()):
            raise HarnessError(f"--model {value} is not a model config name (conf/model: demo, "
                               f"smollm2-135m-instruct-q4_1, ...); for a directory write model.name_or_path={value}")
        out.append(f"{OLD_OPTIONS[name]}={value}")
        old.append(f"{name} {' '.join(values)}")
        new.append(out[-1])
    given = {o.split("=", 1)[0]: o for o in out if "=" in o and o not in new}
    twice = next((n for n in new if n.split("=", 1)[0] in given), None)
    if twice:  # the old spelling and the new one for one setting: neither is dropped without a word
        raise HarnessError(f"{twice.split('=', 1)[0]} is given twice ({old[new.index(twice)]} and "
                           f"{given[twice.split('=', 1)[0]]}): give it once, as {given[twice.split('=', 1)[0]]}")
    if old:
        print(f"note: {', '.join(old)} is the spelling of earlier releases, read this once more; write "
              f"{' '.join(new)} (harness cache-timing --help)", file=sys.stderr)
    return out
