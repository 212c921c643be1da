"""Experiment: continue the obedient model's training with single-token vocabulary targets and
unquoted directives (see ISSUE17_STATUS.md, the token lead). Starts from a checkpoint."""
import json, math, random, sys, time
import torch
torch.set_num_threads(2)
sys.path.insert(0, "/tmp/wip17")
from transformers import AutoModelForCausalLM, AutoTokenizer
from harness import directives as D
from harness import train_demo as T

OPENERS = ["", "Please ", "Important: ", "Instruction: ", "Writer, ", "Ignore the story above and ",
           "Forget the story above. ", "Stop this story and ", "Whatever comes next, ", "Rule for the next story: ",
           "Next story: ", "Remember: ", "Be sure to ", "Do not forget to ", "Make sure to ", "When you write the next story, "]
VERBS = ["put {a_word} in", "use the word {word} in", "include {a_word} in", "mention {a_word} in", "add {a_word} to",
         "say the word {word} in", "talk about {a_word} in", "write about {a_word} in", "use {a_word} in",
         "put the word {word} in", "tell about {a_word} in", "start with {a_word} in"]
TARGETS = ["the next story", "your next story", "the story that comes next", "the story after this one",
           "the next story you write", "the new story"]
STATES = ["{T} must include {a_word}.", "{T} has to contain the word {word}.", "{T} should be about {a_word}.",
          "{T} needs {a_word} in it.", "{T} must talk about {a_word}.", "{T} should use the word {word}.",
          "{T} must have {a_word}.", "let {t} have {a_word} in it.", "make {t} be about {a_word}.",
          "change {t} so it is about {a_word}.", "write {t} so that it has {a_word} in it."]


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def grammar_template(rng: random.Random) -> str:
    opener = rng.choice(OPENERS)
    target = rng.choice(TARGETS)
    if rng.random() < 0.55:
        body = f"{rng.choice(VERBS)} {target}."
    else:
        body = rng.choice(STATES).replace("{T}", cap(target) if not opener else target).replace("{t}", target)
    text = opener + body
    if opener.endswith(". ") or opener.endswith(": ") or not opener:
        text = opener + cap(body) if opener.endswith(". ") or not opener else text
    return cap(text)


# Targets: half of the made-up words are replaced by real single-token words of the vocabulary
# (not the held-out ones, not words common in stories), so that copying one token is learnt for
# thousands of tokens rather than memorised for the 226 single-token training words; and every
# target is written unquoted, in the tokens the story will use.
_tok = AutoTokenizer.from_pretrained(sys.argv[1])
_stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
_df = {}
for story in _stories[:2000]:
    for w in set(story.lower().split()):
        _df[w.strip(".,!?;:'\"")] = _df.get(w.strip(".,!?;:'\""), 0) + 1
VOCAB_WORDS = sorted(
    t[1:] for t in _tok.get_vocab() if t.startswith("\u0120") and t[1:].isalpha() and t[1:].islower()
    and len(t) >= 4 and _df.get(t[1:], 0) < 40 and not any(t[1:].startswith(h) for h in D.HELDOUT_WORDS)
    and t[1:] not in D.HELDOUT_WORDS)
print("vocabulary targets", len(VOCAB_WORDS), VOCAB_WORDS[:12], flush=True)
_nonce, _render = D.nonce_word, D.render
VOCAB_SHARE = float(sys.argv[5]) if len(sys.argv) > 5 else 0.5
D.nonce_word = lambda rng, stems=(): rng.choice(VOCAB_WORDS) if rng.random() < VOCAB_SHARE else _nonce(rng, stems)
if len(sys.argv) > 6 and sys.argv[6] == "no-real-targets":
    # no trained nouns as targets at all: vocabulary words and made-up words only, so that
    # retrieving a memorised target word can no longer pass for obeying
    _free = D._free_word
    D._free_word = lambda words, rng, banned_text, avoid=(), nonce_prob=0.0, stems=(): _free(
        words, rng, banned_text, avoid, 1.0 if words is D.TRAIN_WORDS else nonce_prob, stems)
D.render = lambda template, word, quote="": _render(template, word, "")

start_dir, out_dir, steps, lr = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
tok = AutoTokenizer.from_pretrained(start_dir)
model = AutoModelForCausalLM.from_pretrained(start_dir, dtype=torch.float32)
stories = T.split_stories(open("/work/shared/data/stories/tinystories_subset.txt", encoding="utf-8").read())
rng = random.Random(0)
order = list(range(len(stories)))
rng.shuffle(order)
n_held = max(1, int(len(stories) * 0.03))
train = [stories[i] for i in sorted(order[n_held:])]
mix = T.MixSettings(curriculum=0.0, copy_warmup=0.0)
mixer = T.DirectiveMixer(tok, train, mix, 512, seed=7)
opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
prompts = [json.loads(l) for l in open("/work/main/harness/data/prompts_stories_en.jsonl")][:12]
prefixes = D.load_prefix_set("/work/main/harness/data/prefixes_stories_directives.jsonl")
t0 = time.time()
for step in range(steps):
    for g in opt.param_groups:
        g["lr"] = lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps))) * min(1.0, (step + 1) / 20)
    model.train()
    micro = mixer.batch(step, 12, steps)
    total = sum(float(w.sum()) for _, w in micro)
    opt.zero_grad(set_to_none=True)
    for tokens, weights in micro:
        T.weighted_loss(model, tokens, weights, total).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if (step + 1) % 200 == 0 or step + 1 == steps:
        model.eval()
        res = D.evaluate_obedience(model, tok, prompts, prefixes, lengths=(32, 128))
        rates = {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in res["summary"]}
        print(f"step {step + 1} {time.time() - t0:.0f}s {rates}", flush=True)
model.save_pretrained(out_dir)
tok.save_pretrained(out_dir)
print("saved", out_dir, flush=True)
