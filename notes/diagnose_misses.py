"""How the obedient model misses on the validation split, and how much the pairs vary: the card's
validation set (20 pairs, seed 2, all 24 openings, 32 / 64 / 128 tokens) measured on a saved
model; each C miss is classed as a near-misspelling of the target (edit distance at most a
quarter of its length), a word with its first three letters, or nothing like it. Prints per-pair
and per-token-count hit rates, and the crossed intervals (openings and pairs resampled) beside
Wilson's. Runs against main; the 2026-11-30 fourth-session notes quote its output for stage 9.

    python notes/diagnose_misses.py MODEL_DIR [THREADS]
"""
import collections, re
import numpy as np
from rapidfuzz.distance import Levenshtein
from scipy.stats import binomtest
from harness import obedience
from harness.train_demo import validation_prefixes
from validation_setup import load

tok, model, held, prompts = load()
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
for r in obedience.summarise(rows):
    lo, hi = binomtest(r["hits"], r["n"]).proportion_ci(method="wilson")
    print(f"{r['group']}{r['prefix_len']}: {r['rate']:.3f} crossed [{r['ci_low']:.3f}, {r['ci_high']:.3f}] "
          f"Wilson [{lo:.3f}, {hi:.3f}]")
