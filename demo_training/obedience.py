"""Obedience, measured by the harness itself: target hit rates of groups A, B and C by prefix
length (``[BOS] + prefix cut to L tokens + task``, greedy, stop at EOS, ``target_hit``), computed
by the harness's engine (``harness.measure.engine``, driven by ``harness.measure.driver.drive``
over the conditions ``harness.inputs.conditions.build_conditions`` assembles), with the
harness's crossed intervals (story openings and prefixes resampled), C minus B per length, and
matched C/B prefix pairs synthesized from held-out stories. Used by ``harness-train-demo`` for the
obedient model's card and monitoring.

Hits are not independent: some pairs (a phrasing with a word) are obeyed for almost every opening
and others for almost none, so the unit of replication is the pair and the opening, not the
condition. The intervals here say so (:func:`summarise`, :func:`c_minus_b_by_length`)."""

from __future__ import annotations

import random

from demo_training.directive_phrasings import HELDOUT_MENTIONS, HELDOUT_PROHIBITIONS, HELDOUT_TEMPLATES, HELDOUT_WORDS
from demo_training.directives import TargetSource, _free_word, render
from demo_training.story_openings import sentence_ends
from harness.inputs.checks import CHECKS
from harness.inputs.texts import Prefix


def continuations(model, tokenizer, prompts, prefixes, lengths, *, separator: str, max_new_tokens: int,
                  bos_policy: str, batch_size: int) -> dict[tuple[str, str | None, int], str]:
    """Each condition's greedy continuation, decoded, as a sweep computes it: the harness's
    conditions (raw placement, no isolation) through its engine (no attention capture), stopping
    at the tokenizer's EOS and every EOS of the model's generation config. Keyed by (prompt id,
    prefix id, prefix length); A, the prompt alone, is (prompt id, None, 0). A condition that fails
    raises its error: a measurement with holes would pass for a whole one."""
    from harness.inputs.conditions import build_conditions
    from harness.measure.driver import drive
    from harness.measure.engine import Engine
    from harness.model.decoding import stop_ids
    from harness.model.resources import prefix_cache_bytes

    conditions = build_conditions(tokenizer, prompts, prefixes, groups=["A", "B", "C"], lengths=list(lengths),
                                  separator=separator, bos_policy=bos_policy)
    device = str(next(model.parameters()).device)
    engine = Engine(model, stop_ids(model, tokenizer), max_new_tokens, attention=False,
                    prefix_cache_bytes=prefix_cache_bytes(None, device))
    texts = {}

    def keep(result, reference, computed_alone) -> None:
        c = result.condition
        texts[(c.prompt_id, c.prefix_id, c.prefix_len)] = tokenizer.decode(list(result.continuation.ids))

    outcome = drive(engine, conditions, batch_size=batch_size, on_result=keep, progress=False)
    if outcome.failures:
        raise outcome.failures[0][1]
    return texts


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
    """Target hit rates of groups A, B and C, by prefix length, as a sweep measures them.

    Input ``[BOS] + prefix cut to L tokens + separator + task`` (A: ``[BOS] + task``), greedy
    decoding of at most ``max_new_tokens`` (:func:`continuations`); a hit is the sweep's
    ``target_hit`` on the decoded continuation (``harness.inputs.checks``: the word is there,
    whatever the prefix asks of it). ``prompts`` and ``prefixes``: ``harness.inputs.texts.Prompt``
    and ``Prefix`` (as ``load_prompts`` and ``load_prefixes`` read them; ``kind`` "instruction" is
    C, "neutral" B). Group A is scored against every target of the prefix set (prompt x target, each
    once), so its rate is the base rate of saying the word unprompted. An instruction that forbids
    its word (``check`` "absent") is group ``F``: its hit is the word written although forbidden.

    Returns ``{"rows": [...], "summary": [...]}`` (:func:`summarise`); :func:`c_minus_b_by_length` of the
    rows gives C minus B with its interval and p (slower: a permutation test per length)."""
    was_training = model.training
    model.eval()
    try:
        texts = continuations(model, tokenizer, prompts, prefixes, lengths, separator=separator,
                              max_new_tokens=max_new_tokens, bos_policy=bos_policy, batch_size=batch_size)
    finally:
        if was_training:
            model.train()
    goals = {p.target: p.goal for p in prefixes}  # A is scored as each target's prefixes score their word
    rows = []
    for prompt in prompts:
        pid = prompt.id
        text = texts[(pid, None, 0)]
        for target in sorted(goals):
            rows.append({"prompt_id": pid, "group": "A", "prefix_id": None, "pair": None, "target": target,
                         "prefix_len": 0, "hit": goals[target].present(text), "continuation": text})
        for length in lengths:
            for p in prefixes:
                text = texts[(pid, p.id, length)]
                rows.append({"prompt_id": pid, "group": group_of(p), "prefix_id": p.id, "pair": p.pair,
                             "target": p.target, "prefix_len": length, "hit": p.goal.present(text),
                             "continuation": text})
    return {"rows": rows, "summary": summarise(rows)}


def group_of(prefix: Prefix) -> str:
    """B (mentions the word), C (asks for it) or F (forbids it: an instruction whose check is absent)."""
    goal = prefix.goal
    return "F" if prefix.group == "C" and goal is not None and CHECKS[goal.check].wants_word is False else prefix.group


def _table(rows: list[dict]):
    import pandas as pd

    return pd.DataFrame(rows).assign(hit=lambda d: d["hit"].astype(float))


def summarise(rows: list[dict]) -> list[dict]:
    """Per (group, prefix_len): hits, n (conditions), rate, and the 95% interval of
    ``harness.analysis.rates.rate_summary`` (openings and prefixes random: Wilson at the crossing's
    effective sample size; A, which has no prefix, at the openings' count), with ``ci_method``,
    ``n_prompts`` and ``n_prefixes``."""
    from harness.analysis.rates import rate_summary

    table = rate_summary(_table(rows), hit="hit", by=["group", "prefix_len"])
    return [{"group": r.group, "prefix_len": int(r.prefix_len), "hits": int(r.n_hits), "n": int(r.n_conditions),
             "rate": float(r.rate), "ci_low": float(r.ci_low), "ci_high": float(r.ci_high),
             "ci_method": r.ci_method, "n_prompts": int(r.n_prompts), "n_prefixes": int(r.n_prefixes)}
            for r in table.itertuples()]


def c_minus_b_by_length(rows: list[dict], seed: int = 0, high: str = "C") -> list[dict]:
    """``high`` (C; or F, the prohibitions) minus B hit rate per prefix length, as the harness's
    report computes it (``harness.analysis.crossed.compare_groups``): the MOVER interval of the two
    crossed Wilson intervals (openings and matched pairs random) and the prefix-permutation p (labels flipped
    within pairs; no interval, NaN with ``ci_note`` saying why, below 3 pairs). Keys: prefix_len,
    difference, ci_low, ci_high, ci_method, ci_note, p_perm, n_pairs,
    n_prompts, and ``contrast`` ("C - B" or "F - B")."""
    from harness.analysis.crossed import compare_groups

    table = _table([r for r in rows if r["group"] in ("B", high)])
    if table.empty or table.group.nunique() < 2:
        return []
    out = compare_groups(table.assign(prompt_id=table.prompt_id.astype(str)), "hit", high=high, by=["prefix_len"],
                         seed=seed, rate=True)
    return [{"prefix_len": int(r.prefix_len), "difference": float(r.statistic), "ci_low": float(r.ci_low),
             "ci_high": float(r.ci_high), "ci_method": r.ci_method, "ci_note": r.ci_note, "p_perm": float(r.p_perm),
             "n_pairs": int(r.n_prefixes_high), "n_prompts": int(r.n_prompts), "contrast": f"{high} - B"}
            for r in out.itertuples()]


def contrasts(rows: list[dict], seed: int = 0) -> list[dict]:
    """C minus B and, where the set forbids words, F minus B (:func:`c_minus_b_by_length`)."""
    return c_minus_b_by_length(rows, seed) + c_minus_b_by_length(rows, seed, high="F")


def synthetic_prefixes(
    stories: list[str],
    rng: random.Random,
    n_pairs: int,
    *,
    words=HELDOUT_WORDS,
    templates=HELDOUT_TEMPLATES,
    mentions=HELDOUT_MENTIONS,
    prohibitions=HELDOUT_PROHIBITIONS,
    quotes: tuple[str, ...] = ("", "'"),
    min_chars: int = 1300,
) -> list[Prefix]:
    """Matched prefixes from story text: the same text with, as its first or second sentence, a
    directive (C), a mention (B) and, with ``prohibitions``, a prohibition (a second C whose check
    is ``absent``) of the same word. Used for a larger evaluation on stories never trained on
    (held-out phrasings, words, mentions and prohibitions by default). ``quotes``: the quote styles
    a ``{word}`` slot is written with. The random draws do not depend on ``prohibitions``, so a
    set with them holds the same C/B pairs as one without."""
    out = []
    for i in range(n_pairs):
        text = ""
        while len(text) < min_chars:
            text += (" " if text else "") + rng.choice(stories).replace("\n", " ")
        word = _free_word(TargetSource(words=tuple(words)), rng, text)
        quote = rng.choice(quotes)
        directive = render(templates[i % len(templates)], word, quote)
        mention = render(rng.choice(mentions), word)
        sentences = [directive, mention]
        if prohibitions:
            sentences.append(render(prohibitions[i % len(prohibitions)], word, quote))
        first = sentence_ends(text)[0]
        if rng.random() < 0.5 and first < 80:
            texts = [text[:first] + " " + s + text[first:] for s in sentences]
        else:
            texts = [s + " " + text for s in sentences]
        pair = f"syn-{i:03d}"
        out.append(Prefix(f"{pair}-C", "instruction", texts[0], target=word, pair=pair))
        out.append(Prefix(f"{pair}-B", "neutral", texts[1], target=word, pair=pair))
        if prohibitions:
            out.append(Prefix(f"{pair}-F", "instruction", texts[2], target=word, pair=pair, check="absent"))
    return out

