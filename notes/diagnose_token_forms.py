"""Diagnosis (2026-11-30): hit rates by how the target is written in the directive (story tokens,
unquoted after "the word", quoted) and by single- vs multi-token targets. Usage: python
notes/diagnose_token_forms.py CHECKPOINT_DIR (run from this checkout; 2 threads, about 2 minutes)."""
import json, random, sys, torch
torch.set_num_threads(2)
sys.path.insert(0, ".")
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import directives as D, train_demo as T
d = sys.argv[1]
tok = AutoTokenizer.from_pretrained(d); model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
prompts = [json.loads(l) for l in open("/work/main/harness/data/prompts_stories_en.jsonl")][:12]
a_word = tuple(t for t in D.HELDOUT_TEMPLATES if "{a_word}" in t)
bare = tuple(t for t in D.HELDOUT_TEMPLATES if "{word}" in t)
orig_render = D.render
for name, templates, quote in [("a_word (story tokens)", a_word, None), ("the word X, unquoted", bare, ""), ("the word 'X', quoted", bare, "'")]:
    if quote is not None:
        D.render = lambda t, w, q="", _q=quote: orig_render(t, w, _q)
    else:
        D.render = orig_render
    pre = D.synthetic_prefixes(stories[:400], random.Random(3), 24, templates=templates)
    res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(64,))
    print(name, {f"{r['group']}{r['prefix_len']}": (round(r["rate"], 3), r.get("n"), r.get("low"), r.get("high")) for r in res["summary"]}, flush=True)

# trained words and phrasings, unquoted and quoted; held-out unquoted by token count
D.render = orig_render
for quote in ("", "'"):
    D.render = lambda t, w, q="", _q=quote: orig_render(t, w, _q)
    pre = D.synthetic_prefixes(stories[:400], random.Random(5), 24, words=D.TRAIN_WORDS, templates=D.TRAIN_TEMPLATES, mentions=D.TRAIN_MENTIONS)
    res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(64,))
    print("train words+phrasings, quote=%r" % quote, {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]}, flush=True)
# held-out, unquoted, by token count
D.render = lambda t, w, q="": orig_render(t, w, "")
pre = D.synthetic_prefixes(stories[:400], random.Random(7), 40)
res = D.evaluate_obedience(model, tok, prompts, pre, lengths=(64,))
print(list(res.keys()), list(res["rows"][0].keys()) if "rows" in res else "")
rows = res.get("rows", [])
for multi in (False, True):
    sel = [r for r in rows if r["group"] == "C" and (len(tok(" " + r["target"], add_special_tokens=False).input_ids) > 1) == multi]
    print("held-out unquoted C, multi-token" if multi else "held-out unquoted C, single-token", len(sel), sum(r["hit"] for r in sel) / max(len(sel), 1))
