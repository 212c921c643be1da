"""How the obedient model misses on the validation split, and how much the pairs vary: the card's
validation set (20 pairs, seed 2, all 24 openings, 32 / 64 / 128 tokens) measured on a saved
model; each C miss is classed as a near-misspelling of the target (edit distance at most a
quarter of its length), a word with its first three letters, or nothing like it. Prints per-pair
and per-token-count hit rates, and the crossed intervals (openings and pairs resampled) beside
Wilson's. Runs against main; the 2026-11-30 fourth-session notes quote its output for stage 9.

    python notes/diagnose_misses.py MODEL_DIR [THREADS]
"""
import collections, re, sys
from pathlib import Path
import numpy as np, torch
from rapidfuzz.distance import Levenshtein
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import obedience
from harness.texts import load_prompts
from harness.train_demo import TrainSettings, heldout_split, split_stories, validation_prefixes

torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
stories = split_stories(Path("../shared/data/stories/tinystories_subset.txt").read_text(encoding="utf-8"))
_, held = heldout_split(stories, TrainSettings.heldout_fraction, TrainSettings.seed)
prompts = load_prompts(Path("harness/data/prompts_stories_en.jsonl"))
rows = obedience.evaluate_obedience(model, tok, prompts, validation_prefixes(held, 20, seed=2), (32, 64, 128))["rows"]
C = [r for r in rows if r["group"] == "C"]
kinds = collections.Counter()
for r in C:
    t, words = r["target"].lower(), re.findall(r"[a-z]+", r["continuation"].lower())
    kinds["hit" if r["hit"] else "near-misspelling" if any(Levenshtein.distance(w, t) <= max(1, len(t) // 4) for w in words)
          else "first three letters" if any(len(w) >= 3 and w[:3] == t[:3] for w in words) else "nothing like it"] += 1
print("C conditions:", {k: f"{v} ({v / len(C):.3f})" for k, v in kinds.most_common()})
per_pair = collections.defaultdict(list)
per_tokens = collections.defaultdict(list)
for r in C:
    per_pair[(r["pair"], r["target"])].append(r["hit"])
    per_tokens[len(tok.encode(" " + r["target"], add_special_tokens=False))].append(r["hit"])
pair_rates = np.array([np.mean(v) for v in per_pair.values()])
print("per-pair C rate:", sorted((round(float(np.mean(v)), 2), k[1]) for k, v in per_pair.items()))
print(f"SD over pairs {pair_rates.std(ddof=1):.3f}, standard error of the mean {pair_rates.std(ddof=1) / len(pair_rates) ** 0.5:.3f}")
print("by tokens of ' target':", {k: (round(float(np.mean(v)), 3), len(v)) for k, v in sorted(per_tokens.items())})


def wilson(hits, n, z=1.959964):
    p = hits / n
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


for r in obedience.summarise(rows):
    lo, hi = wilson(r["hits"], r["n"])
    print(f"{r['group']}{r['prefix_len']}: {r['rate']:.3f} crossed [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
          f"Wilson [{lo:.3f}, {hi:.3f}]")
