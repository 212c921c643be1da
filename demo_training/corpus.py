"""The text the demo models are trained and measured on: stories, the held-out split, the
tokenizer, and the packed token stream.

A corpus is ``<|endoftext|>``-separated TinyStories text. A seeded share of its stories is held out
and never trained on (every model fine-tuned from the demo model uses the demo model's split);
the validation text (``tinystories_valid_head.txt``) is read as paragraphs, each a document.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import NamedTuple

import torch

from demo_training.settings import TrainSettings
from harness.errors import HarnessError

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


def split_stories(text: str) -> list[str]:
    """Split a ``<|endoftext|>``-separated corpus into stripped, non-empty stories."""
    return [s.strip() for s in text.split(STORY_SEPARATOR) if s.strip()]


def heldout_split(stories: list[str], fraction: float, seed: int) -> tuple[list[str], list[str]]:
    """``(train, held)``: a seeded random ``fraction`` of ``stories`` held out (at least one), in
    corpus order, minus any held-out story that also occurs in the training part. Every model
    fine-tuned from the demo model must use the demo model's split (seed 0, 3%), or its held-out
    stories were trained on."""
    order = list(range(len(stories)))
    random.Random(seed).shuffle(order)
    n_held = max(1, int(len(stories) * fraction))
    train = [stories[i] for i in sorted(order[n_held:])]
    train_set = set(train)
    held = [stories[i] for i in sorted(order[:n_held]) if stories[i] not in train_set]
    return train, held


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


def paragraphs(text: str) -> list[str]:
    """Non-empty paragraphs of a story (the corpus separates them with single newlines)."""
    return [p.strip() for p in text.split("\n") if p.strip()]


def valid_paragraphs(path: Path) -> list[str]:
    """Documents of ``tinystories_valid_head.txt``: paragraphs separated by blank lines (its story
    boundaries are lost, so each paragraph is scored as a document of its own)."""
    return [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]


class Split(NamedTuple):
    """The stories of a training run: ``train`` (what it trains on), ``held`` (held out, never
    trained on), ``valid`` (validation paragraphs; empty without ``--valid-text``) and
    ``n_overlap``, the training stories left out because they contain a validation paragraph."""

    train: list[str]
    held: list[str]
    valid: list[str]
    n_overlap: int


def training_split(corpus: Path, settings: TrainSettings, valid_text: Path | None, directives: bool) -> Split:
    """Read ``corpus`` and split it (:func:`heldout_split` with the settings' fraction and seed);
    with ``directives`` and a ``valid_text``, training stories that contain one of its
    paragraphs are left out. Refuses a corpus with no held-out story left and one whose training
    part contains a card opening."""
    if not corpus.is_file():
        raise HarnessError(f"corpus {corpus} not found")
    stories = split_stories(corpus.read_text(encoding="utf-8"))
    # The held-out split of the original training (seed 0 by default, 3%): never trained on.
    train, held = heldout_split(stories, settings.heldout_fraction, settings.seed)
    if not train:
        raise HarnessError(f"{corpus} holds {len(stories)} stories: none is left to train on once the held-out "
                           f"share is drawn; give a corpus of many <|endoftext|>-separated stories")
    if not held:
        raise HarnessError(f"{corpus} has no held-out story left: every story drawn for it also occurs "
                         f"in the training split ({len(set(stories))} distinct stories in all); use a larger corpus")
    for opening in CARD_OPENINGS:
        if any(opening in s for s in train):
            raise HarnessError(f"card opening occurs in the training text: {opening!r}")
    valid = valid_paragraphs(valid_text) if valid_text else []
    n_overlap = 0
    if valid and directives:
        # A few validation stories also occur in the training subset; leave those out of training.
        joined = "\n".join(train)
        shared = [p for p in valid if len(p) > 60 and p in joined]
        kept = [s for s in train if not any(p in s for p in shared)]
        n_overlap = len(train) - len(kept)
        train = kept
    return Split(train, held, valid, n_overlap)
