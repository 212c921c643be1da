"""The vLLM backend beside the harness's engine and plain ``generate``, on one output-only sweep.

Runs one sweep three ways, in this process's order and on the same machine: the harness's engine
(``decode.path=stepwise``, the model's dtype: the reference), the vLLM backend (``backend=vllm``, at
each ``--dtypes``), and Hugging Face ``generate`` one condition at a time on the same token ids
(greedy, the same stop tokens). It prints conditions per second of each (vLLM's engine start apart),
and per vLLM dtype the share of conditions whose continuation equals the reference's, each
difference explained: the first differing step, the two tokens, and the reference model's own
top-1 minus top-2 logit margin there (at the sweep's dtype, teacher-forced along the common start), so a
difference between the two nearest candidates at a small margin reads as rounding, anything else
as a disagreement to look at.

    python benchmarks/vllm_backend.py                                  # the demo sweep
    python benchmarks/vllm_backend.py --sweep experiment=study model=smollm2-135m-instruct-q4_1 \\
        prefix.placement=document prompts.limit=20 prefixes.per_group=8 model.linear_dtype=null

Needs the vLLM environment (``make vllm``, or ``PREFIX_HARNESS_VLLM_PYTHON``). Targets (issue #52):
the vLLM sweep at 10x or more the conditions/s of one-at-a-time ``generate``; 95% or more identical
continuations at the recommended dtype, every difference explained.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from harness.inputs.conditions import KEY_FIELDS

DEMO = ["experiment=demo", "prompts.limit=8", "prefixes.per_group=6"]
OUTPUT_ONLY = ["analysis.attention=false", "analysis.noise_floor=false", "draw_figures=false"]


def sweep(overrides: list[str], where: Path) -> tuple[pd.DataFrame, dict]:
    cmd = [sys.executable, "-m", "harness", "sweep", *overrides, f"hydra.run.dir={where}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    manifest = json.loads((where / "manifest.json").read_text())
    return pd.read_parquet(where / "conditions.parquet"), manifest


def generate_one_at_a_time(loaded, inputs: list[list[int]], max_new_tokens: int) -> float:
    """Seconds for plain ``generate`` over ``inputs``, one at a time (greedy, the harness's stops)."""
    from harness.model.decoding import stop_ids

    stops = sorted(stop_ids(loaded.model, loaded.tokenizer))
    t0 = time.perf_counter()
    with torch.no_grad():
        for ids in inputs:
            loaded.model.generate(torch.tensor([ids]), max_new_tokens=max_new_tokens, do_sample=False,
                                  eos_token_id=stops, pad_token_id=stops[0])
    return time.perf_counter() - t0


def explain(model, ref_ids: list[int], other_ids: list[int], input_ids: list[int]) -> dict:
    """Where two continuations part, and the reference model's margin there (see the docstring)."""
    k = next((i for i, (a, b) in enumerate(zip(ref_ids, other_ids)) if a != b), min(len(ref_ids), len(other_ids)))
    with torch.no_grad():
        logits = model(torch.tensor([input_ids + ref_ids[:k]])).logits[0, -1].float()
    top2 = logits.topk(2)
    ref_tok = ref_ids[k] if k < len(ref_ids) else None  # None: the reference stopped here
    other_tok = other_ids[k] if k < len(other_ids) else None
    return {"step": k, "reference_token": ref_tok, "vllm_token": other_tok,
            "margin": float(top2.values[0] - top2.values[1]),
            "nearest_two": {ref_tok, other_tok} <= set(top2.indices.tolist()) | {None}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", nargs="+", default=DEMO, help="the sweep's overrides (default: the demo's)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--compile", action="store_true", help="also run each dtype compiled (backend.compile=true)")
    ns = parser.parse_args()
    base = [*ns.sweep, *OUTPUT_ONLY]
    variants = [(d, c) for d in ns.dtypes for c in ((False, True) if ns.compile else (False,))]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ref, ref_manifest = sweep([*base, "decode.path=stepwise"], tmp / "harness")
        others = {(d, c): sweep([*base, "backend.name=vllm", f"backend.dtype={d}", f"backend.compile={c}"],
                                tmp / f"vllm-{d}-{c}") for d, c in variants}
    n = len(ref)
    max_new = ref_manifest["config"]["decode"]["max_new_tokens"]
    from harness.config import compose, validate
    from harness.model.loading import load_from_config

    loaded = load_from_config(validate(compose(ns.sweep)).model)  # as the reference sweep loaded it
    gen_s = generate_one_at_a_time(loaded, [list(i) for i in ref.input_ids], max_new)
    ref_total = sum(ref_manifest["condition_seconds"].values())
    print(f"sweep: {' '.join(ns.sweep)}; {n} conditions (A, B and C), {max_new} new tokens at most\n")
    print(f"{'engine':<32} {'conditions/s':>13} {'x generate':>11} {'engine start s':>15}")
    print(f"{'generate, one at a time':<32} {n / gen_s:>13.2f} {1.0:>11.2f} {'-':>15}")
    print(f"{'harness, stepwise':<32} {n / ref_total:>13.2f} {gen_s / ref_total:>11.2f} {'-':>15}")

    def label(manifest: dict) -> str:
        b = manifest["backend"]
        return f"{b['dtype']}{', compiled' if b['compile'] else ''}, block {b['block_size']}"

    for _, manifest in others.values():
        s = manifest["condition_seconds"]["vllm"]
        print(f"{'vLLM ' + label(manifest):<32} {n / s:>13.2f} {gen_s / s:>11.2f} "
              f"{manifest['backend']['start_seconds']:>15.1f}")

    print(f"\n{'vLLM':<32} {'identical':>10} {'share':>7} {'differ':>7} {'nearest two':>12} {'largest margin':>15}")
    for table, manifest in others.values():
        both = ref.merge(table, on=list(KEY_FIELDS), suffixes=("_ref", "_vllm"))
        same = both.continuation_ids_ref.map(list) == both.continuation_ids_vllm.map(list)
        why = [explain(loaded.model, list(r.continuation_ids_ref), list(r.continuation_ids_vllm), list(r.input_ids_ref))
               for r in both[~same].itertuples()]
        nearest = sum(w["nearest_two"] for w in why)
        largest = max((w["margin"] for w in why), default=float("nan"))
        print(f"{label(manifest):<32} {int(same.sum()):>10} {same.mean():>7.3f} {len(why):>7} "
              f"{nearest:>12} {largest:>15.3f}")
        for w in why:
            if not w["nearest_two"]:
                print("   not between the nearest two:", w)


if __name__ == "__main__":
    main()
