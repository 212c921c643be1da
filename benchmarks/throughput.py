"""What the analysis costs, side by side on the same conditions:

(a) bare   greedy generation of every condition, one at a time, no analysis (the harness's own
           greedy loop with its preallocated KV cache on a plain SDPA model: the cheapest
           baseline there is);
(b) naive  the pipeline a researcher would write: eager attention, ``generate(...,
           output_attentions=True)`` for each condition, plus a full forward with
           ``output_attentions=True`` over input + A's continuation for the teacher-forced rows, and
           KL computed from the full attention matrices;
(c) harness as a sweep runs it: the streaming probe, each prefix's KV computed once and shared by
           every prompt, the teacher-forced fork, and every prefix of one length in one batch
           ("harness_batched" below), and the same one condition at a time ("harness", batch 1).

Each method runs in a fresh child process (so peak memory is its own) on the same conditions; the
table prints wall time, conditions per second, peak memory above the loaded model, and the ratios.
The prefix KV is computed for the first prompt and reused by the others, so the harness's lead
grows with the number of prompts (``--prompts``; the default sweep has 24).

    python benchmarks/throughput.py                    # GPT-2-small-sized random model and the demo model
    python benchmarks/throughput.py --device cuda      # the same on a GPU
    python benchmarks/throughput.py --quick            # fewer prompts, for a smoke test
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

NEW_TOKENS = 32


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def build(model_name: str, device: str):
    import torch

    from harness.model.builtin import byte_level_tokenizer
    from harness.model.loading import load_model

    if model_name == "gpt2-small-random":
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        config = GPT2Config(n_positions=2048 + 128)  # 12 layers, 12 heads, 768 wide, 50,257 vocabulary
        model = GPT2LMHeadModel(config).eval().to(device)
        return model, byte_level_tokenizer(add_bos=False)
    loaded = load_model(model_name, device=device)
    return loaded.model, loaded.tokenizer


def conditions_for(tokenizer, lengths: list[int], n_prompts: int, n_prefixes: int | None):
    from harness.paths import DATA_DIR
    from harness.inputs.conditions import build_conditions
    from harness.inputs.texts import load_prefixes, load_prompts

    prompts = load_prompts(DATA_DIR / "prompts_en.jsonl", n_prompts)
    prefixes = load_prefixes(DATA_DIR / "prefixes.jsonl")
    if n_prefixes:  # keep B and C balanced
        prefixes = [p for p in prefixes if p.kind == "neutral"][: n_prefixes // 2] + \
                   [p for p in prefixes if p.kind == "instruction"][: n_prefixes // 2]
    return build_conditions(tokenizer, prompts, prefixes, groups=["A", "B", "C"], lengths=lengths,
                            separator="\n\n", bos_policy="auto", too_short="repeat")


def naive_condition(model, ids, y_a, device):
    """Eager generation with attentions, then the full teacher-forced forward for the rows."""
    import torch

    x = torch.tensor([ids], device=device)
    gen = model.generate(x, max_new_tokens=NEW_TOKENS, do_sample=False, output_attentions=True,
                         return_dict_in_generate=True, pad_token_id=0)
    full = torch.tensor([list(ids) + list(y_a)], device=device)
    out = model(full, output_attentions=True)
    return gen, out.attentions


def naive_kl(att_a, att_x, task_a: tuple[int, int], shift: int, n_new: int):
    """KL(P_A || P_X) per layer and head from full matrices (task and continuation rows)."""
    import torch

    kls = []
    for pa, px in zip(att_a, att_x):
        rows_a = list(range(task_a[0], task_a[1])) + list(range(pa.shape[-1] - n_new, pa.shape[-1]))
        rows_x = [r + shift for r in rows_a]
        a = pa[0][:, rows_a].float()
        xs = px[0][:, rows_x].float()
        x = torch.cat([xs[..., : task_a[0]], xs[..., task_a[0] + shift:]], dim=-1)  # drop prefix keys
        kls.append(torch.where(a > 0, a * (a.clamp_min(1e-30).log() - x.clamp_min(1e-30).log()), 0).sum(-1).mean(-1))
    return torch.stack(kls)


def run_method(method: str, model_name: str, lengths: list[int], n_prompts: int, n_prefixes: int | None,
               device: str) -> dict:
    import torch

    from harness.measure.driver import drive
    from harness.measure.engine import Engine
    from harness.model.decoding import greedy_decode
    from harness.model.probe import install_probe
    from harness.model.resources import prefix_cache_bytes

    model, tok = build(model_name, device)
    conds = conditions_for(tok, lengths, n_prompts, n_prefixes)
    eos = tok.eos_token_id if model_name != "gpt2-small-random" else None  # random weights: never stop early
    if method.startswith("harness"):
        install_probe(model)
    elif method == "naive":
        model.set_attn_implementation("eager")
    by_prompt: dict = {}
    for c in conds:
        by_prompt.setdefault(c.prompt_id, []).append(c)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_gpu = torch.cuda.memory_allocated()
    base = rss_mb()
    t0 = time.perf_counter()
    with torch.no_grad():
        if method == "bare":
            for c in conds:
                greedy_decode(model, torch.tensor([c.assembled.input_ids], device=device), NEW_TOKENS, eos)
        elif method == "naive":
            for conds_p in by_prompt.values():
                a = conds_p[0]
                gen, _ = naive_condition(model, a.assembled.input_ids, [], device)
                y_a = gen.sequences[0, len(a.assembled.input_ids):].tolist()
                att_a = model(torch.tensor([list(a.assembled.input_ids) + y_a], device=device),
                              output_attentions=True).attentions
                for c in conds_p[1:]:
                    _, att_x = naive_condition(model, c.assembled.input_ids, y_a, device)
                    naive_kl(att_a, att_x, (a.assembled.task_start, a.assembled.task_end), c.assembled.prefix_len,
                             len(y_a))
        else:
            engine = Engine(model, eos, NEW_TOKENS, attention=True, prefix_cache_bytes=prefix_cache_bytes(None, device))
            drive(engine, conds, batch_size=1 if method == "harness" else 64, on_result=lambda *_: None,
                  progress=False)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = ((torch.cuda.max_memory_allocated() - base_gpu) / 2**20 if device.startswith("cuda")
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base)
    return {"method": method, "seconds": seconds, "conditions": len(conds), "peak_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", nargs="+", default=["gpt2-small-random", "demo"])
    parser.add_argument("--quick", action="store_true", help="1 prompt, 2 prefixes (a smoke test)")
    parser.add_argument("--prompts", type=int, default=4,
                        help="prompts at the default lengths (each with the first 5 + 5 prefixes x 4 lengths; default 4)")
    parser.add_argument("--settings", nargs="+", choices=["default", "long"], default=["default", "long"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(run_method(**spec)))
        return
    methods = ["bare", "naive", "harness", "harness_batched"]
    for model_name in args.models:
        # the demo model's context is 2,048 tokens: its long setting leaves room for task and continuation
        long_len = 2048 if model_name == "gpt2-small-random" else 1920
        settings = [("default lengths 32-256", [32, 64, 128, 256], 1 if args.quick else args.prompts,
                     2 if args.quick else 10),  # the first 5 + 5 prefixes of the bank: a demo-sized sweep
                    (f"long prefix {long_len}", [long_len], 1, 2)]
        settings = [s for s, key in zip(settings, ("default", "long")) if key in args.settings]
        for label, lengths, n_prompts, n_prefixes in settings:
            rows = {}
            for method in methods:
                spec = {"method": method, "model_name": model_name, "lengths": lengths, "n_prompts": n_prompts,
                        "n_prefixes": n_prefixes, "device": args.device}
                out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                                     text=True)
                if out.returncode != 0:
                    raise SystemExit(out.stderr)
                rows[method] = json.loads(out.stdout.strip().splitlines()[-1])
            n = rows["bare"]["conditions"]
            print(f"\n{model_name}, {label}: {n} conditions ({n_prompts} prompts), {NEW_TOKENS} new tokens each, "
                  f"device {args.device}")
            print(f"  {'method':<16} {'wall s':>8} {'cond/s':>8} {'peak MB':>9}")
            for method in methods:
                r = rows[method]
                print(f"  {method:<16} {r['seconds']:>8.2f} {n / r['seconds']:>8.2f} {r['peak_mb']:>9.1f}")
            h, hb, bare, naive = (rows[m] for m in ("harness", "harness_batched", "bare", "naive"))
            ratios = [
                ("harness batch 1 / bare (time)", h["seconds"] / bare["seconds"], "target <= 1.3"),
                ("harness batched / bare (time)", hb["seconds"] / bare["seconds"], "target < 1"),
                ("naive / harness batched (time)", naive["seconds"] / hb["seconds"], "target >= 3 (the default run)"),
                ("naive / harness batch 1 (time)", naive["seconds"] / h["seconds"], ""),
                ("naive / harness batched (peak memory)", naive["peak_mb"] / max(hb["peak_mb"], 1e-9),
                 "target >= 4 at prefix 2048"),
                ("naive / harness batch 1 (peak memory)", naive["peak_mb"] / max(h["peak_mb"], 1e-9), ""),
            ]
            for name, value, target in ratios:
                print(f"  {name:<40} {value:6.2f}   {target}")


if __name__ == "__main__":
    main()
