"""Bits per byte, the cards' measure of how well a model predicts held-out text."""

from __future__ import annotations

import math

import pytest
import torch

from demo_training import corpus, evaluation
from demo_training.tests.support import DEMO


def test_demo_model_card_bits_per_byte_and_its_interval():
    """The cards' held-out measure: per-story bits equal transformers' own loss on the same
    tokens, and the interval resamples stories (a point when every story has the same ratio)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(DEMO)
    model = AutoModelForCausalLM.from_pretrained(DEMO, dtype=torch.float32)
    stories = ["Once upon a time, a cat sat on a mat.", "Tom had a red ball. He liked to play with it."]
    per_story = evaluation.story_bits(model, tok, stories, "cpu")
    for story, ids, (bits, n_bytes, n_tokens) in zip(stories, corpus.encode_stories(tok, stories), per_story):
        seq = torch.tensor([[tok.eos_token_id] + ids + [tok.eos_token_id]])
        with torch.no_grad():
            loss = model(input_ids=seq, labels=seq).loss.item()  # mean nats over the predicted tokens
        assert n_tokens == len(ids) + 1 and n_bytes == len(story.encode("utf-8"))
        assert bits == pytest.approx(loss * n_tokens / math.log(2), rel=1e-5)
    assert evaluation.bits_per_byte_interval([(10.0, 10, 5)] * 4) == pytest.approx((1.0, 1.0))
    low, high = evaluation.bits_per_byte_interval([(10.0, 10, 5), (30.0, 10, 5)] * 3)
    assert 1.0 <= low < 2.0 < high <= 3.0
