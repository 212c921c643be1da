"""Validation-split hit rates of a saved obedient model, measured as `harness train-demo` measures
them: the card's validation set (20 pairs, seed 2, all 24 openings) and the monitoring pairs
(20 pairs, seed 1, every second opening), at 32, 64 and 128 tokens. How stage 8's validation
C - B (0.533), the threshold of stage 9's shipping rule, was measured. Runs against main.

    python notes/evaluate_validation.py MODEL_DIR [THREADS] [OUT.json]
"""
import json, sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import obedience
from harness.texts import load_prompts
from harness.train_demo import TrainSettings, contrast, heldout_split, rates, split_stories, validation_prefixes

torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
stories = split_stories(Path("../shared/data/stories/tinystories_subset.txt").read_text(encoding="utf-8"))
_, held = heldout_split(stories, TrainSettings.heldout_fraction, TrainSettings.seed)
prompts = load_prompts(Path("harness/data/prompts_stories_en.jsonl"))
out = {}
for name, seed, openings in (("card", 2, prompts), ("monitoring", 1, prompts[::2])):
    res = obedience.evaluate_obedience(model, tok, openings, validation_prefixes(held, 20, seed=seed), (32, 64, 128))
    out[name] = {"rates": rates(res["summary"]), "contrast": round(contrast(res["summary"]), 4),
                 "summary": res["summary"]}
    print(name, out[name]["rates"], "C - B", out[name]["contrast"], flush=True)
if len(sys.argv) > 3:
    Path(sys.argv[3]).write_text(json.dumps(out, indent=1))
