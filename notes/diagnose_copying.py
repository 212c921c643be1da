"""Diagnosis behind lineage stages 4 and 5 (2026-11-30), as run against commit 832fb7a of branch
wip/issue-17: random-token copy accuracy for held-out words' tokens and other tokens (20 random
tokens written twice, two held-out tokens among them; accuracy of predicting the second copy), then
held-out hit rates (unquoted targets) by single- and multi-token target. Usage: CHECKPOINT [THREADS]"""
import json, random, sys, torch
torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
sys.path.insert(0, "/tmp/wip17")
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import directives as D, train_demo as T
d = sys.argv[1]
tok = AutoTokenizer.from_pretrained(d); model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
held = set()
for w in D.HELDOUT_WORDS:
    ids = tok(" " + w, add_special_tokens=False).input_ids
    if len(ids) == 1: held.add(ids[0])
pool = [i for i in range(len(tok)) if i not in set(tok.all_special_ids) and i not in held]
rng = random.Random(0); acc = {"held": [0, 0], "other": [0, 0]}
with torch.no_grad():
    for _ in range(40):
        seq = [rng.choice(pool) for _ in range(20)]
        seq[5], seq[12] = rng.sample(sorted(held), 2)
        ids = torch.tensor([[tok.eos_token_id] + seq + seq]); pred = model(input_ids=ids).logits[0].argmax(-1)
        for j in range(20):
            k = "held" if seq[j] in held else "other"
            acc[k][0] += int(pred[20 + j].item() == ids[0, 21 + j].item()); acc[k][1] += 1
print("copy", {k: round(v[0] / v[1], 3) for k, v in acc.items()}, flush=True)
stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
prompts = [json.loads(l) for l in open("/work/main/harness/data/prompts_stories_en.jsonl")][:12]
orig = D.render
D.render = lambda t, w, q="": orig(t, w, "")
pre = D.synthetic_prefixes(stories[:400], random.Random(7), 40)
res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(64,))
print({f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]})
rows = res["rows"]
for multi in (False, True):
    sel = [r for r in rows if r["group"] == "C" and (len(tok(" " + r["target"], add_special_tokens=False).input_ids) > 1) == multi]
    print("held-out unquoted C", "multi" if multi else "single", len(sel), round(sum(r["hit"] for r in sel) / max(len(sel), 1), 3), flush=True)
