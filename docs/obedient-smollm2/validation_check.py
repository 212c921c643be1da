"""The validation check that decides whether a checkpoint of the SmolLM2 adapter run gets a test
look (issue #28; README.md here): 10 validation pairs (``validation_prefixes(held, 10, seed=1)``:
phrasings, words and mentions that neither training nor the test sets use) x the card's 6 story
openings (the first 6 of ``prompts_stories_en.jsonl``, as ``--eval-prompt-limit 6``), prefix
lengths 32 / 64 / 128, greedy 32 tokens, with the checkpoint's adapter merged into SmolLM2. It
passes when asked >= 0.7, forbidden <= 0.1 and mentioned <= 0.1 at every length.

    .venv/bin/python docs/obedient-smollm2/validation_check.py CHECKPOINT OUT.json [STRIDE]

CHECKPOINT: a ``train-demo`` checkpoint (``OUT.work/checkpoint.pt``; whole-model or adapter-only)
or a shipped ``adapter.safetensors``. STRIDE 4 takes openings 1, 5, 9, 13, 17, 21 instead (the
check before legs 5-9). About 4 minutes on two CPU cores. Run from the repository root."""

import json
import sys
from pathlib import Path

import torch

from harness.config import DATA_DIR
from harness.demo import obedience
from harness.demo.corpus import training_split
from harness.demo.evaluation import mean_c_minus_b, validation_prefixes
from harness.demo.settings import FineTuning, TrainSettings
from harness.demo.training import load_pretrained, load_weights, trained_parameter_names
from harness.errors import HarnessError
from harness.inputs.texts import load_prompts
from harness.model.adapters import add_adapters, merge_wrapped

LENGTHS = (32, 64, 128)


def load_checkpoint(path: Path, base: dict) -> dict:
    if path.suffix == ".safetensors":  # a shipped adapter: the tensors a checkpoint would hold
        from safetensors.torch import load_file

        return {"model": load_file(path), "frozen_base": base, "step": "shipped"}
    return torch.load(path, weights_only=True)


def held_out_stories() -> list[str]:
    """The held-out stories of the run's corpus split (the synthetic pairs are made from them)."""
    return training_split(Path("../shared/data/stories/tinystories_subset.txt"), TrainSettings(),
                          Path("../shared/data/stories/tinystories_valid_head.txt"), True).held


def merged_model(checkpoint: Path | None):
    """SmolLM2 with ``checkpoint``'s rank-8 adapter merged in (``None``: the base model alone), its
    tokenizer, and the checkpoint's step."""
    torch.set_num_threads(2)
    model, tokenizer, _, base = load_pretrained(Path("model:smollm2-135m-instruct-q4_1"), "cpu")
    if checkpoint is None:
        return model, tokenizer, "base"
    ft = FineTuning()
    add_adapters(model, 8, ft.lora_alpha, tuple(ft.lora_targets.split(",")), TrainSettings().seed)
    ckpt = load_checkpoint(checkpoint, base)
    load_weights(model, ckpt["model"], ckpt.get("frozen_base"), checkpoint, base=base,
                 trained_names=trained_parameter_names(model))
    return merge_wrapped(model), tokenizer, ckpt["step"]


def main(checkpoint: Path, out: Path, stride: int = 1) -> dict:
    model, tokenizer, step = merged_model(checkpoint)
    held = held_out_stories()
    prompts = load_prompts(DATA_DIR / "prompts_stories_en.jsonl")[::stride][:6]
    pairs = validation_prefixes(held, 10, seed=1, quotes=("",))  # the run's targets are unquoted
    res = obedience.evaluate_obedience(model, tokenizer, prompts, pairs, LENGTHS)
    rate = {(r["group"], r["prefix_len"]): r["rate"] for r in res["summary"]}
    record = {
        "checkpoint": str(checkpoint), "step": step, "openings": [p.id for p in prompts],
        "rates": {f"{g}{n}": round(r, 3) for (g, n), r in sorted(rate.items())},
        "score": mean_c_minus_b(res["summary"]),
        "passes": all(rate[("C", n)] >= 0.7 and rate[("F", n)] <= 0.1 and rate[("B", n)] <= 0.1 for n in LENGTHS),
        "summary": res["summary"], "contrasts": obedience.contrasts(res["rows"]), "rows": res["rows"],
    }
    out.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


if __name__ == "__main__":
    try:
        result = main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    except HarnessError as error:  # a checkpoint of another base or adapter shape
        raise SystemExit(f"error: {error}") from None
    print(json.dumps({k: result[k] for k in ("step", "openings", "rates", "score", "passes")}))
