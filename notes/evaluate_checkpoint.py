import json, random, sys, torch
torch.set_num_threads(2)
sys.path.insert(0, "/work/main")
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import directives as D, train_demo as T
d = sys.argv[1]
tok = AutoTokenizer.from_pretrained(d); model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
prompts = [json.loads(l) for l in open("/work/main/harness/data/prompts_stories_en.jsonl")][:12]
for name, kw in [("train", dict(words=D.TRAIN_WORDS, templates=D.TRAIN_TEMPLATES, mentions=D.TRAIN_MENTIONS)), ("heldout", {})]:
    pre = D.synthetic_prefixes(stories[:400], random.Random(3), 20, **kw)
    res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(32, 128))
    print(name, {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]}, flush=True)
pre = D.load_prefix_set("/work/main/harness/data/prefixes_stories_directives.jsonl")
res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(32, 128))
print("shipped set", {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]})
