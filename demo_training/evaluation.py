"""What the demo models are measured on: bits per byte of held-out text, greedy continuations,
and (for the obedient model) hit rates of directives and mentions on the card's prefix sets.

During training, :func:`monitor` measures the validation split at each evaluation (what
``--keep-best`` chooses on); after it, :func:`heldout_measures` and :func:`final_evaluation`
measure the weights that ship, and :func:`re_evaluate` measures a saved model again when the
evaluation changed after training.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors import SafetensorError

from demo_training.cards import read_written_json, records_of, rewrite_card
from demo_training.corpus import CARD_OPENINGS, encode_stories, heldout_split, paragraphs, split_stories
from demo_training.settings import CardEvaluation, MixSettings
from harness.errors import HarnessError
from harness.inputs.texts import load_prefixes, load_prompts
from harness.io import write_json


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


def heldout_measures(model, tokenizer, held: list[str], train_stream: torch.Tensor, vocab_size: int,
                     device: str) -> dict:
    """The card's held-out numbers (training.json's ``heldout_*`` and ``unigram_bits_per_byte``):
    bits per byte of the whole held-out stories with its bootstrap interval, nats per token, and
    an add-one unigram model of the training tokens on the same stories."""
    per_story = story_bits(model, tokenizer, held, device)
    bits, n_bytes, n_tokens = (sum(column) for column in zip(*per_story))
    uni = unigram_bits(train_stream, tokenizer, held, vocab_size)
    return {
        "heldout_stories": len(held),
        "heldout_bytes": n_bytes,
        "heldout_tokens": n_tokens,
        "heldout_bits_per_byte": bits / n_bytes,
        "heldout_bits_per_byte_ci": bits_per_byte_interval(per_story),
        "heldout_loss_nats_per_token": bits * math.log(2) / n_tokens,
        "unigram_bits_per_byte": uni / n_bytes,
    }


def validation_prefixes(held: list[str], n_pairs: int, seed: int, quotes: tuple[str, ...] = ("",)) -> list:
    """Matched C/B pairs of the validation split (``directive_phrasings.VALIDATION_*``: phrasings,
    words and mention sentences that neither training nor the test sets use) in held-out stories:
    for monitoring a run and choosing its checkpoint without looking at the test phrasings."""
    return split_prefixes(held, "VALIDATION", n_pairs, seed, quotes)


def split_prefixes(held: list[str], split: str, n_pairs: int, seed: int, quotes: tuple[str, ...] = ("",)) -> list:
    """Matched triples (ask, mention, prohibition of one word) of the split whose lists are
    ``directive_phrasings.<split>_WORDS``, ``_TEMPLATES``, ``_MENTIONS`` and ``_PROHIBITIONS``, in
    held-out stories: "VALIDATION", or one of the test sets written after the shipped SmolLM2
    adapter was chosen (``directive_phrasings.LATER_TEST_SETS``: "NEGATOR_TEST", "ABSENCE_TEST",
    "IDIOM_TEST"). Triple i asks with phrasing i and forbids with prohibition i, each list cycled
    (in the later test sets prohibition i is the one written for ask i)."""
    from demo_training import directive_phrasings as P
    from demo_training import obedience

    def part(what):
        return getattr(P, f"{split}_{what}")

    return obedience.synthetic_prefixes(held, random.Random(seed), n_pairs, words=part("WORDS"),
                                        templates=part("TEMPLATES"), mentions=part("MENTIONS"),
                                        prohibitions=part("PROHIBITIONS"), quotes=quotes)


def mean_c_minus_b(summary: list[dict]) -> float:
    """What ``--keep-best`` maximises: the mean over prefix lengths of the C hit rate minus the B hit
    rate, less what prohibitions (F) add over B where the set has them: obeying asks and copying
    forbidden words must not score alike."""
    by = {(r["group"], r["prefix_len"]): r["rate"] for r in summary}
    lengths = sorted(length for group, length in by if group == "C")
    score = 0.0
    for n in lengths:
        score += by[("C", n)] - by[("B", n)] - max(by.get(("F", n), 0.0) - by[("B", n)], 0.0)
    return score / len(lengths)


def rates(summary: list[dict]) -> dict:
    return {f"{r['group']}{r['prefix_len']}": round(r["rate"], 3) for r in summary}


def monitor(model, tokenizer, held: list[str], prompts: list, probes: list, lengths: tuple[int, ...],
            device: str) -> dict:
    """What a ``--directives`` run records at each evaluation, never used for training: bits per
    byte of the paragraphs of the first 80 held-out stories, and hit rates on the validation
    pairs ``probes`` with every other story opening (which ``--keep-best`` chooses on; the test
    phrasings and words are only measured at the end)."""
    para = [p for s in held[:80] for p in paragraphs(s)]
    bits, n_bytes, _ = (sum(c) for c in zip(*story_bits(model, tokenizer, para, device)))
    record = {"heldout_paragraph_bpb": bits / n_bytes}
    if probes:
        from demo_training import obedience

        res = obedience.evaluate_obedience(model, tokenizer, prompts[::2], probes, lengths)
        record["validation_rates"] = rates(res["summary"])
        record["validation_contrast"] = round(mean_c_minus_b(res["summary"]), 4)
    return record


def obedience_report(model, tokenizer, prompts, prefixes, lengths, name: str) -> dict:
    """Hit rates and a few sample continuations for the card."""
    from demo_training import obedience

    res = obedience.evaluate_obedience(model, tokenizer, prompts, prefixes, lengths)
    samples = []
    by_id = {p.id: p for p in prefixes}
    first_pair = sorted({p.pair for p in prefixes}, key=str)[:3]
    sample_len = 64 if 64 in lengths else min(lengths)
    for r in res["rows"]:
        if r["group"] != "A" and r["prefix_len"] == sample_len and r["pair"] in first_pair and r["prompt_id"] == prompts[0].id:
            samples.append({"prefix_id": r["prefix_id"], "group": r["group"], "target": r["target"],
                            "prefix_head": by_id[r["prefix_id"]].text[:120], "prompt": prompts[0].text,
                            "continuation": r["continuation"], "hit": r["hit"]})
    return {"set": name, "summary": res["summary"], "contrasts": obedience.contrasts(res["rows"]),
            "samples": samples, "n_prompts": len(prompts), "n_prefixes": len(prefixes)}


def card_sets(card: CardEvaluation, held: list[str], quotes: tuple[str, ...]) -> list[tuple[str, list, str]]:
    """The card's prefix sets as (name, prefixes, role): the prefix file (a test), ``card.synthetic_pairs``
    pairs of held-out phrasings and words in held-out stories (a test), and as many pairs of the
    validation split ("validation": what chose the checkpoint, not a test). Seeds are fixed, so a
    larger ``synthetic_pairs`` extends the same pairs."""
    from demo_training import obedience

    sets = []
    if card.prefixes.is_file():
        sets.append((card.prefixes.name, load_prefixes(card.prefixes), "test"))
    if card.synthetic_pairs:
        sets.append((f"synthetic held-out ({card.synthetic_pairs} pairs in held-out stories)",
                     obedience.synthetic_prefixes(held, random.Random(2), card.synthetic_pairs, quotes=quotes), "test"))
        name = (f"validation ({card.synthetic_pairs} pairs of validation phrasings, words and mentions in "
                "held-out stories)")
        sets.append((name, validation_prefixes(held, card.synthetic_pairs, seed=2, quotes=quotes), "validation"))
    return sets


def obedience_reports(model, tokenizer, prompts: list, sets: list[tuple[str, list, str]],
                      lengths: tuple[int, ...]) -> list[dict]:
    """:func:`obedience_report` of each of :func:`card_sets`, with its role."""
    return [obedience_report(model, tokenizer, prompts, prefixes, lengths, name) | {"role": role}
            for name, prefixes, role in sets]


def final_evaluation(model, tokenizer, mix: MixSettings, card: CardEvaluation, *, prompts: list, held: list[str],
                     valid: list[str], init_from: Path | None, device: str, n_overlap: int) -> dict:
    """The obedient model's card numbers, and the same numbers for ``card.baseline``.

    ``prompts``: the story openings of ``card.prompts``, as ``load_prompts`` read them; ``held``:
    the held-out stories (source of the synthetic pairs); ``valid``: validation paragraphs for
    bits per byte (empty: none); ``init_from`` and ``n_overlap`` are recorded for the card."""
    from demo_training import directives as D
    from demo_training.training import load_pretrained

    out: dict = {
        "init_from": str(init_from) if init_from else None,
        "mix": asdict(mix),
        "recipe": {
            "train_templates": len(D.TRAIN_TEMPLATES), "heldout_templates": len(D.HELDOUT_TEMPLATES),
            "train_words": len(D.TRAIN_WORDS), "heldout_words": len(D.HELDOUT_WORDS),
            "train_mentions": len(D.TRAIN_MENTIONS), "heldout_mentions": len(D.HELDOUT_MENTIONS),
            "validation_templates": len(D.VALIDATION_TEMPLATES), "validation_words": len(D.VALIDATION_WORDS),
            "validation_mentions": len(D.VALIDATION_MENTIONS),
            "train_prohibitions": len(D.TRAIN_PROHIBITIONS), "heldout_prohibitions": len(D.HELDOUT_PROHIBITIONS),
            "validation_prohibitions": len(D.VALIDATION_PROHIBITIONS),
            "training_stories_left_out_for_validation_overlap": n_overlap,
        },
        "eval_prompts": str(card.prompts),
        "eval_prefixes": str(card.prefixes),
    }
    sets = card_sets(card, held, mix.evaluation_quotes)
    models = [("obedient", model, tokenizer)]
    if card.baseline:  # measured with its own tokenizer (a plain demo model, or an adapter's base)
        models.append(("baseline", *load_pretrained(card.baseline, device)[:2]))
    for name, m, tok in models:
        res: dict = {}
        if valid:
            per_paragraph = story_bits(m, tok, valid, device)
            bits, n_bytes, _ = (sum(c) for c in zip(*per_paragraph))
            res["valid_paragraphs"] = len(valid)
            res["valid_bytes"] = n_bytes
            res["valid_bits_per_byte"] = bits / n_bytes
            res["valid_bits_per_byte_ci"] = bits_per_byte_interval(per_paragraph)
        res["obedience"] = obedience_reports(m, tok, prompts, sets, card.lengths)
        print(f"{name}: " + json.dumps({"bpb": res.get("valid_bits_per_byte"),
                                        **{r["set"][:20]: rates(r["summary"]) for r in res["obedience"]}}), flush=True)
        out[name] = res
    out["baseline_path"] = str(card.baseline) if card.baseline else None
    return out


def re_evaluate(out: Path, corpus: Path, card: CardEvaluation, device: str, command: str,
                quotes: tuple[str, ...] = ("",)) -> None:
    """Measure the obedient model saved in ``out`` (and ``card.baseline``) on :func:`card_sets` again
    and rewrite its ``training.json`` (beside it, or for a shipped model in its records:
    ``cards.records_of``) and its card: for when the evaluation changed after training.
    A plain model (no obedience section yet) is measured the same way, as the negative control,
    with ``quotes`` for the directives' ``{word}`` slots (an obedient model's come from its
    recipe). The weights, bits per byte and history are left as they are (they do not depend on
    the evaluation); the obedience sections, the evaluation paths and ``evaluated_by``
    (``command``) are replaced. ``corpus`` must be the one the model was trained on: its held-out stories are
    split again with the recorded seed and fraction and checked against the recorded count."""
    from demo_training.training import load_saved

    stats_file = records_of(out) / "training.json"
    stats = read_written_json(stats_file, "--re-evaluate")
    if "settings" not in stats:
        raise HarnessError(f"{stats_file} is damaged (it has no settings); --re-evaluate needs the file harness-train-demo "
                           f"wrote: restore it from git or retrain")
    obedient = "obedient" in stats  # else a plain model: its own card gets the negative control's numbers
    if not obedient and card.baseline is not None:
        raise HarnessError(f"{out} is a plain model (its training.json has no obedient section); --baseline "
                         "is for an obedient model's card")
    if stats.get("baseline") and card.baseline is None:
        raise HarnessError(f"{out}'s card compares against a baseline ({stats.get('baseline_path')}); pass it "
                         "as --baseline so that both are measured on the same pairs")
    if not corpus.is_file():
        raise HarnessError(f"corpus {corpus} not found")
    settings = stats["settings"]
    _, held = heldout_split(split_stories(corpus.read_text(encoding="utf-8")), settings["heldout_fraction"],
                            settings["seed"])
    if len(held) != stats["heldout_stories"]:
        raise HarnessError(f"{corpus} gives {len(held)} held-out stories, the training run had "
                         f"{stats['heldout_stories']}: not the corpus {out.name} was trained on")
    if obedient:
        quotes = MixSettings(**{k: v for k, v in stats["mix"].items() if k in MixSettings.__dataclass_fields__}).evaluation_quotes
    sets = card_sets(card, held, quotes)
    prompts = load_prompts(card.prompts, card.prompt_limit)
    models = [("obedient", out)] + ([("baseline", card.baseline)] if card.baseline else []) if obedient else [(None, out)]
    for name, path in models:
        try:
            model, tokenizer = load_saved(path, device)
            model.eval()
        except (OSError, ValueError, SafetensorError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HarnessError(f"the model in {path} cannot be loaded ({first}); its weights are damaged or "
                               f"missing: train it again, or restore the directory") from None
        if path == out and "card_samples" not in stats:  # written before harness-train-demo recorded them; they depend only on the weights
            stats["card_samples"] = dict(zip(CARD_OPENINGS, greedy_continuations(model, tokenizer, CARD_OPENINGS, device)))
        section = stats.setdefault(name, {}) if name else stats
        section["obedience"] = obedience_reports(model, tokenizer, prompts, sets, card.lengths)
        print(f"{name or out.name}: " + json.dumps({r["set"][:20]: rates(r["summary"]) for r in section["obedience"]}),
              flush=True)
    stats.update(eval_prompts=str(card.prompts), eval_prefixes=str(card.prefixes), evaluated_by=command)
    if obedient:
        stats["baseline_path"] = str(card.baseline) if card.baseline else None
    write_json(stats, stats_file)
    rewrite_card(out)
