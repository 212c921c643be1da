"""The vLLM backend: the engine adapter and the configuration rules on a stand-in worker (always),
and a real vLLM engine serving the shipped demo model (where the vLLM environment exists: ``make
vllm``; CI builds it and sets PREFIX_HARNESS_REQUIRE_VLLM=1, so there they run or fail, never skip).
One engine serves the module's tests (they share an xdist group): each start costs a minute."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from harness.config import compose, validate
from harness.errors import HarnessError
from harness.inputs.conditions import build_conditions
from harness.measure.driver import drive
from harness.measure.engine import Engine
from harness.measure.vllm_engine import VllmEngine
from harness.model.decoding import stop_ids
from harness.model.loading import load_model
from harness.model.sources import SHIPPED_MODELS
from harness.model.vllm_backend import Generated, VllmWorker, vllm_python
from tests.measure.test_decode_paths import PREFIXES, PROMPTS
from tests.support import sweep
from tests.zoo import tiny_model

MAX_NEW = 8


class StandInWorker:
    """Continues token ids as a function of the input alone (its last ids reversed), recording each call."""

    def __init__(self):
        self.calls: list[int] = []

    def generate(self, prompts, max_tokens, stops):
        self.calls.append(len(prompts))
        return [Generated(tuple(reversed(p[-max_tokens:])), False, (0.5, 0.25)) for p in prompts], 0.1 * len(prompts)


def conditions_of(tok):
    return build_conditions(tok, PROMPTS, PREFIXES, groups=["A", "B", "C"], lengths=[6, 14], separator="\n\n",
                            bos_policy="auto")


def test_the_engine_batches_across_prompts_and_answers_every_condition_once():
    _, tok = tiny_model("llama", seed=0)
    conditions = conditions_of(tok)
    worker = StandInWorker()
    engine = VllmEngine(worker, {0}, MAX_NEW, chunk=100)
    seen = []
    outcome = drive(engine, conditions, batch_size=4, on_result=lambda r, ref, alone: seen.append((r, ref)))
    assert outcome.computed == len(conditions) and not outcome.failures
    assert worker.calls == [len(conditions)]  # both prompts in one call: the chunk holds them all
    assert sorted(map(id, (r.condition for r, _ in seen))) == sorted(map(id, conditions))
    for result, ref in seen:
        assert result.continuation.ids == tuple(reversed(result.condition.assembled.input_ids[-MAX_NEW:]))
        assert result.continuation.min_margin == 0.25
        assert result.attention == {} and result.output_kl is None and result.tf_divergence is None
        assert ref.condition.prompt_id == result.condition.prompt_id and ref.condition.group == "A"
        assert result.seconds == pytest.approx(0.1)
    assert engine.clock.seconds["vllm"] == pytest.approx(0.1 * len(conditions))


def test_a_small_chunk_sends_whole_prompts_per_call():
    _, tok = tiny_model("llama", seed=0)
    conditions = conditions_of(tok)
    per_prompt = len(conditions) // len(PROMPTS)
    worker = StandInWorker()
    drive(VllmEngine(worker, {0}, MAX_NEW, chunk=per_prompt + 1), conditions, batch_size=4,
          on_result=lambda *a: None)
    assert worker.calls == [per_prompt, per_prompt]


def test_a_failed_engine_call_fails_its_conditions_not_the_sweep():
    _, tok = tiny_model("llama", seed=0)
    conditions = conditions_of(tok)

    class Failing(StandInWorker):
        def generate(self, prompts, max_tokens, stops):
            if not self.calls:
                self.calls.append(len(prompts))
                raise HarnessError("the vLLM engine stopped")
            return super().generate(prompts, max_tokens, stops)

    per_prompt = len(conditions) // len(PROMPTS)
    outcome = drive(VllmEngine(Failing(), {0}, MAX_NEW, chunk=per_prompt), conditions, batch_size=4,
                    on_result=lambda *a: None)
    assert {c.prompt_id for c, _ in outcome.failures} == {PROMPTS[0].id}
    assert outcome.computed == per_prompt


@pytest.mark.parametrize("override, says", [
    ([], "analysis.attention=false"),
    (["analysis.attention=false"], "analysis.noise_floor=false"),
    (["analysis.attention=false", "analysis.noise_floor=false", "isolation=[mask]"], "isolation=[none]"),
    (["analysis.attention=false", "analysis.noise_floor=false", "model.linear_dtype=bfloat16"],
     "model.linear_dtype=null"),
    (["analysis.attention=false", "analysis.noise_floor=false", "model.adapter=x"], "model.adapter"),
    (["experiment=vllm-outputs", "backend.chunk=0"], "backend.chunk"),
    (["experiment=vllm-outputs", "backend.tensor_parallel_size=0"], "backend.tensor_parallel_size"),
    (["experiment=vllm-outputs", "backend.block_size=40"], "backend.block_size must be a multiple of 16"),
    (["experiment=vllm-outputs", "backend.block_size=0"], "backend.block_size must be a multiple of 16"),
    (["experiment=vllm-outputs", f"backend.block_size={2**40}"], "of at most 256, got 1099511627776"),
])
def test_what_vllm_cannot_do_is_refused_before_anything_loads(override, says):
    with pytest.raises(HarnessError, match=says.replace("[", r"\[").replace("]", r"\]")):
        validate(compose(["backend.name=vllm", *override]))


def test_a_missing_vllm_environment_says_how_to_make_one(tmp_path):
    with pytest.raises(HarnessError, match="make vllm"):
        vllm_python(str(tmp_path / "nothing" / "python"))


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a killed orphan may wait for a reaper)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def test_an_interrupted_start_leaves_no_worker_or_engine_process(tmp_path, monkeypatch):
    """Ctrl-C while the engine starts: the worker (its own session) and what it started are killed,
    and the log stays where it was asked for (a sweep's run directory)."""
    import signal

    pids = tmp_path / "pids"
    fake = tmp_path / "python"  # a "vLLM Python" that starts a child of its own and never answers
    fake.write_text(f"#!/bin/sh\necho $$ > {pids}\nsleep 300 &\necho $! >> {pids}\necho starting >&2\nwait\n")
    fake.chmod(0o755)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    started = [int(x) for x in pids.read_text().split()]
    assert len(started) == 2
    deadline = time.monotonic() + 5  # a killed process is gone a moment later, not at once (a loaded CI machine)
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in started), started
    assert "starting" in (tmp_path / "vllm.log").read_text()


@pytest.mark.parametrize("script, shown", [("exec cat", "'{\"model\""), ("echo hello; cat", "'hello'")])
def test_a_worker_that_does_not_speak_the_protocol_is_one_line(tmp_path, script, shown):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    with pytest.raises(HarnessError, match="is not its protocol") as caught:
        VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log",
                   start_timeout_s=30)
    assert shown in str(caught.value) and "\n" not in str(caught.value)


def test_a_request_the_engine_never_answers_ends_in_one_line_naming_its_log(tmp_path):
    """A hung engine: the worker is killed after backend.request_timeout_s and the error names the log."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\nread line\necho \'{"vllm": "0.0", "dtype": "float32"}\'\nsleep 300\n')
    fake.chmod(0o755)
    worker = VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log",
                        request_timeout_s=1.0)
    with pytest.raises(HarnessError, match=r"did not answer within 1 s while generating; its log: .*vllm\.log"):
        worker.generate([[1, 2, 3]], 4, {0})
    assert worker._proc.poll() is not None  # killed, not left running
    worker.close()


# -- a real engine --------------------------------------------------------------------------------
def _vllm_python() -> str | None:
    try:
        return str(vllm_python())
    except HarnessError:
        if os.environ.get("PREFIX_HARNESS_REQUIRE_VLLM"):
            raise
        return None


needs_vllm = pytest.mark.skipif(_vllm_python() is None and not os.environ.get("PREFIX_HARNESS_REQUIRE_VLLM"),
                                reason="no vLLM environment (make vllm, or PREFIX_HARNESS_VLLM_PYTHON)")
DEMO = SHIPPED_MODELS["demo"]  # the directory model=demo loads (the obedient demo model)


@pytest.fixture(scope="module")
def worker():
    # the backend's default block size (backend.block_size): the tests see the prefix cache a sweep uses
    with VllmWorker(str(DEMO), dtype="float32", max_model_len=512, seed=0, python=_vllm_python(),
                    block_size=32) as w:
        yield w


@needs_vllm
@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_vllm_continues_as_the_harness_engine_does_in_float32(worker):
    """Every greedy continuation of a small sweep on the demo model, vLLM's against the harness
    engine's step-by-step decode at the same dtype: identical (392 of 392 on the demo sweep in
    benchmarks/vllm_backend.py)."""
    loaded = load_model("demo", dtype="float32", device="cpu")
    stops = stop_ids(loaded.model, loaded.tokenizer)
    conditions = conditions_of(loaded.tokenizer)
    harness, vllm = {}, {}
    drive(Engine(loaded.model, stops, MAX_NEW, False, 0, "stepwise"), conditions, batch_size=4,
          on_result=lambda r, ref, alone: harness.__setitem__(r.condition, r.continuation))
    drive(VllmEngine(worker, stops, MAX_NEW), conditions, batch_size=4,
          on_result=lambda r, ref, alone: vllm.__setitem__(r.condition, r.continuation))
    assert len(harness) == len(vllm) == len(conditions)
    for cond in conditions:
        assert vllm[cond].ids == harness[cond].ids and vllm[cond].stopped_on_eos == harness[cond].stopped_on_eos
        # the margins are the same quantity (top-1 minus top-2 over the same steps), up to rounding
        assert vllm[cond].min_margin == pytest.approx(harness[cond].min_margin, abs=1e-3)
    # each token's log-probability, against the model's own log-softmax along the continuation
    # (computed here by a plain forward pass over the input and the continuation, no engine)
    for cond in conditions:
        ids, got = list(vllm[cond].ids), vllm[cond].token_logprobs
        assert got is not None and len(got) == len(ids)
        if not ids:
            continue
        full = torch.tensor([list(cond.assembled.input_ids) + ids])
        with torch.no_grad():
            logp = torch.log_softmax(loaded.model(full).logits[0].float(), -1)
        start = len(cond.assembled.input_ids)
        want = logp[start - 1:start - 1 + len(ids)].gather(1, torch.tensor(ids)[:, None])[:, 0]
        assert got == pytest.approx(want.tolist(), abs=1e-3)
        assert max(got) <= 0


@needs_vllm
@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_the_prefix_cache_is_shared_unless_salted(worker):
    ids = [int(i) for i in torch.randint(5, 1000, (300,), generator=torch.Generator().manual_seed(3))]
    worker.reset_cache()
    _, first = worker.probe(ids)
    _, again = worker.probe(ids)
    _, salted = worker.probe(ids, salt="tenant-2")
    _, salted_again = worker.probe(ids, salt="tenant-2")
    assert first == 0 and again >= 256 and salted == 0 and salted_again >= 256
    worker.reset_cache()
    assert worker.probe(ids)[1] == 0


@needs_vllm
@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_a_vllm_sweep_end_to_end(tmp_path, monkeypatch):
    """``harness sweep experiment=vllm-outputs``: the tables hold the output measures and null
    attention ones, the manifest says which engine and dtype, and the continuations are the
    harness engine's own (float32 both)."""
    design = ["prompts.limit=2", "prefixes.per_group=2", "prefix.lengths=[16]", "decode.max_new_tokens=8",
              "draw_figures=false", "model.dtype=float32"]
    monkeypatch.setenv("PREFIX_HARNESS_VLLM_PYTHON", _vllm_python())
    run = sweep(tmp_path / "vllm", "experiment=vllm-outputs", *design)
    ref = sweep(tmp_path / "harness", "analysis.attention=false", "analysis.noise_floor=false", "decode.path=stepwise",
                *design)
    import pandas as pd

    got, want = pd.read_parquet(run / "conditions.parquet"), pd.read_parquet(ref / "conditions.parquet")
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"]["name"] == "vllm" and manifest["backend"]["dtype"] == "float32"
    assert manifest["result_fingerprint"]["decode_path"] == "vllm"
    keys = ["prompt_id", "group", "prefix_id", "prefix_len"]
    both = want.merge(got, on=keys, suffixes=("_h", "_v"))
    assert len(both) == len(want) == len(got) == 2 * (1 + 4)
    assert (both.continuation_text_h == both.continuation_text_v).all()
    assert (both.edit_distance_h == both.edit_distance_v).all()
    assert got.output_kl.isna().all() and got.attn_kl_mean.isna().all()
    # vLLM gives each token's log-probability; the harness engine's rows say none (null, not zero)
    assert (got.continuation_logprobs.map(len) == got.n_continuation_tokens).all()
    assert want.continuation_logprobs.isna().all()
    assert manifest["backend"]["block_size"] == 32 and manifest["backend"]["compile"] is False
    assert "block 32" in manifest["result_fingerprint"]["backend"]
    assert not Path(run / "attention.parquet").exists() or pd.read_parquet(run / "attention.parquet").empty


@needs_vllm
@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_cache_timing_end_to_end_writes_a_run_directory(tmp_path, capsys):
    """``harness cache-timing`` on the real engine: a complete run directory whose tables its
    manifest lists, the engine's log beside them, and the leak where a whole block is shared."""
    from harness.cli import main
    from harness.runs.rundir import RunDir

    run = tmp_path / "timing"
    assert main(["cache-timing", "model=demo", "timing.lengths=[16,64]", "timing.trials=4", "timing.settings=[none]",
                 "backend.block_size=32", f"backend.python={_vllm_python()}", f"hydra.run.dir={run}"]) == 0
    rundir = RunDir(run)
    assert rundir.status()["status"] == "complete" and rundir.manifest()["engine"]["vllm"]
    trials = rundir.table("trials.parquet")
    cached = trials[trials.candidate == "cached"].groupby("prefix_len").cached_tokens.min()
    assert cached[16] == 0 and cached[64] >= 64  # shorter than a block: never shared; two blocks: shared
    assert (run / "vllm-1.log").is_file() and (run / "figures" / "fig_leak.pdf").is_file()


@pytest.mark.parametrize("ends", ["closed", "refused"])
def test_the_engine_s_sockets_live_in_a_directory_removed_with_it(tmp_path, ends, monkeypatch):
    """vLLM names its unix sockets in VLLM_RPC_BASE_PATH (the temp directory by default) and left
    hundreds in /tmp: each worker gets a private directory, gone when the worker is, however it ends."""
    monkeypatch.delenv("VLLM_RPC_BASE_PATH", raising=False)
    seen = tmp_path / "seen"
    answer = '{"vllm": "0.0", "dtype": "float32"}' if ends == "closed" else "not json"
    fake = tmp_path / "python"  # a "vLLM Python" that makes a socket-like file where vLLM would
    fake.write_text(f"#!/bin/sh\nread line\necho $VLLM_RPC_BASE_PATH > {seen}\ntouch $VLLM_RPC_BASE_PATH/sock\n"
                    f"echo '{answer}'\nread line\n")
    fake.chmod(0o755)
    if ends == "closed":
        VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log"
                   ).close()
    else:
        with pytest.raises(HarnessError, match="is not its protocol"):
            VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log")
    private = Path(seen.read_text().strip())
    assert private.name.startswith("vllm-ipc-") and not private.exists()


def test_a_log_of_the_worker_s_own_choosing_goes_with_a_clean_close_and_stays_after_a_failure(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nread line\necho '{\"vllm\": \"0.0\", \"dtype\": \"float32\"}'\nread line\n")
    fake.chmod(0o755)
    worker = VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake))
    assert worker.log_path.exists()
    worker.close()
    assert not worker.log_path.exists()
    fake.write_text("#!/bin/sh\nread line\necho broken >&2\n")
    with pytest.raises(HarnessError, match="stopped while starting") as caught:
        VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake))
    kept = Path(str(caught.value).split("(", 2)[2].split(")")[0])
    assert "broken" in kept.read_text()
    kept.unlink()


def test_your_own_socket_directory_is_used_and_left_alone(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    monkeypatch.setenv("VLLM_RPC_BASE_PATH", str(mine))
    seen = tmp_path / "seen"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nread line\necho $VLLM_RPC_BASE_PATH > {seen}\n"
                    "echo '{\"vllm\": \"0.0\", \"dtype\": \"float32\"}'\nread line\n")
    fake.chmod(0o755)
    VllmWorker("model", dtype="float32", max_model_len=64, python=str(fake), log_path=tmp_path / "vllm.log").close()
    assert seen.read_text().strip() == str(mine) and mine.is_dir()
