"""Train the small story model that the demo sweep runs on: the ``harness-train-demo`` command.

No model hub is reachable from the machines this project is built on, and drift numbers from a
random-weight model mean nothing, so the project trains its own: a byte-level BPE tokenizer and a
small Llama (rotary positions, grouped-query attention) on TinyStories text. The result is saved
with ``save_pretrained`` (safetensors) and loads through the same code as any hub model.

    harness-train-demo --corpus ../shared/data/stories/tinystories_subset.txt \
        --out harness/assets/demo-model

The same command runs unchanged on a GPU (``--device cuda``). Training is seeded; a checkpoint is
written at every evaluation so an interrupted run continues with ``--resume``.

The obedient model (the positive control, ``harness/assets/demo-obedient``) fine-tunes the plain
one with directive and mention examples mixed into the story stream (recipe: ``demo_training.directives``).
It took several stages (its card); the last one was, from the previous stage's weights:

    harness-train-demo --corpus ../shared/data/stories/tinystories_subset.txt \
        --init-from PREVIOUS_STAGE --directives --nonce-prob 1.0 --vocab-target-share 0.7 \
        --unquoted-targets --random-copy-rows 6 --phrasing-grammar 0.7 --curriculum 0 --copy-warmup 0 \
        --steps 1600 --batch-size 12 --lr 2e-4 --warmup-steps 30 --ema-decay 0.995 \
        --eval-every 200 --keep-best --eval-lengths 32,64,128 --synthetic-eval-pairs 20 \
        --valid-text ../shared/data/stories/tinystories_valid_head.txt \
        --baseline harness/assets/demo-model --out harness/assets/demo-obedient

This module is the command: it reads the options and runs one of its three modes (train, ``--recard``,
``--re-evaluate``). The parts are modules of their own in ``demo_training``: ``settings`` (the
settings, and the command line generated from them), ``corpus`` (stories, held-out split,
tokenizer), ``training`` (model, schedule, losses, loop, checkpoints), ``mixer`` (the obedient
model's training rows), ``evaluation`` (bits per byte, continuations, obedience), and ``cards``
and ``card_tables`` (the model cards).
"""

from __future__ import annotations

import contextlib
import json
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

import torch

from demo_training.cards import records_of, rewrite_card
from demo_training.corpus import CARD_OPENINGS, encode_stories, pack, train_tokenizer, training_split
from demo_training.evaluation import (
    final_evaluation,
    greedy_continuations,
    heldout_measures,
    monitor,
    re_evaluate,
    validation_prefixes,
)
from demo_training.mixer import DirectiveMixer, copy_pretrain
from demo_training.settings import Options, build_parser, read_options
from demo_training.training import Trainer, build_model, checkpoint_path, load_pretrained, save_model, training_lock
from harness.errors import HarnessError
from harness.inputs.texts import load_prompts
from harness.io import write_json
from harness.model.adapters import add_adapters, merge_wrapped, save_adapter

PROGRAM = "harness-train-demo"


def main(argv: list[str] | None = None) -> int:
    """``harness-train-demo``, with the harness's exit statuses: 0 done, 2 a mistake in the command
    or its input (one line), 3 a bug (the traceback)."""
    from harness.cli import report_bug

    try:
        return run(argv)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001
        return report_bug(exc)


def run(argv: list[str] | None = None) -> int:
    """Train a model, or only rewrite a card (``--recard``), or measure a saved model again
    (``--re-evaluate``); a mistake in the command raises :class:`HarnessError`."""
    parser = build_parser(description=__doc__.split("\n\n")[0])
    opts = read_options(parser.parse_args(argv))
    command, ft = opts.command, opts.fine_tuning
    if command.recard:
        measurements = rewrite_card(command.recard)
        print(f"rewrote {command.recard / 'README.md'} and {measurements}")
        return 0
    invocation = f"{PROGRAM} " + " ".join(sys.argv[1:] if argv is None else argv)
    if command.re_evaluate:
        if command.corpus is None:
            parser.error("--re-evaluate needs --corpus (the corpus the model was trained on: its held-out stories)")
        if command.threads:
            torch.set_num_threads(command.threads)
        re_evaluate(command.re_evaluate, command.corpus, opts.card, command.device, invocation,
                    quotes=opts.mix.evaluation_quotes)
        print(f"re-measured {command.re_evaluate}; rewrote its training.json, measurements.md and README.md")
        return 0
    if command.corpus is None or command.out is None:
        parser.error("--corpus and --out are required")
    if ft.directives and not ft.valid_text:
        parser.error("--directives needs --valid-text (the card reports bits per byte on it)")
    if command.threads:
        torch.set_num_threads(command.threads)
    if not 0.0 <= opts.train.ema_decay < 1.0:
        raise HarnessError(f"--ema-decay must be in [0, 1), got {opts.train.ema_decay}")
    for name in ("seq_len", "batch_size", "steps", "eval_every"):  # 0 or less trains nothing, or divides by it
        if getattr(opts.train, name) < 1:
            raise HarnessError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(opts.train, name)}")
    if opts.train.warmup_steps < 0:
        raise HarnessError(f"--warmup-steps must be 0 or more, got {opts.train.warmup_steps}")
    if command.out.exists() and not command.out.is_dir():
        raise HarnessError(f"--out {command.out} is a file; give a directory for the model")
    return train(opts, invocation, parser.error)


def earlier_test_looks(out: Path) -> list[dict]:
    """The test measurements earlier runs saved for the model in ``out`` (its ``training.json``): a
    run that continues one whose card was written was continued by someone who had seen that card's
    test numbers, so the new card must say its test numbers are not a first look."""
    try:
        old = json.loads((records_of(out) / "training.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet, or unreadable: nothing this run can vouch for
        return []
    looks = list(old.get("earlier_test_looks", []))
    if old.get("obedient") or old.get("obedience"):
        looks.append({"selected_step": old.get("selected_step"), "command": old.get("command")})
    return looks


def train(opts: Options, invocation: str, refuse) -> int:
    """Train (or fine-tune) a model as ``opts`` say, then measure it, save it to ``--out`` with
    its ``training.json`` and card. ``invocation``: the command line, recorded for the card;
    ``refuse``: reports a wrong combination of options (``parser.error``)."""
    with contextlib.ExitStack() as locks:  # the work directory's lock, once it is known to be used
        return _train(opts, invocation, refuse, locks)


def _train(opts: Options, invocation: str, refuse, locks: contextlib.ExitStack) -> int:
    command, ft, settings, mix, card = opts.command, opts.fine_tuning, opts.train, opts.mix, opts.card
    device, shape = command.device, opts.shape
    work = command.work_dir or command.out.with_name(command.out.name + ".work")
    looks = earlier_test_looks(command.out)
    train_stories, held, valid, n_overlap = training_split(command.corpus, settings, ft.valid_text, ft.directives)

    torch.manual_seed(settings.seed)
    if ft.lora_rank and not ft.init_from:
        refuse("--lora-rank needs --init-from (an adapter changes a trained model)")
    if ft.init_from:
        model, tokenizer, shape, base = load_pretrained(ft.init_from, device)
        if ft.lora_rank:
            add_adapters(model, ft.lora_rank, ft.lora_alpha, tuple(ft.lora_targets.split(",")), settings.seed)
    else:
        tokenizer = train_tokenizer(train_stories, shape.vocab_size)
    eot = tokenizer.eos_token_id
    train_stream = pack(encode_stories(tokenizer, train_stories), eot)
    held_stream = pack(encode_stories(tokenizer, held), eot)
    print(
        f"{len(train_stories)} training stories ({len(train_stream):,} tokens), "
        f"{len(held)} held-out stories ({len(held_stream):,} tokens)"
        + (f"; {n_overlap} training stories left out because they contain validation paragraphs" if n_overlap else ""),
        flush=True,
    )
    if len(held_stream) < settings.seq_len + 2:
        raise HarnessError(
            f"the held-out split of {command.corpus} has {len(held_stream)} tokens, fewer than one "
            f"evaluation window (--seq-len {settings.seq_len} + 2); use a larger corpus or a smaller --seq-len")
    if not ft.init_from:
        model = build_model(shape, eot).to(device)
    mixer = DirectiveMixer(tokenizer, train_stories, mix, settings.seq_len, settings.seed) if ft.directives else None
    prompts = load_prompts(card.prompts, card.prompt_limit) if ft.directives else []
    probes = validation_prefixes(held, ft.probe_pairs, seed=1, quotes=mix.evaluation_quotes) if ft.directives else []
    if ft.keep_best and not (ft.directives and ft.probe_pairs):
        refuse("--keep-best needs --directives and --probe-pairs > 0 (it chooses on the validation pairs)")

    work.mkdir(parents=True, exist_ok=True)  # only once the inputs are known to be usable
    locks.enter_context(training_lock(work))
    copy_history: list[dict] = []
    if ft.copy_pretrain_steps and not (command.resume and checkpoint_path(work).exists()):
        copy_history = copy_pretrain(model, tokenizer, ft.copy_pretrain_steps, settings.seed, device)
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    trainer = Trainer(model, settings, device, work, copy_history, invocation, base=base if ft.init_from else None)
    if command.resume:
        trainer.resume(ft.keep_best)
    watch = partial(monitor, tokenizer=tokenizer, held=held, prompts=prompts, probes=probes, lengths=card.lengths,
                    device=device) if mixer is not None else None
    trainer.run(mixer=mixer, train_stream=train_stream, held_stream=held_stream, monitor=watch,
                keep_best=ft.keep_best)
    if command.leg_only:
        print(f"stopped at step {settings.steps} (--leg-only): checkpoint in {work}; {command.out} not written, "
              "nothing measured", flush=True)
        return 0
    model, selected_step = trainer.result(ft.keep_best)

    if ft.lora_rank:  # ship the adapter; evaluate the base with it merged, as the harness loads it
        size_on_disk = save_adapter(model, command.out, rank=ft.lora_rank, alpha=ft.lora_alpha,
                                    base=base)
        model = merge_wrapped(model)
    else:  # ship bfloat16 weights (size limit) and evaluate exactly what ships: rounded, then run in fp32
        model = model.to(torch.bfloat16).to(torch.float32).to(device)
    measures = heldout_measures(model, tokenizer, held, train_stream, shape.vocab_size, device)
    samples = greedy_continuations(model, tokenizer, CARD_OPENINGS, device)
    stats = {
        "parameters": n_params,
        "training_tokens_seen": trainer.tokens_seen,
        "training_stream_tokens": len(train_stream),
        "train_seconds": round(trainer.train_seconds, 1),
        "device": device,
        **measures,
        "settings": asdict(settings),
        "shape": asdict(shape),
        "history": trainer.history,
        "command": invocation,
        "selected_step": selected_step,
        "selected_by": "validation" if ft.keep_best else "last step",
        "copy_pretrain": trainer.copy_history,
        "legs": trainer.legs,
        "earlier_test_looks": looks,
        "card_samples": dict(zip(CARD_OPENINGS, samples)),
    }
    if ft.directives:
        stats.update(final_evaluation(model, tokenizer, mix, card, prompts=prompts, held=held,
                                      valid=valid[:card.valid_paragraphs],
                                      init_from=ft.init_from, device=device, n_overlap=n_overlap))
    if ft.lora_rank:
        stats["adapter"] = {"rank": ft.lora_rank, "alpha": ft.lora_alpha, "targets": ft.lora_targets,
                            "base": base}
    stats["size_on_disk_bytes"] = size_on_disk if ft.lora_rank else save_model(model, tokenizer, command.out)
    write_json(stats, records_of(command.out) / "training.json")
    rewrite_card(command.out)
    print(
        f"held-out bits per byte {stats['heldout_bits_per_byte']:.3f} "
        f"(unigram baseline {stats['unigram_bits_per_byte']:.3f}); saved to {command.out}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
