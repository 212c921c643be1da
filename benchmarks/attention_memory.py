"""Peak memory of the attention analysis against eager ``output_attentions``, side by side.

For a 12-layer, 12-head, GPT-2-small-sized model (random weights, built from its config) and
input lengths 512, 1024 and 2048, each measurement runs in a fresh process and reports the peak
memory above the loaded model:

- harness: the streaming probe analysing one condition (A's reference rows, then X: prefill with
  task rows captured, KV fork, teacher-forced continuation rows, greedy decoding);
- eager: one forward over X + Y_A with ``attn_implementation="eager"`` and
  ``output_attentions=True`` (what the naive pipeline needs for the same rows).

On CPU, peak memory is the process's peak resident set size (``ru_maxrss``) minus the resident
size after the model was built; on CUDA it is ``torch.cuda.max_memory_allocated`` above the model.

    python benchmarks/attention_memory.py [--device cuda] [--lengths 512 1024 2048]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

TASK_TOKENS = 32
NEW_TOKENS = 32


def build(device: str):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=12, n_head=12, n_embd=768, n_positions=2048 + TASK_TOKENS + NEW_TOKENS + 8)
    torch.manual_seed(0)
    return GPT2LMHeadModel(config).eval().to(device), config


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(method: str, length: int, device: str) -> dict:
    """Runs in a child process: peak memory above the model for one method at one length."""
    import torch

    from harness.inputs.assembly import Assembled
    from harness.inputs.conditions import Condition
    from harness.measure.engine import Engine
    from harness.model.probe import install_probe

    model, config = build(device)
    g = torch.Generator().manual_seed(1)
    task = torch.randint(0, config.vocab_size, (TASK_TOKENS,), generator=g).tolist()
    prefix = torch.randint(0, config.vocab_size, (length - TASK_TOKENS,), generator=g).tolist()
    a = Condition("p", "A", None, 0, Assembled(tuple(task), 0, 0, 0, TASK_TOKENS))
    x_ids = tuple(prefix + task)
    x = Condition("p", "B", "r", len(prefix), Assembled(x_ids, 0, len(prefix), len(prefix), len(x_ids)))
    if method == "harness":
        install_probe(model)
    else:
        model.set_attn_implementation("eager")
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    base_rss = rss_mb()
    with torch.no_grad():
        if method == "harness":
            engine = Engine(model, eos_id=None, max_new_tokens=NEW_TOKENS, attention=True)
            ref, _ = engine.reference(a)
            engine.conditions(ref, [x])
        else:
            y_a = torch.randint(0, config.vocab_size, (NEW_TOKENS,), generator=g).tolist()
            seq = torch.tensor([list(x_ids) + y_a], device=device)
            out = model(seq, output_attentions=True)
            assert len(out.attentions) == 12
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = peak_rss_mb() - base_rss
    return {"method": method, "length": length, "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048])
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), args.device)))
        return
    rows = {}
    for length in args.lengths:
        for method in ("harness", "eager"):
            out = subprocess.run([sys.executable, __file__, "--device", args.device, "--child", method, str(length)],
                                 capture_output=True, text=True, check=True)
            rows[method, length] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"12-layer GPT-2-small-sized model, {TASK_TOKENS} task + {NEW_TOKENS} new tokens, device {args.device}")
    print(f"{'input length':>12} {'harness MB':>11} {'eager MB':>10} {'eager/harness':>14}")
    for length in args.lengths:
        h, e = rows["harness", length], rows["eager", length]
        print(f"{length:>12} {h['peak_mb']:>11.1f} {e['peak_mb']:>10.1f} {e['peak_mb'] / h['peak_mb']:>14.1f}")
    print("growth per doubling of the input (linear = 2.0, quadratic = 4.0):")
    for prev, cur in zip(args.lengths, args.lengths[1:]):
        f = cur / prev
        for method in ("harness", "eager"):
            ratio = rows[method, cur]["peak_mb"] / rows[method, prev]["peak_mb"]
            print(f"  {method:>8} {prev}->{cur}: x{ratio:.2f} (length x{f:.0f})")


if __name__ == "__main__":
    main()
