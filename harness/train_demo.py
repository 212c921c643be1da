"""Train the small story model that the demo sweep runs on.

No model hub is reachable from the machines this project is built on, and drift numbers from a
random-weight model mean nothing, so the project trains its own: a byte-level BPE tokenizer and a
small Llama (rotary positions, grouped-query attention) on TinyStories text. The result is saved
with ``save_pretrained`` (safetensors) and loads through the same code as any hub model.

    harness train-demo --corpus ../shared/data/stories/tinystories_subset.txt \
        --out harness/assets/demo-model

The same command runs unchanged on a GPU (``--device cuda``). Training is seeded; a checkpoint is
written at every evaluation so an interrupted run continues with ``--resume``.

It is one module, over the usual size, because it is one command read top to bottom (held-out
split, tokenizer, model shape, training loop, evaluation, model card) and nothing else imports it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

STORY_SEPARATOR = "\n<|endoftext|>\n"
END_OF_TEXT = "<|endoftext|>"

# Story openings for the model card. Written for this project and checked at training time not to
# occur in the training text.
CARD_OPENINGS = [
    "Once upon a time, a small turtle named Pip wanted to see the sea.",
    "Mia found a red key under her bed.",
    "The old dog sat by the door and waited for the rain to stop.",
    "Tom and his sister built a tall tower out of blocks.",
    "One morning, a little bird could not find its nest.",
    "Lily had a new kite, but there was no wind.",
]


@dataclass(frozen=True)
class DemoModelShape:
    """Architecture of the demo model: a Llama with grouped-query attention."""

    vocab_size: int = 4096
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 8
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    max_position_embeddings: int = 2048


@dataclass(frozen=True)
class TrainSettings:
    """Optimisation settings; the defaults take about an hour on two CPU cores."""

    seq_len: int = 512
    batch_size: int = 16
    steps: int = 1500
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 60
    weight_decay: float = 0.1
    eval_every: int = 100
    eval_batches: int = 8
    heldout_fraction: float = 0.03
    seed: int = 0


def split_stories(text: str) -> list[str]:
    """Split a ``<|endoftext|>``-separated corpus into stripped, non-empty stories."""
    return [s.strip() for s in text.split(STORY_SEPARATOR) if s.strip()]


def train_tokenizer(stories: list[str], vocab_size: int):
    """A byte-level BPE with ``<|endoftext|>`` as BOS and EOS, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(stories, trainer=trainer)
    eot = tok.token_to_id(END_OF_TEXT)
    # Like Llama, the tokenizer itself prepends BOS; the harness's `bos: auto` follows it.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{END_OF_TEXT} $A", special_tokens=[(END_OF_TEXT, eot)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
        unk_token=None,
        pad_token=END_OF_TEXT,
        model_max_length=2048,
    )


def encode_stories(tokenizer, stories: list[str]) -> list[list[int]]:
    """Token ids of each story, without special tokens."""
    return tokenizer(stories, add_special_tokens=False)["input_ids"]


def pack(encoded: list[list[int]], eot_id: int) -> torch.Tensor:
    """One long stream ``[eot] story [eot] story ...``: every story starts after an end of text."""
    flat: list[int] = []
    for ids in encoded:
        flat.append(eot_id)
        flat.extend(ids)
    flat.append(eot_id)
    return torch.tensor(flat, dtype=torch.long)


def build_model(shape: DemoModelShape, eot_id: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        **asdict(shape),
        rope_theta=10000.0,
        tie_word_embeddings=True,
        bos_token_id=eot_id,
        eos_token_id=eot_id,
        pad_token_id=eot_id,
        attention_dropout=0.0,
    )
    return LlamaForCausalLM(config)


def cosine_lr(step: int, settings: TrainSettings) -> float:
    """Linear warm-up, then cosine decay to ``min_lr_ratio`` of the peak."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    floor = settings.min_lr_ratio
    return settings.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def sample_batch(stream: torch.Tensor, settings: TrainSettings, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(stream) - settings.seq_len - 1, (settings.batch_size,), generator=gen)
    return torch.stack([stream[s : s + settings.seq_len + 1] for s in starts.tolist()])


def next_token_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``batch[:, 1:]`` given ``batch[:, :-1]``; batch: [B, seq_len + 1]."""
    logits = model(input_ids=batch[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())


@torch.no_grad()
def heldout_loss(model, stream: torch.Tensor, settings: TrainSettings, device: str) -> float:
    """Mean next-token loss (nats) on fixed, evenly spaced held-out windows."""
    model.eval()
    n = settings.eval_batches * settings.batch_size
    span = settings.seq_len + 1
    starts = torch.linspace(0, len(stream) - span - 1, n).long().tolist()
    losses = []
    for i in range(0, n, settings.batch_size):
        batch = torch.stack([stream[s : s + span] for s in starts[i : i + settings.batch_size]]).to(device)
        losses.append(next_token_loss(model, batch).item())
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def story_bits(model, tokenizer, stories: list[str], device: str) -> list[tuple[float, int, int]]:
    """Cross-entropy in bits of each story's tokens and its end of text, given BOS.

    Returns (bits, utf8_bytes, tokens) per story; summed bits / summed bytes is bits per byte.
    """
    model.eval()
    eot = tokenizer.eos_token_id
    out = []
    for story, ids in zip(stories, encode_stories(tokenizer, stories)):
        seq = torch.tensor([[eot] + ids + [eot]], device=device)
        logits = model(input_ids=seq[:, :-1]).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        nll = -logp[0].gather(-1, seq[0, 1:, None]).sum().item()
        out.append((nll / math.log(2), len(story.encode("utf-8")), len(ids) + 1))
    return out


def bits_per_byte_interval(per_story: list[tuple[float, int, int]], n_resamples: int = 5000,
                           seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of bits per byte (a ratio of sums), resampling stories."""
    import numpy as np

    bits, n_bytes = np.array([s[0] for s in per_story]), np.array([s[1] for s in per_story], dtype=float)
    draws = np.random.default_rng(seed).integers(0, len(per_story), (n_resamples, len(per_story)))
    low, high = np.percentile(bits[draws].sum(1) / n_bytes[draws].sum(1), [2.5, 97.5])
    return float(low), float(high)


def unigram_bits(train_stream: torch.Tensor, tokenizer, stories: list[str], vocab_size: int) -> float:
    """Bits of the held-out stories under an add-one-smoothed unigram model of the training tokens."""
    counts = torch.bincount(train_stream, minlength=vocab_size).double() + 1.0
    logp = torch.log2(counts / counts.sum())
    eot = tokenizer.eos_token_id
    bits = 0.0
    for ids in encode_stories(tokenizer, stories):
        bits += -logp[torch.tensor(ids + [eot])].sum().item()
    return bits


def greedy_continuations(model, tokenizer, openings: list[str], device: str, max_new_tokens: int = 60):
    model.eval()
    out = []
    for text in openings:
        ids = tokenizer(text, return_tensors="pt")["input_ids"].to(device)
        gen = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
        out.append(tokenizer.decode(gen[0, ids.shape[1] :], skip_special_tokens=True).strip())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="harness train-demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, type=Path, help="<|endoftext|>-separated stories")
    parser.add_argument("--out", required=True, type=Path, help="where to save the model")
    parser.add_argument("--work-dir", type=Path, default=None, help="checkpoints (default: OUT.work)")
    parser.add_argument("--steps", type=int, default=TrainSettings.steps)
    parser.add_argument("--batch-size", type=int, default=TrainSettings.batch_size)
    parser.add_argument("--seq-len", type=int, default=TrainSettings.seq_len)
    parser.add_argument("--layers", type=int, default=DemoModelShape.num_hidden_layers)
    parser.add_argument("--seed", type=int, default=TrainSettings.seed)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--resume", action="store_true", help="continue from the work-dir checkpoint")
    args = parser.parse_args(argv)

    from tqdm.auto import tqdm

    if args.threads:
        torch.set_num_threads(args.threads)
    settings = TrainSettings(
        steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, seed=args.seed
    )
    shape = DemoModelShape(num_hidden_layers=args.layers)
    work = args.work_dir or args.out.with_name(args.out.name + ".work")
    work.mkdir(parents=True, exist_ok=True)

    if not args.corpus.is_file():
        raise SystemExit(f"error: corpus {args.corpus} not found")
    stories = split_stories(args.corpus.read_text(encoding="utf-8"))
    rng = random.Random(settings.seed)
    order = list(range(len(stories)))
    rng.shuffle(order)
    n_held = max(1, int(len(stories) * settings.heldout_fraction))
    held = [stories[i] for i in sorted(order[:n_held])]
    train = [stories[i] for i in sorted(order[n_held:])]
    train_set = set(train)
    held = [s for s in held if s not in train_set]
    for opening in CARD_OPENINGS:
        if any(opening in s for s in train):
            raise SystemExit(f"error: card opening occurs in the training text: {opening!r}")

    torch.manual_seed(settings.seed)
    tokenizer = train_tokenizer(train, shape.vocab_size)
    eot = tokenizer.eos_token_id
    train_stream = pack(encode_stories(tokenizer, train), eot)
    held_stream = pack(encode_stories(tokenizer, held), eot)
    print(
        f"{len(train)} training stories ({len(train_stream):,} tokens), "
        f"{len(held)} held-out stories ({len(held_stream):,} tokens)",
        flush=True,
    )

    model = build_model(shape, eot).to(args.device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=settings.lr,
        betas=(0.9, 0.95),
    )
    gen = torch.Generator().manual_seed(settings.seed)
    ckpt_path = work / "checkpoint.pt"
    start_step, history, elapsed = 0, [], 0.0
    if args.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, weights_only=False)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        gen.set_state(ckpt["gen"])
        start_step, history, elapsed = ckpt["step"], ckpt["history"], ckpt["elapsed"]
        print(f"resumed at step {start_step}", flush=True)

    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if args.device.startswith("cuda") else None
    model.train()
    t0 = time.time() - elapsed
    bar = tqdm(range(start_step, settings.steps), initial=start_step, total=settings.steps, desc="train")
    for step in bar:
        for group in opt.param_groups:
            group["lr"] = cosine_lr(step, settings)
        batch = sample_batch(train_stream, settings, gen).to(args.device)
        if autocast:
            with autocast:
                loss = next_token_loss(model, batch)
        else:
            loss = next_token_loss(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if (step + 1) % settings.eval_every == 0 or step + 1 == settings.steps:
            held_loss = heldout_loss(model, held_stream, settings, args.device)
            history.append({"step": step + 1, "train_loss": loss.item(), "heldout_loss": held_loss})
            bar.write(f"step {step + 1}: train loss {loss.item():.3f}, held-out loss {held_loss:.3f}")
            tmp = ckpt_path.with_suffix(".tmp")
            torch.save(
                {"model": model.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state(),
                 "step": step + 1, "history": history, "elapsed": time.time() - t0},
                tmp,
            )
            os.replace(tmp, ckpt_path)
    train_seconds = time.time() - t0

    # Ship bfloat16 weights (size limit) and evaluate exactly what ships: rounded, then run in fp32.
    model = model.to(torch.bfloat16).to(torch.float32).to(args.device)
    per_story = story_bits(model, tokenizer, held, args.device)
    bits, n_bytes, n_tokens = (sum(column) for column in zip(*per_story))
    uni = unigram_bits(train_stream, tokenizer, held, shape.vocab_size)
    samples = greedy_continuations(model, tokenizer, CARD_OPENINGS, args.device)
    stats = {
        "parameters": n_params,
        "training_tokens_seen": settings.steps * settings.batch_size * settings.seq_len,
        "training_stream_tokens": len(train_stream),
        "train_seconds": round(train_seconds, 1),
        "device": args.device,
        "heldout_stories": len(held),
        "heldout_bytes": n_bytes,
        "heldout_tokens": n_tokens,
        "heldout_bits_per_byte": bits / n_bytes,
        "heldout_bits_per_byte_ci": bits_per_byte_interval(per_story),
        "heldout_loss_nats_per_token": bits * math.log(2) / n_tokens,
        "unigram_bits_per_byte": uni / n_bytes,
        "settings": asdict(settings),
        "shape": asdict(shape),
        "history": history,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(args.out, safe_serialization=True)
    model.generation_config.do_sample = False
    model.generation_config.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    (args.out / "training.json").write_text(json.dumps(stats, indent=2) + "\n")
    (args.out / "README.md").write_text(model_card(stats, samples))
    print(
        f"held-out bits per byte {stats['heldout_bits_per_byte']:.3f} "
        f"(unigram baseline {stats['unigram_bits_per_byte']:.3f}); saved to {args.out}",
        flush=True,
    )
    return 0


def model_card(stats: dict, samples: list[str]) -> str:
    shape, settings = stats["shape"], stats["settings"]
    low, high = stats["heldout_bits_per_byte_ci"]
    def cell(text: str) -> str:  # one markdown table cell: no raw newlines or pipes
        return text.replace("|", "\\|").replace("\n", "<br>")

    rows = "\n".join(f"| {cell(o)} | {cell(s)} |" for o, s in zip(CARD_OPENINGS, samples))
    head_dim = shape["hidden_size"] // shape["num_attention_heads"]
    return f"""# demo-model: a small story-writing Llama trained by this project

The default model of `harness sweep` and `make demo`. It exists so the demo runs offline and its
drift numbers come from a model that really continues English text. It is a toy: it knows simple
children's stories and little else.

## Data and licence
Trained on `tinystories_subset.txt` from the project's shared data (TinyStories, Eldan and Li
2023, arXiv:2305.07759; CDLA-Sharing-1.0). A random {settings['heldout_fraction']:.0%} of the
stories (seed {settings['seed']}) was held out and never trained on. The weights are a model
trained on that data; the text itself is not shipped.

## Architecture
`LlamaForCausalLM`: {shape['num_hidden_layers']} layers, hidden size {shape['hidden_size']},
{shape['num_attention_heads']} query heads and {shape['num_key_value_heads']} key/value heads
(grouped-query attention), head dim {head_dim}, SwiGLU MLP {shape['intermediate_size']}, rotary
positions, `max_position_embeddings` {shape['max_position_embeddings']}, tied embeddings.
{stats['parameters']:,} parameters, stored as bfloat16 safetensors. Tokenizer: byte-level BPE,
vocabulary {shape['vocab_size']}, `<|endoftext|>` as BOS and EOS (prepended like Llama's BOS).

## Training
{settings['steps']} steps of {settings['batch_size']} x {settings['seq_len']} tokens of packed
stories ({stats['training_tokens_seen']:,} tokens seen; the training stream is
{stats['training_stream_tokens']:,} tokens), AdamW, peak learning rate {settings['lr']}, linear
warm-up then cosine decay, seed {settings['seed']}, on {stats['device']} in
{stats['train_seconds'] / 60:.0f} minutes.

## Held-out quality (measured on the shipped bfloat16 weights)
| measure | value |
| --- | --- |
| bits per byte, held-out stories ({stats['heldout_stories']} stories, {stats['heldout_bytes']:,} bytes) | {stats['heldout_bits_per_byte']:.3f} [{low:.3f}, {high:.3f}] |
| unigram baseline, same stories | {stats['unigram_bits_per_byte']:.3f} |
| loss, nats per token | {stats['heldout_loss_nats_per_token']:.3f} |

Bits per byte is the total cross-entropy in bits of each held-out story's tokens and its end of
text, given BOS, divided by the story's UTF-8 bytes; the interval is a 95% bootstrap over the
held-out stories. Full history: `training.json`.

## Greedy continuations of openings not in the training text
| opening | continuation (greedy, 60 tokens) |
| --- | --- |
{rows}

Retrain: `harness train-demo --corpus ../shared/data/stories/tinystories_subset.txt --out harness/assets/demo-model`
"""


if __name__ == "__main__":
    raise SystemExit(main())
