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
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import DATA_DIR, compose
from harness.inputs.texts import load_prefixes, load_prompts
from harness.measure.driver import drive
from harness.model.loading import byte_level_tokenizer
from harness.runs.runner import run

TEST_DATA = Path(__file__).resolve().parent / "data"
SMALL_PREFIXES = TEST_DATA / "prefixes_small.jsonl"  # 5 neutral + 5 instruction-like, ids fixed

# A small but complete sweep on the tiny model: 2 prompts x (A + 10 prefixes x 2 lengths). Without
# figures: drawing them takes longer than the sweep (tiny_run and the figure tests draw them).
FAST = ["model=tiny", "prefix.lengths=[8,24]", "decode.max_new_tokens=6", "prompts.limit=2",
        f"prefixes.path={SMALL_PREFIXES}", "draw_figures=false"]


def sweep(run_dir: Path, *overrides: str) -> Path:
    """``harness sweep OVERRIDES hydra.run.dir=RUN_DIR``, in this process."""
    return run(compose(list(overrides)), run_dir, overrides=list(overrides), progress=False)


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


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def run_harness(*args: str, cwd: Path, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m harness ARGS`` in a fresh process, offline."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


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


def run_all(engine, conditions, batch_size: int = 1):
    """Every condition through :func:`harness.measure.driver.drive`: (results in the order computed, the
    reference of each prompt)."""
    results, references, alone = [], {}, []

    def keep(result, ref, computed_alone):
        results.append(result)
        references[ref.condition.prompt_id] = ref
        alone.append(computed_alone)

    outcome = drive(engine, conditions, batch_size=batch_size, on_result=keep, progress=False)
    assert not outcome.failures, outcome.failures
    assert not any(alone), "a batch failed and was retried one condition at a time"  # a bug, not a test
    return results, references


def pytest_collection_modifyitems(config, items):
    """The tests that start real processes first (a stable sort keeps the rest in order): on two
    workers, a long test drawn last keeps one worker busy while the other has nothing left to do."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
