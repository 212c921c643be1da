"""The two real models the harness can load offline (GGUF, `make real-models`), measured side by side:
load time cold (dequantizing the GGUF into an empty cache) and cached (the next process), and a
small sweep's conditions per second with the full attention analysis against plain HF ``generate``
on the same conditions (one at a time, outputs only), with each method's peak resident memory.

    python benchmarks/real_models.py            # both models (needs `make real-models` first)
    python benchmarks/real_models.py --quick    # fewer conditions

Every measurement runs in a child process of its own, so load times include what a new process
pays (imports excluded) and peak memory (``ru_maxrss``) is that method's alone.
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


def overrides(model: str, quick: bool) -> list[str]:
    return [f"model={model}", "prompts=en", f"prompts.limit={1 if quick else 2}", "prefixes=default",
            f"prefixes.per_group={2 if quick else 4}", "prefix.lengths=[32,128]", f"decode.max_new_tokens={NEW_TOKENS}",
            "analysis.noise_floor=false", "draw_figures=false"]


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


def child_harness(model: str, quick: bool) -> dict:
    import harness as H

    with tempfile.TemporaryDirectory() as tmp:
        H.run(H.compose(overrides(model, quick)), Path(tmp) / "run", progress=False)
        status = json.loads((Path(tmp) / "run" / "status.json").read_text())
    return {"seconds": status["seconds"]["conditions"], "conditions": status["conditions"], "peak_mb": peak_mb()}


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


CHILDREN = {"load": child_load, "harness": child_harness, "generate": child_generate}


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
    print(f"{'model':<28} {'cold load s':>11} {'cached s':>9} {'conds':>6} {'harness c/s':>11} {'generate c/s':>12} "
          f"{'harness/gen time':>16} {'peak MB harness':>15} {'peak MB gen':>11}")
    with tempfile.TemporaryDirectory() as cache:
        env = {"PREFIX_HARNESS_CACHE": cache, "HF_HUB_OFFLINE": "1"}
        for model in ns.models:
            cold = in_child("load", model, ns.quick, env)
            cached = in_child("load", model, ns.quick, env)
            harness = in_child("harness", model, ns.quick, env)
            generate = in_child("generate", model, ns.quick, env)
            h_rate = harness["conditions"] / harness["seconds"]
            g_rate = generate["conditions"] / generate["seconds"]
            print(f"{model:<28} {cold['seconds']:>11.1f} {cached['seconds']:>9.1f} {harness['conditions']:>6} "
                  f"{h_rate:>11.2f} {g_rate:>12.2f} {harness['seconds'] / generate['seconds']:>15.2f}x "
                  f"{harness['peak_mb']:>15.0f} {generate['peak_mb']:>11.0f}", flush=True)


if __name__ == "__main__":
    main()
