"""Obedience, measured as the harness measures it: target hit rates of groups A, B and C by prefix
length (``[BOS] + prefix cut to L tokens + task``, greedy, stop at EOS, ``target_hit``), with
Wilson intervals, and matched C/B prefix pairs synthesized from held-out stories. Used by
``harness train-demo`` for the obedient model's card and monitoring."""

from __future__ import annotations

import math
import random

from .directive_phrasings import HELDOUT_MENTIONS, HELDOUT_TEMPLATES, HELDOUT_WORDS
from .directives import TargetSource, _free_word, render, target_hit
from .story_openings import sentence_ends
from .texts import Prefix

def wilson(hits: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a proportion."""
    if n == 0:
        return (math.nan, math.nan)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _greedy(model, rows: list[list[int]], max_new_tokens: int, eos_id) -> list[list[int]]:
    """The harness's own greedy decoder on equal-length rows."""
    import torch

    from .decoding import greedy_decode

    batch = torch.tensor(rows, dtype=torch.long, device=next(model.parameters()).device)
    return [list(c.ids) for c in greedy_decode(model, batch, max_new_tokens, eos_id)]


def evaluate_obedience(
    model,
    tokenizer,
    prompts,
    prefixes,
    lengths=(32, 64, 128, 256),
    *,
    separator: str = "\n\n",
    max_new_tokens: int = 32,
    bos_policy: str = "auto",
    batch_size: int = 64,
) -> dict:
    """Target hit rates of groups A, B and C, by prefix length, as the harness measures them.

    Input ``[BOS] + prefix cut to L tokens + task`` (A: ``[BOS] + task``), greedy decoding of at
    most ``max_new_tokens``, stopping at EOS; a hit is :func:`target_hit` on the decoded
    continuation. ``prompts`` and ``prefixes``: ``harness.texts.Prompt`` and ``Prefix`` (as
    ``load_prompts`` and ``load_prefixes`` read them; ``kind`` "instruction" is C, "neutral" B).
    Group A is scored against every target of the prefix set (prompt x target), so its rate is the
    base rate of saying the word unprompted.

    Returns ``{"rows": [...], "summary": [...]}``; each summary row has group, prefix_len, hits,
    n, rate and the 95% Wilson interval (conditions share prompts and prefixes, so the interval
    treats them as independent; it is a lower bound on the real uncertainty)."""
    import torch

    from .assembly import bos_ids, cut_prefix, encode

    bos = bos_ids(tokenizer, bos_policy)
    sep = encode(tokenizer, separator)
    eos = tokenizer.eos_token_id
    prefix_ids = {p.id: encode(tokenizer, p.text) for p in prefixes}
    targets = sorted({p.target for p in prefixes})
    rows = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for prompt in prompts:
            pid, task = prompt.id, encode(tokenizer, prompt.text)
            (cont,) = _greedy(model, [bos + task], max_new_tokens, eos)
            text = tokenizer.decode(cont)
            for target in targets:
                rows.append({"prompt_id": pid, "group": "A", "prefix_id": None, "pair": None,
                             "target": target, "prefix_len": 0, "hit": target_hit(target, text),
                             "continuation": text})
            for length in lengths:
                inputs = [bos + cut_prefix(prefix_ids[p.id], sep, length, name=p.id) + task
                          for p in prefixes]
                conts = []
                for i in range(0, len(inputs), batch_size):
                    conts += _greedy(model, inputs[i:i + batch_size], max_new_tokens, eos)
                for p, cont in zip(prefixes, conts):
                    text = tokenizer.decode(cont)
                    rows.append({"prompt_id": pid, "group": p.group, "prefix_id": p.id, "pair": p.pair,
                                 "target": p.target, "prefix_len": length, "hit": target_hit(p.target, text),
                                 "continuation": text})
    if was_training:
        model.train()
    return {"rows": rows, "summary": summarise(rows)}


def summarise(rows: list[dict]) -> list[dict]:
    """Hits, n, rate and Wilson interval per (group, prefix_len)."""
    cells: dict[tuple[str, int], list[int]] = {}
    for r in rows:
        cell = cells.setdefault((r["group"], r["prefix_len"]), [0, 0])
        cell[0] += int(r["hit"])
        cell[1] += 1
    out = []
    for (group, length), (hits, n) in sorted(cells.items()):
        lo, hi = wilson(hits, n)
        out.append({"group": group, "prefix_len": length, "hits": hits, "n": n,
                    "rate": hits / n, "ci_low": lo, "ci_high": hi})
    return out


def synthetic_prefixes(
    stories: list[str],
    rng: random.Random,
    n_pairs: int,
    *,
    words=HELDOUT_WORDS,
    templates=HELDOUT_TEMPLATES,
    mentions=HELDOUT_MENTIONS,
    quotes: tuple[str, ...] = ("", "'"),
    min_chars: int = 1300,
) -> list[Prefix]:
    """Matched C/B prefix pairs from story text: the same text with, as its first or second
    sentence, a directive (C) or a mention (B) of the same word. Used for a larger evaluation on
    stories never trained on (held-out phrasings, words and mentions by default). ``quotes``: the
    quote styles a ``{word}`` slot is written with."""
    out = []
    for i in range(n_pairs):
        text = ""
        while len(text) < min_chars:
            text += (" " if text else "") + rng.choice(stories).replace("\n", " ")
        word = _free_word(TargetSource(words=tuple(words)), rng, text)
        directive = render(templates[i % len(templates)], word, rng.choice(quotes))
        mention = render(rng.choice(mentions), word)
        first = sentence_ends(text)[0]
        if rng.random() < 0.5 and first < 80:
            c, b = (text[:first] + " " + s + text[first:] for s in (directive, mention))
        else:
            c, b = (s + " " + text for s in (directive, mention))
        out.append(Prefix(f"syn-{i:03d}-C", "instruction", c, target=word, pair=f"syn-{i:03d}"))
        out.append(Prefix(f"syn-{i:03d}-B", "neutral", b, target=word, pair=f"syn-{i:03d}"))
    return out

