"""The obedient model's training rows (``--directives``): :class:`DirectiveMixer` mixes
synthesized directive, mention and plain examples, copy rows and plain story text into each
step's batch; :func:`copy_pretrain` grows copying heads before the fine-tuning starts.

The examples themselves are built by ``demo_training.directives`` (the recipe); this module
decides how many of each kind a step gets, how they are weighted, and how they are padded.
"""

from __future__ import annotations

import json
import random
from typing import NamedTuple

import torch

from demo_training.corpus import encode_stories, paragraphs
from demo_training.settings import MixSettings
from demo_training.training import token_losses


class Encoded(NamedTuple):
    """One synthesized example as token ids: ``ids`` (after an end of text), ``start`` (where the
    continuation starts), ``target_pos`` (the indices of the asked word's tokens in the
    continuation), ``forbidden`` (a prohibition's forbidden word's first token, as a story writes it:
    after a space) and ``trained``: False for a counterfactual row, which is trained only to not
    write the forbidden word where the ask's continuation wrote it (no cross-entropy)."""

    ids: list[int]
    start: int
    target_pos: list[int]
    forbidden: int | None
    trained: bool = True


class DirectiveMixer:
    """Training batches for the obedient model, deterministic per step (so a resumed run sees
    exactly the batches it would have seen).

    A batch has ``batch_size`` rows: ``round(batch_size * synth_fraction)`` synthesized examples
    (one per row, so no directive can leak into another example; with ``paired_prohibitions`` a
    prohibition's slot holds its matched ask too, and with ``counterfactual_rows`` a third row, so
    the batch grows by those) and plain rows of whole stories or paragraphs packed up to
    ``plain_len`` tokens. Rows are right-padded (padding has loss weight 0)
    and grouped by length into micro-batches of ``micro_batch`` rows."""

    def __init__(self, tokenizer, stories: list[str], mix: MixSettings, seq_len: int, seed: int):
        from harness.inputs.assembly import encode

        self.tokenizer, self.stories, self.mix, self.seq_len, self.seed = tokenizer, stories, mix, seq_len, seed
        self.eot = tokenizer.eos_token_id
        self.sep = encode(tokenizer, "\n\n")
        self.story_ids = encode_stories(tokenizer, stories)
        self.paragraph_texts = [p for s in stories for p in paragraphs(s)]
        from demo_training import directives as D

        self.stems = D.corpus_stems(stories) if mix.nonce_stems else []
        self.para_ids = encode_stories(tokenizer, self.paragraph_texts)
        vocab = D.vocabulary_words(tokenizer, stories[:2000]) if mix.vocab_target_share else []
        self.source = D.TargetSource(nonce_prob=mix.nonce_prob, stems=tuple(self.stems), vocab=tuple(vocab),
                                     vocab_share=mix.vocab_target_share,
                                     quotes=D.TargetSource.quotes if mix.quoted_targets else ("",))
        special = set(tokenizer.all_special_ids)
        self.copy_pool = [i for i in range(len(tokenizer)) if i not in special]

    def _plain_item(self, rng: random.Random) -> list[int]:
        pool = self.para_ids if rng.random() < self.mix.paragraph_fraction else self.story_ids
        return [self.eot] + pool[rng.randrange(len(pool))]

    def _draw_kind(self, rng: random.Random) -> str:
        r = rng.random()
        shares = (("directive", self.mix.directive_share), ("mention", self.mix.mention_share),
                  ("prohibition", self.mix.prohibition_share))
        edge = 0.0
        for name, share in shares:
            edge += share
            if r < edge:
                return name
        return "plain"

    def _texts(self, rng: random.Random) -> tuple[str, str]:
        """A story to continue and a context (other stories) of at least 1,400 characters."""
        story = rng.choice(self.stories)
        context = rng.choice(self.stories)
        while len(context) < 1400:
            context += "\n" + rng.choice(self.stories)
        return story, context

    def _synth_items(self, rng: random.Random, max_context: int) -> list[Encoded]:
        """One synthesized example, or with ``paired_prohibitions`` a prohibition and its matched ask
        (``demo_training.contrast_pairs``), encoded by :meth:`_encode`."""
        from demo_training import directives as D

        kind = self._draw_kind(rng)
        if kind == "prohibition" and self.mix.paired_prohibitions:
            return self._pair_items(rng, max_context)
        while True:
            story, context = self._texts(rng)
            templates, prohibitions = D.TRAIN_TEMPLATES, D.TRAIN_PROHIBITIONS
            # (only these kinds draw: the recipes before prohibitions keep their random streams)
            grammar = self.mix.phrasing_grammar
            if kind in ("directive", "prohibition") and grammar and rng.random() < grammar:
                if kind == "directive":
                    templates = (D.compose_directive(rng),)
                else:
                    prohibitions = (D.compose_prohibition(rng),)
            ex = D.synthesize(kind, context, story, rng, max_continuation_chars=self.mix.continuation_chars,
                              source=self.source, templates=templates, prohibitions=prohibitions)
            if ex is not None:
                return [self._encode(ex, rng, max_context)]

    def _pair_items(self, rng: random.Random, max_context: int) -> list[Encoded]:
        """A matched ask and prohibition, cut to the same context length where their sentences allow."""
        from demo_training import contrast_pairs as P
        from demo_training import directives as D

        while True:
            story, context = self._texts(rng)
            if self.mix.phrasing_grammar and rng.random() < self.mix.phrasing_grammar:
                ask, forbid = P.compose_pair(rng, self.mix.made_up_verbs, self.mix.clause_pairs,
                                             self.mix.label_pairs, self.mix.negation_pairs)
            else:
                ask, forbid = rng.choice(D.TRAIN_TEMPLATES), rng.choice(D.TRAIN_PROHIBITIONS)
            pair = P.synthesize_pair(context, story, rng, directive_template=ask, prohibition_template=forbid,
                                     source=self.source, max_continuation_chars=self.mix.continuation_chars)
            if pair is not None:
                state = rng.getstate()
                ask = self._encode(pair[0], rng, max_context)
                rng.setstate(state)
                forbid = self._encode(pair[1], rng, max_context)
                if not self.mix.counterfactual_rows or not ask.target_pos:
                    return [ask, forbid]
                # the prohibition's context, then the ask's continuation: where it writes the word,
                # the forbidden word's probability is pushed down (free generation fails right there)
                shift = forbid.start - ask.start
                counterfactual = Encoded(forbid.ids[:forbid.start] + ask.ids[ask.start:], forbid.start,
                                         [j + shift for j in ask.target_pos], forbid.forbidden, trained=False)
                return [ask, forbid, counterfactual]

    def _encode(self, ex, rng: random.Random, max_context: int) -> Encoded:
        """Token ids of example ``ex`` (after an end of text), the index where its continuation
        starts, the indices of the target's tokens in the continuation, and for a prohibition the
        forbidden word's first token (as a story writes it: after a space)."""
        from demo_training import directives as D
        from harness.inputs.assembly import encode

        ids, start = D.encode_example(self.tokenizer, ex, rng, separator_ids=self.sep,
                                      max_context_tokens=max_context)
        ids = [self.eot] + ids
        start += 1
        target_pos: list[int] = []
        if ex.target:
            tgt = encode(self.tokenizer, " " + ex.target)
            for j in range(start, len(ids) - len(tgt) + 1):
                if ids[j:j + len(tgt)] == tgt:
                    target_pos = list(range(j, j + len(tgt)))
                    break
        forbidden = encode(self.tokenizer, " " + ex.mentioned[0])[0] if ex.kind == "prohibition" else None
        # No end of text after the clipped continuation: the story goes on (padding is not trained).
        return Encoded(ids, start, target_pos, forbidden)

    def _copy_item(self, rng: random.Random) -> list[int]:
        """A text and then the same text again: a list of made-up and real words, or a paragraph.

        The plain model cannot copy a word it has seen once (it gives a made-up name repeated in
        a story a log-probability of about -8): it lacks the induction heads that larger models
        learn. Repeated text is the quickest way to grow them, and copying is what obeying needs."""
        from demo_training import directives as D
        from harness.inputs.assembly import encode

        if rng.random() < self.mix.copy_list_share:
            # Made-up words only: with real nouns mixed in, copying did not start within 300 steps;
            # with made-up words alone it starts within 50.
            words = [self.source.draw(rng) if self.source.vocab else D.nonce_word(rng, self.stems)
                     for _ in range(rng.randint(*self.mix.copy_words))]
            text = " ".join(words)
        else:
            text = rng.choice(self.paragraph_texts)
        once = encode(self.tokenizer, text)[:120]
        ids = [self.eot] + once
        for _ in range(self.mix.copy_repeats - 1):
            ids += encode(self.tokenizer, "\n") + once
        return ids

    def _random_copy_item(self, rng: random.Random) -> tuple[list[int], list[float]]:
        """Random tokens of the whole vocabulary written two or three times, and loss weights that
        train only the repeats (the first copy cannot be predicted)."""
        once = [rng.choice(self.copy_pool) for _ in range(rng.randint(*self.mix.random_copy_tokens))]
        repeats = rng.choice((2, 2, 3))
        return [self.eot] + once * repeats, [0.0] * (1 + len(once)) + [1.0] * (len(once) * (repeats - 1))

    def _synth_row(self, item: Encoded, span: int
                   ) -> tuple[list[int], list[float], list[int]]:
        """Token ids, loss weights and avoid marks of one encoded synthesized example."""
        ids = item.ids[:span]
        if not item.trained:
            avoid = [-1] * len(ids)
            if item.target_pos and item.target_pos[0] < len(ids):
                avoid[item.target_pos[0]] = item.forbidden
            return ids, [0.0] * len(ids), avoid
        w = [1.0] * len(ids)
        for j in range(item.start, min(item.start + self.mix.answer_window, len(ids))):
            w[j] = self.mix.answer_weight
        for j in item.target_pos:
            if j < len(ids):
                w[j] = self.mix.target_weight
        avoid: list[int] = []
        if item.forbidden is not None:
            avoid = [-1] * len(ids)
            window = self.mix.unlikelihood_window or self.mix.answer_window
            for j in range(item.start, min(item.start + window, len(ids))):
                avoid[j] = item.forbidden
        return ids, w, avoid

    def max_context(self, step: int, total_steps: int) -> int:
        """Curriculum: short contexts for the first ``curriculum`` share of the steps."""
        if step < self.mix.curriculum * total_steps:
            return self.mix.curriculum_context_tokens
        return self.mix.max_context_tokens

    def batch(self, step: int, batch_size: int, total_steps: int
              ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Micro-batches ``(tokens [b, T + 1], loss weights [b, T], avoid [b, T])`` of training step
        ``step``: ``avoid`` holds, at each of a prohibition's first ``unlikelihood_window`` (or
        ``answer_window``) continuation positions, the forbidden word's first token, whose
        probability there the unlikelihood term pushes down (-1 elsewhere)."""
        rng = random.Random(self.seed * 1_000_003 + step)
        span = self.seq_len + 1
        n_synth = round(batch_size * self.mix.synth_fraction)
        warm = step < self.mix.copy_warmup * total_steps
        n_copy = round(batch_size * (self.mix.copy_warmup_fraction if warm else self.mix.copy_fraction))
        n_synth = min(n_synth, batch_size - n_copy)
        rows = []
        for i in range(batch_size):
            avoid: list[int] = []
            if i >= batch_size - n_copy:
                ids = self._copy_item(rng)[:span]
                w = [1.0] * len(ids)
            elif i < n_synth:
                # a matched pair is two rows: the step is one row longer than batch_size then
                items = self._synth_items(rng, self.max_context(step, total_steps))
                rows += [self._synth_row(item, span) for item in items]
                continue
            else:
                ids = []
                while len(ids) < self.mix.plain_len:
                    ids += self._plain_item(rng)
                ids = ids[:span]
                w = [1.0] * len(ids)
            rows.append((ids, w, avoid))
        rows += [(*self._random_copy_item(rng), []) for _ in range(self.mix.random_copy_rows)]
        rows.sort(key=lambda r: len(r[0]))
        out = []
        for i in range(0, len(rows), self.mix.micro_batch):
            group = rows[i:i + self.mix.micro_batch]
            width = max(len(ids) for ids, _, _ in group)
            tokens = [ids + [self.eot] * (width - len(ids)) for ids, _, _ in group]
            weights = [w[1:] + [0.0] * (width - len(w)) for _, w, _ in group]
            # like the weights, avoid[j] is about the token at position j + 1 (none: -1 everywhere)
            avoid = [(a or [-1] * len(ids))[1:] + [-1] * (width - len(ids)) for ids, _, a in group]
            out.append((torch.tensor(tokens, dtype=torch.long), torch.tensor(weights, dtype=torch.float32),
                        torch.tensor(avoid, dtype=torch.long)))
        return out


def copy_pretrain(model, tokenizer, steps: int, seed: int, device: str, lr: float = 1e-3, rows: int = 16) -> list[dict]:
    """Grow copying ("induction") heads before the directive fine-tuning.

    The plain model cannot copy a word it has seen once: a made-up word listed twice gets the
    same loss the second time as the first. Obeying "put the word X in the next story" for a word
    never trained on needs exactly that ability, and learning it from directive examples alone
    is slow. Rows of eight made-up words (at most 30 tokens), written three times, at a constant
    learning rate make the second and third copies predictable within about 100 steps. Returns a
    short history: loss of the first and of the third copy."""
    from demo_training import directives as D
    from harness.inputs.assembly import encode

    rng = random.Random(seed + 17)
    newline = encode(tokenizer, "\n")
    eot = tokenizer.eos_token_id
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    history = []
    for step in range(steps):
        seqs = []
        for _ in range(rows):
            once = encode(tokenizer, " ".join(D.nonce_word(rng) for _ in range(8)))[:30]
            seqs.append(([eot] + once + newline + once + newline + once, len(once)))
        width = max(len(ids) for ids, _ in seqs)
        batch = torch.tensor([ids + [eot] * (width - len(ids)) for ids, _ in seqs], device=device)
        mask = torch.zeros(rows, width - 1, device=device)
        for i, (ids, _) in enumerate(seqs):
            mask[i, : len(ids) - 1] = 1
        ce = token_losses(model, batch)
        loss = (ce * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if (step + 1) % 25 == 0 or step + 1 == steps:
            first = sum(ce[i, :n].mean().item() for i, (_, n) in enumerate(seqs)) / rows
            third = sum(ce[i, 2 * n + 2: 3 * n + 2].mean().item() for i, (_, n) in enumerate(seqs)) / rows
            history.append({"copy_step": step + 1, "loss": loss.item(), "first_copy_loss": first,
                            "third_copy_loss": third})
            print(f"copy pre-training step {step + 1}: " + json.dumps(history[-1]), flush=True)
    return history
