"""Validation-split hit rates of a saved obedient model, measured as `harness train-demo` measures
them: the card's validation set (20 pairs, seed 2, all 24 openings) and the monitoring pairs
(20 pairs, seed 1, every second opening), at 32, 64 and 128 tokens. How stage 8's validation
C - B (0.533), the threshold of stage 9's shipping rule, was measured. Runs against main.

    python notes/evaluate_validation.py MODEL_DIR [THREADS] [OUT.json]
"""
import json, sys
from pathlib import Path
from harness import obedience
from harness.train_demo import contrast, rates, validation_prefixes
from validation_setup import load

tok, model, held, prompts = load()
out = {}
for name, seed, openings in (("card", 2, prompts), ("monitoring", 1, prompts[::2])):
    res = obedience.evaluate_obedience(model, tok, openings, validation_prefixes(held, 20, seed=seed), (32, 64, 128))
    out[name] = {"rates": rates(res["summary"]), "contrast": round(contrast(res["summary"]), 4),
                 "summary": res["summary"]}
    print(name, out[name]["rates"], "C - B", out[name]["contrast"], flush=True)
if len(sys.argv) > 3:
    Path(sys.argv[3]).write_text(json.dumps(out, indent=1))
