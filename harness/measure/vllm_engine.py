"""The output-only engine on vLLM: what :func:`harness.measure.driver.drive` runs when
``backend=vllm``.

It answers the driver as :class:`harness.measure.engine.Engine` does (``reference`` for a
prompt's A, ``conditions`` for a batch of its B/C conditions) from continuations it asked a
:class:`~harness.model.vllm_backend.VllmWorker` for in advance: :meth:`prepare` hears which
conditions are to be computed, and each time the driver reaches a prompt not yet continued, the
next ``chunk`` conditions (whole prompts, in the driver's order) go to the engine in one call, so
vLLM batches across prompts. A's continuation is vLLM's too, so drift compares like with like.

A result holds the continuation (token ids, whether a stop token ended it, each token's
log-probability, the smallest top-1 minus top-2 log-probability over its steps as the near-tie
margin); output KL, the first
teacher-forced divergence and every attention measure are null (``attention`` empty), never zero.
A condition's ``seconds`` is its share of the engine call it was part of.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from harness.inputs.conditions import Condition
from harness.measure.engine import PhaseClock, Reference, Result
from harness.model.decoding import Continuation
from harness.model.vllm_backend import Generated, VllmWorker


def as_continuation(g: Generated) -> Continuation:
    return Continuation(g.ids, g.stopped, min(g.margins) if g.margins else None, g.logprobs)


class VllmEngine:
    """See the module docstring. ``stops``: the token ids that end a continuation (the harness's own
    stop set, so both backends stop at the same tokens)."""

    # what the runner and the manifest read of an engine: no attention, no prefix cache of the
    # harness's, no lowered products; its path is vLLM's own greedy decode
    attention = False
    prefix_cache = None
    linear_dtype = None
    decode_path = "vllm"

    def __init__(self, worker: VllmWorker, stops, max_new_tokens: int, chunk: int = 512):
        self.worker = worker
        self.keep_step_logp: frozenset = frozenset()  # (nothing to keep: vLLM gives no full log-probs)
        self.clock = PhaseClock()  # seconds inside the engine's calls ("vllm")
        self.stops = frozenset(stops)
        self.max_new_tokens = max_new_tokens
        self.chunk = chunk
        self._pending: OrderedDict[str, list[Condition]] = OrderedDict()  # by prompt, in the driver's order
        self._done: dict[Condition, tuple[Continuation, float]] = {}

    def prepare(self, conditions: list[Condition]) -> None:
        """The conditions the driver will ask for (those already stored left out)."""
        for cond in conditions:
            self._pending.setdefault(cond.prompt_id, []).append(cond)

    def _continue(self, prompt_id: str, needed: list[Condition]) -> None:
        """Continue ``prompt_id``'s conditions (``needed`` among them, prepared or not) and, in the
        same engine call, the next prompts' up to ``chunk`` conditions."""
        queued = self._pending.setdefault(prompt_id, [])
        queued.extend(c for c in needed if c not in queued and c not in self._done)
        self._pending.move_to_end(prompt_id, last=False)
        batch: list[Condition] = []
        while self._pending:
            first = next(iter(self._pending))
            if batch and len(batch) + len(self._pending[first]) > self.chunk:
                break
            batch.extend(self._pending.pop(first))
        generated, seconds = self.worker.generate([list(c.assembled.input_ids) for c in batch], self.max_new_tokens,
                                                  self.stops)
        self.clock.seconds["vllm"] = self.clock.seconds.get("vllm", 0.0) + seconds
        share = seconds / max(len(batch), 1)
        for cond, g in zip(batch, generated):
            self._done[cond] = (as_continuation(g), share)

    def _take(self, cond: Condition, prompt_conditions: list[Condition]) -> tuple[Continuation, float]:
        if cond not in self._done:
            self._continue(cond.prompt_id, prompt_conditions)
        return self._done.pop(cond)

    def reference(self, cond: Condition) -> tuple[Reference, Result]:
        continuation, seconds = self._take(cond, [cond])
        ref = Reference(cond, continuation, torch.empty(0), seconds=seconds)
        return ref, self._result(cond, continuation, seconds)

    def conditions(self, ref: Reference, batch: list[Condition]) -> list[Result]:
        out = []
        for cond in batch:
            continuation, seconds = self._take(cond, batch)
            out.append(self._result(cond, continuation, seconds))
        return out

    @staticmethod
    def _result(cond: Condition, continuation: Continuation, seconds: float) -> Result:
        return Result(cond, continuation, None, {}, {}, seconds)


def start(request) -> tuple[VllmEngine, dict]:
    """The output-only vLLM engine for ``backend=vllm`` (:mod:`harness.model.backends`), serving the
    weights the harness loaded, and the facts the manifest records of it (and the result key reads)."""
    import logging

    settings = request.settings
    dtype = settings.dtype or request.dtype
    worker = VllmWorker(request.loaded.location, dtype=dtype, max_model_len=request.longest, seed=request.seed,
                        python=settings.python, block_size=settings.block_size, compile=settings.compile,
                        tensor_parallel_size=settings.tensor_parallel_size,
                        pipeline_parallel_size=settings.pipeline_parallel_size,
                        request_timeout_s=settings.request_timeout_s,
                        log_path=None if request.log_dir is None else request.log_dir / "vllm.log")
    logging.getLogger(__name__).info("vLLM %s engine started in %.0f s (%s, %s)", worker.vllm_version,
                                     worker.start_seconds, worker.dtype, worker.python)
    facts = {"vllm": worker.vllm_version, "dtype": worker.dtype, "python": str(worker.python),
             "block_size": settings.block_size, "compile": settings.compile,
             "start_seconds": round(worker.start_seconds, 1), "log": str(worker.log_path)}
    return VllmEngine(worker, request.stops, request.max_new_tokens, settings.chunk), facts
