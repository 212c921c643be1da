"""Greedy decoding with transformers' growing ``DynamicCache`` against the harness's preallocated
``BufferedLayer`` cache (harness/kv_buffers.py), side by side on the same inputs and model.

    python benchmarks/kv_cache.py                 # GPT-2-small-sized random model, CPU
    python benchmarks/kv_cache.py --device cuda

Prints seconds per 32-step decode (best of ``--repeats``) at each batch size and input length, and
the ratio dynamic / buffered. Both give the same tokens (checked here too).
"""

from __future__ import annotations

import argparse
import time

import torch
from throughput import build  # this folder is on sys.path when a script here runs

from harness.model.decoding import forward, greedy_from
from harness.model.kv_buffers import buffered_cache

NEW_TOKENS = 32


def decode_seconds(model, ids: torch.Tensor, buffered: bool, repeats: int) -> tuple[float, list]:
    best, tokens = float("inf"), None
    for _ in range(repeats):
        cache = buffered_cache(model, ids.shape[1] + NEW_TOKENS) if buffered else None
        logits, cache = forward(model, ids, cache, last_only=True)
        if ids.device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = greedy_from(model, logits[:, -1], cache, NEW_TOKENS, eos_id=None)
        if ids.device.type == "cuda":
            torch.cuda.synchronize()
        best, tokens = min(best, time.perf_counter() - t0), [c.ids for c in out]
    return best, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    model, _ = build("gpt2-small-random", args.device)  # the same model as throughput.py's
    print(f"GPT-2-small-sized random model, {NEW_TOKENS} greedy steps, device {args.device}")
    print(f"  {'batch':>5} {'input':>6} {'dynamic s':>10} {'buffered s':>11} {'dynamic / buffered':>19}")
    with torch.no_grad():
        for batch in (1, 10):
            for length in (64, 288):
                ids = torch.randint(0, 50257, (batch, length), generator=torch.Generator().manual_seed(length))
                ids = ids.to(args.device)
                dynamic, tok_d = decode_seconds(model, ids, False, args.repeats)
                buffered, tok_b = decode_seconds(model, ids, True, args.repeats)
                same = "" if tok_d == tok_b else "  (tokens differ!)"
                print(f"  {batch:>5} {length:>6} {dynamic:>10.3f} {buffered:>11.3f} {dynamic / buffered:>19.2f}{same}")


if __name__ == "__main__":
    main()
