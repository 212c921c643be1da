"""What the notes' validation scripts share: a saved model (argv[1]) on argv[2] CPU threads
(default 1), the held-out stories of the training corpus (`train-demo`'s split) and the story
openings of the card. Run the scripts from the repository root."""
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness.texts import load_prompts
from harness.train_demo import TrainSettings, heldout_split, split_stories


def load():
    """(tokenizer, model, held-out stories, story openings) for ``sys.argv[1]``."""
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    tok = AutoTokenizer.from_pretrained(sys.argv[1])
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
    stories = split_stories(Path("../shared/data/stories/tinystories_subset.txt").read_text(encoding="utf-8"))
    _, held = heldout_split(stories, TrainSettings.heldout_fraction, TrainSettings.seed)
    return tok, model, held, load_prompts(Path("harness/data/prompts_stories_en.jsonl"))
