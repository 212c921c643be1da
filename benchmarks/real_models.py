"""The two real models the harness can load offline (GGUF, `make real-models`), measured side by side:
load time cold (dequantizing the GGUF into an empty cache) and cached (the next process), and a
small sweep's conditions per second with the full attention analysis under each decode path
(``stepwise``: every version before this one; ``teacher_forced``: the default; ``none``: the
attention-only measurement) against plain HF ``generate`` on the same conditions (one at a time,
outputs only), with each method's peak resident memory and where the harness's B/C conditions
spent their seconds (prefix cache, prefill, teacher forcing, decode, metrics: the engine's clock).

    python benchmarks/real_models.py            # both models (needs `make real-models` first)
    python benchmarks/real_models.py --quick    # fewer conditions

Every measurement runs in a child process of its own, so load times include what a new process
pays (imports excluded) and peak memory (``ru_maxrss``) is that method's alone. Targets (issue
#49): the default path at least 2x the stepwise path's conditions per second, the attention-only
measurement at least 4x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODELS = ("smollm2-135m-instruct-q4_1", "gemma-3-270m-q4_k_m")
NEW_TOKENS = 16


PATHS = ("stepwise", "teacher_forced", "none")


def overrides(model: str, quick: bool, path: str = "teacher_forced") -> list[str]:
    return [f"model={model}", "prompts=en", f"prompts.limit={1 if quick else 2}", "prefixes=default",
            f"prefixes.per_group={2 if quick else 4}", "prefix.lengths=[32,128]", f"decode.max_new_tokens={NEW_TOKENS}",
            "analysis.noise_floor=false", "draw_figures=false", f"decode.path={path}"]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_load(model: str, quick: bool) -> dict:
    import harness as H
    from harness.model.sources import gguf_source

    cfg = H.compose(overrides(model, quick))
    from harness.model.loading import load_model

    t0 = time.perf_counter()
    load_model(cfg.model.name_or_path, device="cpu", gguf=gguf_source(cfg.model.gguf))
    return {"seconds": time.perf_counter() - t0, "peak_mb": peak_mb()}


def child_harness(model: str, quick: bool, path: str) -> dict:
    import harness as H

    with tempfile.TemporaryDirectory() as tmp:
        H.run(H.compose(overrides(model, quick, path)), Path(tmp) / "run", progress=False)
        status = json.loads((Path(tmp) / "run" / "status.json").read_text())
        manifest = json.loads((Path(tmp) / "run" / "manifest.json").read_text())
    return {"seconds": status["seconds"]["conditions"], "conditions": status["conditions"], "peak_mb": peak_mb(),
            "phases": manifest["condition_seconds"]}


def child_generate(model: str, quick: bool) -> dict:
    import torch

    import harness as H

    exp = H.Experiment.build(H.compose(overrides(model, quick)), attention=False)
    model_, tok = exp.loaded.model, exp.tokenizer
    t0 = time.perf_counter()
    with torch.no_grad():
        for c in exp.conditions:
            model_.generate(torch.tensor([c.assembled.input_ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                            eos_token_id=tok.eos_token_id, pad_token_id=tok.eos_token_id)
    return {"seconds": time.perf_counter() - t0, "conditions": len(exp.conditions), "peak_mb": peak_mb()}


CHILDREN = {"load": child_load, "generate": child_generate,
            **{f"harness:{path}": (lambda model, quick, path=path: child_harness(model, quick, path)) for path in PATHS}}


def in_child(what: str, model: str, quick: bool, env: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", what, model] + (["--quick"] if quick else []),
                          env={**os.environ, **env}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} on {model} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        print(json.dumps(CHILDREN[ns.child[0]](ns.child[1], ns.quick)))
        return
    print(f"{'model':<28} {'method':<24} {'conds':>6} {'cond/s':>7} {'x stepwise':>10} {'peak MB':>8}  "
          f"B/C condition seconds by phase")
    with tempfile.TemporaryDirectory() as cache:
        env = {"PREFIX_HARNESS_CACHE": cache, "HF_HUB_OFFLINE": "1"}
        for model in ns.models:
            cold = in_child("load", model, ns.quick, env)
            cached = in_child("load", model, ns.quick, env)
            print(f"{model:<28} load: {cold['seconds']:.1f} s cold (dequantizing), {cached['seconds']:.1f} s cached",
                  flush=True)
            rows = {f"harness, {path}": in_child(f"harness:{path}", model, ns.quick, env) for path in PATHS}
            rows["plain generate"] = in_child("generate", model, ns.quick, env)
            base = rows["harness, stepwise"]["conditions"] / rows["harness, stepwise"]["seconds"]
            for method, r in rows.items():
                rate = r["conditions"] / r["seconds"]
                phases = ", ".join(f"{k} {v:.1f}" for k, v in r.get("phases", {}).items())
                print(f"{model:<28} {method:<24} {r['conditions']:>6} {rate:>7.2f} {rate / base:>10.2f} "
                      f"{r['peak_mb']:>8.0f}  {phases}", flush=True)


if __name__ == "__main__":
    main()
