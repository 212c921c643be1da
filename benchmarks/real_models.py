"""The two real models the harness can load offline (GGUF, `make real-models`), measured side by side:
load time cold (dequantizing the GGUF into an empty cache) and cached (the next process), and a
study-shaped sweep's conditions per second (prompts x 24 prefixes per group, every B/C prefix of a
length in one batch) under each way of computing them, against plain HF ``generate`` on the same
conditions (one at a time, outputs only), with each method's peak resident memory and where the
harness's B/C conditions spent their seconds (prefix cache, prefill, teacher forcing, decode,
metrics: the engine's clock).

The methods: ``previous`` is the previous version's computation, bit for bit (``decode.path=stepwise``,
batch 16, glibc's allocator left at its defaults); the others are this version's with the full
analysis (``teacher_forced``) or the attention-only measurement (``none``), with the linear layers'
products at full precision (``float32``) or lowered (``bfloat16``: ``model.linear_dtype``), batch 48.

    python benchmarks/real_models.py            # both models (needs `make real-models` first)
    python benchmarks/real_models.py --quick    # fewer conditions

Every measurement runs in a child process of its own, so load times include what a new process
pays (imports excluded) and peak memory (``ru_maxrss``) is that method's alone. Targets (issue
#49): the full analysis at least 2x the previous version's conditions per second, the
attention-only measurement at least 4x.
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


# name: (decode path, linear products, batch size, allocator tuned)
METHODS = {"previous": ("stepwise", None, 16, False),
           "teacher_forced float32": ("teacher_forced", None, 48, True),
           "teacher_forced bfloat16": ("teacher_forced", "bfloat16", 48, True),
           "none float32": ("none", None, 48, True),
           "none bfloat16": ("none", "bfloat16", 48, True)}


def overrides(model: str, quick: bool, method: str = "previous") -> list[str]:
    path, products, batch, _ = METHODS[method]
    return [f"model={model}", "prompts=en", f"prompts.limit={1 if quick else 2}", "prefixes=default",
            f"prefixes.per_group={8 if quick else 24}", f"prefix.lengths={'[32]' if quick else '[32,128]'}",
            f"decode.max_new_tokens={NEW_TOKENS}", "analysis.noise_floor=false", "draw_figures=false",
            f"decode.path={path}", f"batch_size={batch}"] + ([f"model.linear_dtype={products}"] if products else [])


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


def child_harness(model: str, quick: bool, method: str) -> dict:
    import harness as H

    if not METHODS[method][3]:  # the previous version left glibc's allocator as it was
        import harness.runs.experiment as experiment

        experiment.keep_freed_memory = lambda: None
    with tempfile.TemporaryDirectory() as tmp:
        H.run(H.compose(overrides(model, quick, method)), Path(tmp) / "run", progress=False)
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
            **{f"harness:{m}": (lambda model, quick, m=m: child_harness(model, quick, m)) for m in METHODS}}


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
    print(f"{'model':<28} {'method':<32} {'conds':>6} {'cond/s':>7} {'x previous':>10} {'x generate':>10} "
          f"{'peak MB':>8}  B/C condition seconds by phase")
    with tempfile.TemporaryDirectory() as cache:
        env = {"PREFIX_HARNESS_CACHE": cache, "HF_HUB_OFFLINE": "1"}
        for model in ns.models:
            cold = in_child("load", model, ns.quick, env)
            cached = in_child("load", model, ns.quick, env)
            print(f"{model:<28} load: {cold['seconds']:.1f} s cold (dequantizing), {cached['seconds']:.1f} s cached",
                  flush=True)
            rows = {f"harness, {m}": in_child(f"harness:{m}", model, ns.quick, env) for m in METHODS}
            rows["plain generate"] = in_child("generate", model, ns.quick, env)
            rate = {m: r["conditions"] / r["seconds"] for m, r in rows.items()}
            for method, r in rows.items():
                phases = ", ".join(f"{k} {v:.1f}" for k, v in r.get("phases", {}).items())
                print(f"{model:<28} {method:<32} {r['conditions']:>6} {rate[method]:>7.2f} "
                      f"{rate[method] / rate['harness, previous']:>10.2f} {rate[method] / rate['plain generate']:>10.2f} "
                      f"{r['peak_mb']:>8.0f}  {phases}", flush=True)


if __name__ == "__main__":
    main()
