"""Shared fixtures: tiny models and tokenizers built in memory; nothing is downloaded."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import DATA_DIR
from harness.models import byte_level_tokenizer
from harness.texts import load_prefixes, load_prompts


@pytest.fixture(scope="session")
def prompts():
    return load_prompts(DATA_DIR / "prompts_en.jsonl")


@pytest.fixture(scope="session")
def prefixes():
    return load_prefixes(DATA_DIR / "prefixes.jsonl")


@pytest.fixture(scope="session")
def bpe_tokenizer(prompts, prefixes):
    """A real BPE (with merges) trained here on the shipped texts, GPT-2 style: no BOS added.

    Unlike the byte-level tokenizer it merges across word pieces, so tokenizing a joined string
    can differ from joining tokenized pieces, which is the hazard assembly must avoid.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([p.text for p in prompts] + [p.text for p in prefixes], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


@pytest.fixture(scope="session", params=["adds-bos", "no-bos", "bpe-no-bos"])
def any_tokenizer(request, bpe_tokenizer):
    if request.param == "adds-bos":
        return byte_level_tokenizer(add_bos=True)
    if request.param == "no-bos":
        return byte_level_tokenizer(add_bos=False)
    return bpe_tokenizer


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def run_harness(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in a fresh process, offline."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=600)


# A small but complete sweep on the tiny model: 2 prompts x (A + 10 prefixes x 2 lengths).
FAST = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2"]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny_run")
    result = run_harness("sweep", *FAST, f"hydra.run.dir={out}", cwd=out)
    assert result.returncode == 0, result.stderr
    return out, result
