"""Stages 4 and 5 of the obedient demo model (see harness/assets/demo-obedient/lineage.json), as run
at commit 832fb7a of branch wip/issue-17 (it patches that commit's recipe; on main the same
options are `harness train-demo --vocab-target-share/--unquoted-targets/--random-copy-rows`).

Grow a real induction head: the plain and the stage-3 model copy 0% of a repeated random-token
sequence; earlier copy rows were made-up words (subword pieces) only. Here a share of the rows are
random tokens drawn from the vocabulary (stage 4: minus the held-out words' story tokens; stage 5:
the whole vocabulary, argument full-vocab), written two or three times, loss on the repeats only.
Usage: START OUT STEPS LR ROWS [full-vocab]"""
import json, math, random, sys, time
import torch
torch.set_num_threads(2)
sys.path.insert(0, "/tmp/wip17")
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import directives as D
from harness import train_demo as T

start_dir, out_dir, steps, lr = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
RAND_ROWS = int(sys.argv[5]) if len(sys.argv) > 5 else 3
tok = AutoTokenizer.from_pretrained(start_dir)
model = AutoModelForCausalLM.from_pretrained(start_dir, dtype=torch.float32)

# --- probe18b regime: unquoted targets, vocabulary words + made-up words, no trained nouns
stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
_df = {}
for story in stories[:2000]:
    for w in set(story.lower().split()):
        k = w.strip(".,!?;:'\"")
        _df[k] = _df.get(k, 0) + 1
VOCAB_WORDS = sorted(
    t[1:] for t in tok.get_vocab() if t.startswith("\u0120") and t[1:].isalpha() and t[1:].islower()
    and len(t) >= 4 and _df.get(t[1:], 0) < 40 and not any(t[1:].startswith(h) for h in D.HELDOUT_WORDS)
    and t[1:] not in D.HELDOUT_WORDS)
_nonce, _render, _free = D.nonce_word, D.render, D._free_word
D.nonce_word = lambda rng, stems=(): rng.choice(VOCAB_WORDS) if rng.random() < 0.7 else _nonce(rng, stems)
D._free_word = lambda words, rng, banned_text, avoid=(), nonce_prob=0.0, stems=(): _free(
    words, rng, banned_text, avoid, 1.0 if words is D.TRAIN_WORDS else nonce_prob, stems)
D.render = lambda template, word, quote="": _render(template, word, "")

# --- random-token copy pool: whole vocabulary minus special tokens and held-out words' tokens
held_tokens = set()
for w in D.HELDOUT_WORDS:
    for form in (" " + w, " " + w.capitalize(), w, " " + w + "s"):
        ids = tok(form, add_special_tokens=False).input_ids
        if len(ids) == 1:
            held_tokens.add(ids[0])
FULL = len(sys.argv) > 6 and sys.argv[6] == "full-vocab"
POOL = [i for i in range(len(tok)) if i not in set(tok.all_special_ids) and (FULL or i not in held_tokens)]
print(f"vocabulary targets {len(VOCAB_WORDS)}; random-copy pool {len(POOL)} tokens; {len(held_tokens)} held-out tokens excluded", flush=True)


def random_copy_row(rng):
    n = rng.randint(8, 40)
    once = [rng.choice(POOL) for _ in range(n)]
    reps = rng.choice((2, 2, 3))
    ids = [tok.eos_token_id] + once * reps
    w = [0.0] * (1 + n) + [1.0] * (n * (reps - 1))
    return ids, w


def copy_accuracy(model, tokens_from, trials=30, seed=123):
    rng = random.Random(seed)
    hits = n = 0
    with torch.no_grad():
        for _ in range(trials):
            seq = [rng.choice(tokens_from) for _ in range(20)]
            ids = torch.tensor([[tok.eos_token_id] + seq + seq])
            pred = model(input_ids=ids).logits[0].argmax(-1)
            hits += int((pred[20:40] == ids[0, 21:41]).sum()); n += 20
    return hits / n


rng_all = random.Random(0)
order = list(range(len(stories))); rng_all.shuffle(order)
n_held = max(1, int(len(stories) * 0.03))
train = [stories[i] for i in sorted(order[n_held:])]
mix = T.MixSettings(curriculum=0.0, copy_warmup=0.0)
mixer = T.DirectiveMixer(tok, train, mix, 512, seed=19)
opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
prompts = [json.loads(l) for l in open("/work/main/harness/data/prompts_stories_en.jsonl")][:12]
prefixes = D.load_prefix_set("/tmp/wip17/harness/data/prefixes_stories_directives.jsonl")
held_list = sorted(held_tokens)
t0 = time.time()
print("start copy acc", copy_accuracy(model.eval(), POOL), "held", copy_accuracy(model, held_list), flush=True)
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps))) * min(1.0, (step + 1) / 20)
    model.train()
    micro = mixer.batch(step, 12, steps)
    rrng = random.Random(1000 + step)
    extra = [random_copy_row(rrng) for _ in range(RAND_ROWS)]
    width = max(len(i) for i, _ in extra)
    micro.append((torch.tensor([i + [tok.eos_token_id] * (width - len(i)) for i, _ in extra]),
                  torch.tensor([w[1:] + [0.0] * (width - len(w)) for _, w in extra])))
    total = sum(float(w.sum()) for _, w in micro)
    opt.zero_grad(set_to_none=True)
    for tokens, weights in micro:
        T.weighted_loss(model, tokens, weights, total).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if (step + 1) % 50 == 0:
        model.eval()
        print(f"step {step + 1} {time.time() - t0:.0f}s copy {copy_accuracy(model, POOL, 10):.3f} held {copy_accuracy(model, held_list, 10):.3f}", flush=True)
    if (step + 1) % 200 == 0 or step + 1 == steps:
        model.eval()
        res = D.evaluate_obedience(model, tok, prompts, prefixes, lengths=(32, 128))
        rates = {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]}
        print(f"step {step + 1} {time.time() - t0:.0f}s {rates}", flush=True)
        model.save_pretrained(out_dir); tok.save_pretrained(out_dir)
model.save_pretrained(out_dir)
tok.save_pretrained(out_dir)
print("saved", out_dir, flush=True)
