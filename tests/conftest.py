"""Shared fixtures: tiny models and tokenizers built in memory; nothing is downloaded.

Most tests run sweeps in-process with :func:`sweep` (a config composed exactly as the CLI composes
it, passed to :func:`harness.runs.runner.run`). Tests marked ``slow`` start real ``harness`` processes
(the CLI itself, SIGKILL/SIGTERM, multirun launchers, an installed wheel), most of them forked from
a fork server that has imported torch once (:mod:`tests.forked`); ``make test`` runs them too,
``make test-fast`` skips them.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The test models are tiny: one thread is faster than two, and it keeps the suite from fighting
# over the cores with another process (OpenMP threads spinning on a busy core cost up to 10x).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import fcntl
import json

import pytest

from harness.paths import DATA_DIR
from harness.inputs.texts import load_prefixes, load_prompts
from harness.model.builtin import byte_level_tokenizer
from tests.support import FAST, SMALL_PREFIXES, sweep


@pytest.fixture(scope="session")
def prompts():
    return load_prompts(DATA_DIR / "prompts_en.jsonl")


@pytest.fixture(scope="session")
def prefixes():
    return load_prefixes(SMALL_PREFIXES)


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


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """The FAST sweep with its figures, run once per session in-process (tests only read it).

    With pytest-xdist the test workers share one copy: the first to need it computes it under a
    lock in the session's common temporary directory, the others wait for it and read it."""
    if "PYTEST_XDIST_WORKER" not in os.environ:  # a plain pytest run (no workers)
        return sweep(tmp_path_factory.mktemp("tiny_run"), *FAST, "draw_figures=true")
    shared = tmp_path_factory.getbasetemp().parent  # this session's, common to its workers
    with open(shared / "tiny_run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = shared / "tiny_run"
        status = run / "status.json"
        if not status.is_file() or json.loads(status.read_text())["status"] != "complete":
            sweep(run, *FAST, "draw_figures=true")
    return run


def pytest_collection_modifyitems(config, items):
    """The tests that start real processes first (a stable sort keeps the rest in order): on two
    workers, a long test drawn last keeps one worker busy while the other has nothing left to do."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
