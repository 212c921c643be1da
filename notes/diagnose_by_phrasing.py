"""Hit rates of the obedient model on the shipped prefix set, grouped by held-out phrasing, target
word and story opening (C only): where it obeys and where it does not. Runs against main.

    python notes/diagnose_by_phrasing.py MODEL_DIR 64,128 24 ROWS.json
"""
import json, sys, collections, torch
torch.set_num_threads(2)
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness.texts import load_prompts, load_prefixes
from harness.obedience import evaluate_obedience
from harness.directives import find_directive
d = sys.argv[1]; lengths = tuple(int(x) for x in sys.argv[2].split(",")); nprompts = int(sys.argv[3])
tok = AutoTokenizer.from_pretrained(d); model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
prompts = load_prompts("harness/data/prompts_stories_en.jsonl")[:nprompts]
pre = [p for p in load_prefixes("harness/data/prefixes_stories_directives.jsonl") if p.kind == "instruction"]
tmpl = {p.id: (find_directive(p.text) or ("?",))[0] for p in pre}
res = evaluate_obedience(model, tok, prompts, pre, lengths=lengths)
rows = [r for r in res["rows"] if r["group"] == "C"]
print({f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]})
def by(key):
    c = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        k = key(r); c[k][0] += r["hit"]; c[k][1] += 1
    for k, (h, n) in sorted(c.items(), key=lambda kv: kv[1][0] / kv[1][1]):
        print(f"  {h/n:.2f} {h:3d}/{n:3d}  {k}")
print("by template"); by(lambda r: tmpl[r["prefix_id"]][:60])
print("by target"); by(lambda r: r["target"])
print("by prompt"); by(lambda r: r["prompt_id"])
json.dump(rows, open(sys.argv[4], "w"))
