"""Running conditions through the model: decoding, teacher forcing and attention capture.

Per prompt, group A runs first and becomes the reference: its greedy continuation Y_A, its
next-token distributions along Y_A, and (with attention analysis on) its attention rows at the
task tokens and at Y_A's tokens, kept per layer. Every B/C condition of that prompt then runs as

    everything before the task   -> from the prefix cache (BOS, template scaffolding and the
                                    inserted block: computed once per sweep, shared by prompts)
    prefill the rest of the input -> task rows, compared with A's layer by layer
    feed Y_A (teacher forcing)    -> continuation rows (same tokens as A's), output KL per step,
                                     and X's own next-token choice at every step of Y_A
    X's greedy continuation Y_X, by the decode path:
      teacher_forced (default)    -> while X's choice along Y_A is A's token, Y_X *is* Y_A: read off
                                     the teacher-forced pass; decoded step by step only from the
                                     first step where the choices differ (none if they never do)
      stepwise                    -> decoded step by step from the prefill (a fork of the KV cache,
                                     rewound after teacher forcing: harness.model.kv_buffers), the
                                     path every version before this one took, bit for bit
      none                        -> not decoded (attention-only measurement): only the first step
                                     where X's choice differs from A's token (``tf_divergence``)

The teacher-forced pass computes Y_A's steps in one forward call, the step-by-step decode one call
per step: the same arithmetic in other kernel shapes, so a step whose top two logits are within
rounding of each other can go either way. The run's noise floor measures that difference
(:mod:`harness.measure.noise`) and flags such conditions ``near_tie``.

Conditions with the same input length and spans (every B and C prefix at one L) can run as one
batch (:func:`harness.inputs.conditions.batchable`): no padding is ever needed.
"""

from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from harness.inputs.conditions import Condition, batchable
from harness.model.masks import KeyBias
from harness.measure.attention_metrics import row_metrics, token_kl
from harness.measure import continuation_steps as along
from harness.measure.metrics import ROW_METRICS, check_row_metrics
from harness.model.decoding import Continuation, forward, greedy_from, stop_set
from harness.model.kv_buffers import buffered_cache, rewound, select_rows
from harness.model.linear_precision import exact_linears
from harness.model.prefix_cache import PrefixCache
from harness.model.probe import capture_rows, key_bias

SEGMENTS = ("task", "continuation")
DECODE_PATHS = ("teacher_forced", "stepwise", "none")  # how X's greedy continuation is obtained (module docstring)


@dataclass
class Reference:
    """Group A's results for one prompt, reused by every B/C condition of that prompt."""

    condition: Condition
    continuation: Continuation
    step_logp: torch.Tensor  # [steps, vocab] float32: next-token log-probs along Y_A
    # rows[segment][layer] = (log_probs, scores, sink): [heads, rows, keys] float32, and for learned
    # sinks their (log_prob, score) [heads, rows] (else None)
    rows: dict[str, dict[int, tuple]] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass
class Result:
    """One condition's measurements."""

    condition: Condition
    continuation: Continuation
    output_kl: float | None
    # attention[segment][metric] = array [layers, heads], averaged over the segment's query rows
    attention: dict[str, dict[str, np.ndarray]]
    n_queries: dict[str, int]
    seconds: float
    output_kl_steps: list[float] | None = None  # KL at each step of A's continuation (its mean is output_kl)
    step_logp: torch.Tensor | None = None  # [steps, vocab] X's log-probs along Y_A (kept in memory only)
    # the first step of Y_A at which X's own choice (the teacher-forced argmax) is not A's token
    # (a stop where A continued, or a token where A stopped); the number of steps if none
    tf_divergence: int | None = None
    # [steps, vocab] X's log-probs along its own step-by-step decode (kept only when asked: the noise floor)
    decode_logp: torch.Tensor | None = None


class PhaseClock:
    """Wall seconds per phase, accumulated: of the B/C conditions here (prefix cache, prefill,
    teacher forcing, decode, metrics), of a sweep in the runner. What a speed-up must attack is read
    here, not guessed."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def start(self) -> None:
        self._last = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[phase] = self.seconds.get(phase, 0.0) + now - self._last
        self._last = now

    def rounded(self) -> dict[str, float]:
        return {k: round(v, 2) for k, v in self.seconds.items()}


def _metrics_to_numpy(per_layer: dict[int, dict[str, torch.Tensor]], batch: int) -> list[dict[str, np.ndarray]]:
    """{layer: {metric: [B, H]}} -> per batch row {metric: [layers, heads]}."""
    layers = sorted(per_layer)
    if layers:
        check_row_metrics(per_layer[layers[0]])
    out = []
    for b in range(batch):
        out.append({m: torch.stack([per_layer[l][m][b] for l in layers]).cpu().numpy() for m in ROW_METRICS})
    return out


def _comparer(ref: Reference, block: tuple[int, int], out: dict[str, dict[int, dict[str, torch.Tensor]]]):
    """``compare(segment)`` gives the probe callback that compares a layer's rows with A's rows of
    that layer and stores the row-averaged metrics, ``[batch, heads]``, in ``out[segment][layer]``.
    ``block`` is X's inserted key span (empty when X is A itself)."""
    a_input_len = len(ref.condition.assembled.input_ids)

    def compare(segment: str):
        def on_layer(layer, logp, scores, sink):
            lp_a, sc_a, sink_a = ref.rows[segment][layer]
            lp_a, sc_a = lp_a.to(logp.device)[None], sc_a.to(logp.device)[None]
            # X's keys are A's plus the block; any beyond (a pass without the cache fork) are causal padding
            k = lp_a.shape[-1] + block[1] - block[0]
            sinks = {}
            if sink is not None:
                sinks = {"sink_a": tuple(t.to(logp.device)[None] for t in sink_a), "sink_x": sink}
            rm = row_metrics(lp_a, sc_a, logp[..., :k], scores[..., :k], block, a_input_len, **sinks)
            out[segment][layer] = {m: v.mean(-1) for m, v in rm.items()}
        return on_layer

    return compare


class Engine:
    """Runs conditions on one loaded model. ``attention=False`` skips the probe (behaviour only);
    up to ``prefix_cache_bytes`` of prefix KV is kept for reuse across prompts (speed only).
    ``linear_dtype`` names the precision the model's linear layers were lowered to
    (:mod:`harness.model.linear_precision`), if any; ``exact`` runs them at full precision anyway
    (the noise floor's reference side)."""

    def __init__(self, model: torch.nn.Module, eos_id, max_new_tokens: int, attention: bool,
                 prefix_cache_bytes: int = 0, decode_path: str = "stepwise", keep_decode_logp: bool = False,
                 linear_dtype: str | None = None, exact: bool = False):
        if decode_path not in DECODE_PATHS:
            raise ValueError(f"decode path {decode_path!r} is not one of {DECODE_PATHS}")
        self.model = model
        self.eos_id = eos_id
        self.stop = stop_set(eos_id)
        self.max_new_tokens = max_new_tokens
        self.attention = attention
        self.decode_path = decode_path
        self.keep_decode_logp = keep_decode_logp
        self.linear_dtype = linear_dtype
        self.exact = exact
        # the B/C conditions whose results keep their [steps, vocab] log-probs (None: all); the sweep
        # keeps only its noise sample's: a batch's are hundreds of MB at a large vocabulary
        self.keep_step_logp: frozenset[Condition] | None = None
        # conditions a later pass computes again (the noise floor's sample): their heads stay kept for it
        self.expected_later: tuple[Condition, ...] = ()
        # A continuations (by prompt id) to teacher-force instead of decoding: the noise floor's
        # full-precision side measures along the sweep's own A, so that it compares like with like
        self.forced_a: dict[str, Continuation] = {}
        self.clock = PhaseClock()  # where B/C conditions spend their time (benchmarks/real_models.py)
        self.device = next(model.parameters()).device
        self.prefix_cache = PrefixCache(model, prefix_cache_bytes)

    def _capture(self, rows: slice, on_layer):
        return capture_rows(rows, on_layer) if self.attention else contextlib.nullcontext()

    def _keeps(self, cond: Condition) -> bool:
        """Whether ``cond``'s result keeps its step log-probabilities (the noise floor's sample)."""
        return self.keep_step_logp is None or cond in self.keep_step_logp

    def _precision(self):
        """The linear layers' precision for this engine's passes (the lowered one unless ``exact``)."""
        return exact_linears() if self.exact and self.linear_dtype else contextlib.nullcontext()

    def prepare(self, conditions: list[Condition]) -> None:
        """Hear which conditions the driver will compute (the vLLM engine batches across prompts
        from it): the prefix cache keeps a head only while one of them still needs it."""
        self.prefix_cache.expect([c.assembled.input_ids[:c.assembled.task_start]
                                  for c in (*conditions, *self.expected_later)
                                  if c.group != "A" and c.assembled.task_start])

    def reference(self, cond: Condition) -> tuple[Reference, Result]:
        """Run group A for one prompt; returns the reference and A's own result row."""
        with self._precision():
            return self._reference(cond)

    @torch.no_grad()
    def _reference(self, cond: Condition) -> tuple[Reference, Result]:
        t0 = time.perf_counter()
        a = cond.assembled
        rows: dict[str, dict[int, tuple]] = {s: {} for s in SEGMENTS}

        def keep(segment):
            def on_layer(layer, logp, scores, sink):
                rows[segment][layer] = (logp[0], scores[0], None if sink is None else (sink[0][0], sink[1][0]))
            return on_layer

        ids = torch.tensor([a.input_ids], device=self.device)
        cache = buffered_cache(self.model, len(a.input_ids) + self.max_new_tokens)
        with self._capture(slice(a.task_start, a.task_end), keep("task")):
            logits, cache = forward(self.model, ids, cache, last_only=True)
        last = logits[:, -1]
        y_a = self.forced_a.get(cond.prompt_id)
        if y_a is None:
            with rewound(cache):  # decoding Y_A first: the teacher-forced pass below needs it
                (y_a,) = greedy_from(self.model, last, cache, self.max_new_tokens, self.eos_id)
        tf_logits = None
        if y_a.ids:
            y = torch.tensor([y_a.ids], device=self.device)
            with self._capture(slice(0, len(y_a.ids)), keep("continuation")):
                tf_logits, _ = forward(self.model, y, cache)
        step_logp = along.step_logp(last, tf_logits, along.n_steps(y_a))[0]
        ref = Reference(cond, y_a, step_logp, rows, time.perf_counter() - t0)

        attention, n_queries = {}, {}
        for segment, by_layer in rows.items():
            if not by_layer:
                continue
            per_layer = {}
            for layer, (lp, sc, sink) in by_layer.items():
                sinks = {} if sink is None else {"sink_a": sink, "sink_x": sink}
                rm = row_metrics(lp, sc, lp, sc, (a.prefix_start, a.prefix_end), len(a.input_ids), **sinks)
                per_layer[layer] = {m: v[None].mean(-1) for m, v in rm.items()}
            attention[segment] = _metrics_to_numpy(per_layer, 1)[0]
            n_queries[segment] = next(iter(by_layer.values()))[0].shape[1]
        own = token_kl(step_logp, step_logp)
        own_kl = float(own.mean()) if len(step_logp) else None
        return ref, Result(cond, y_a, own_kl, attention, n_queries, ref.seconds, own.tolist(), step_logp,
                           along.n_steps(y_a))

    @torch.no_grad()
    def conditions(self, ref: Reference, batch: list[Condition]) -> list[Result]:
        """Run B/C conditions of ``ref``'s prompt that share one input length, as one batch."""
        t0 = time.perf_counter()
        first = batch[0].assembled
        iso = batch[0].isolation
        assert all(batchable(batch[0], c) and c.prompt_id == ref.condition.prompt_id for c in batch), \
            "a batch needs one prompt and conditions that batchable() allows together"
        bias = KeyBias.of(iso, first.block_start, first.block_end)
        self.clock.start()
        with key_bias(bias), self._precision():
            return self._conditions(ref, batch, t0)

    def _conditions(self, ref: Reference, batch: list[Condition], t0: float) -> list[Result]:
        first = batch[0].assembled
        shift = first.block_len if batch[0].isolation.resets_positions else 0
        n_in, B = len(first.input_ids), len(batch)

        def positions(start: int, length: int) -> dict:
            """Position ids for sequence indices [start, start + length), restarting after the block
            as if it were absent."""
            if not shift:
                return {}
            idx = torch.arange(start, start + length, device=self.device)
            pos = torch.where(idx >= first.block_end, idx - shift, idx)
            return {"position_ids": pos[None].expand(B, -1)}

        metrics: dict[str, dict[int, dict[str, torch.Tensor]]] = {s: {} for s in SEGMENTS}
        compare = _comparer(ref, first.block, metrics)

        # Everything before the task (BOS, template scaffolding, the block) does not depend on the
        # prompt: it comes from the prefix cache. The rest (task, and a chat template's generation
        # prompt after it) runs here; its first task_len rows are the task rows.
        head, capacity = first.task_start, n_in + self.max_new_tokens
        clock = self.clock
        cache = (self.prefix_cache.batch([c.assembled.input_ids[:head] for c in batch], capacity) if head
                 else buffered_cache(self.model, capacity))
        clock.lap("prefix cache")
        rest = torch.tensor([c.assembled.input_ids[head:] for c in batch], device=self.device)
        with self._capture(slice(0, first.task_len), compare("task")):
            logits, cache = forward(self.model, rest, cache, last_only=True, **positions(head, n_in - head))
        last = logits[:, -1]
        clock.lap("prefill")
        y_a = ref.continuation
        tf_logits = None
        if y_a.ids:
            y = torch.tensor([y_a.ids] * len(batch), device=self.device)
            with rewound(cache), self._capture(slice(0, len(y_a.ids)), compare("continuation")):
                tf_logits, _ = forward(self.model, y, cache, **positions(n_in, len(y_a.ids)))
        clock.lap("teacher forcing")
        steps = along.n_steps(y_a)
        if self.decode_path == "stepwise":  # the arithmetic of every earlier version, bit for bit
            step_logp = along.step_logp(last, tf_logits, steps)
            step_kl = token_kl(ref.step_logp[None], step_logp) if steps else None  # [batch, steps]
            choices = along.choices(last, tf_logits, steps)  # [batch, steps] X's argmax and margin along Y_A
            kept_logp = ([step_logp[i] for i in range(len(batch))] if self.keep_step_logp is None else
                         [step_logp[i].clone() if self._keeps(c) else None for i, c in enumerate(batch)])
        else:  # the same quantities without [batch, steps, vocab] temporaries (one rounding apart)
            step_kl, choices = along.read_off(ref.step_logp, last, tf_logits, steps)
            kept_logp = [along.step_logp(last[i:i + 1], None if tf_logits is None else tf_logits[i:i + 1], steps)[0]
                         if self._keeps(c) else None for i, c in enumerate(batch)]
        diverged = [along.divergence(ids, y_a, self.stop) for ids in choices[0].tolist()]
        decode_logp: list[torch.Tensor] | None = [] if self.keep_decode_logp else None
        if self.decode_path == "stepwise":
            ys = greedy_from(self.model, last, cache, self.max_new_tokens, self.eos_id, start_index=n_in,
                             position_shift=shift, step_logp=decode_logp)
        elif self.decode_path == "teacher_forced":
            ys = self._continue_from(diverged, choices, y_a, cache, n_in, shift)
            if ys is None:  # a cache type whose rewinding keeps nothing to continue from
                ys = greedy_from(self.model, last, cache, self.max_new_tokens, self.eos_id, start_index=n_in,
                                 position_shift=shift)
        else:
            ys = [None] * len(batch)
        clock.lap("decode")
        seconds = (time.perf_counter() - t0) / len(batch)

        per_row = {s: _metrics_to_numpy(m, len(batch)) for s, m in metrics.items() if m}
        n_queries = {s: ref.rows[s][0][0].shape[1] for s in per_row}
        decoded = torch.stack(decode_logp, dim=1) if decode_logp else None  # [batch, steps, vocab]
        clock.lap("metrics")
        return [
            Result(c, y, float(step_kl[i].mean()) if steps else None, {s: per_row[s][i] for s in per_row}, n_queries,
                   seconds, step_kl[i].tolist() if steps else None, kept_logp[i], diverged[i],
                   None if decoded is None else decoded[i])
            for i, (c, y) in enumerate(zip(batch, ys))
        ]

    def variant(self, **changes) -> Engine:
        """This engine with other settings (``decode_path``, ``keep_decode_logp``, ``exact``,
        ``forced_a``), sharing
        its model, and its prefix cache where the heads it holds are the variant's too (the noise
        floor's alone side decodes step by step, with full-precision products)."""
        other = copy.copy(self)
        other.clock = PhaseClock()  # its seconds are its own
        for name, value in changes.items():
            if not hasattr(other, name):
                raise AttributeError(f"Engine has no setting {name!r}")
            setattr(other, name, value)
        if other.linear_dtype and other.exact != self.exact:
            # the kept heads were computed at the other precision; the variant computes its own
            # (keeping none: it runs a small sample, and memory goes to the sweep's cache)
            other.prefix_cache = PrefixCache(self.model, 0)
        if other.decode_path not in DECODE_PATHS:
            raise ValueError(f"decode path {other.decode_path!r} is not one of {DECODE_PATHS}")
        return other

    def _continue_from(self, diverged: list[int], choices: tuple[torch.Tensor, torch.Tensor], y_a: Continuation,
                       cache, n_in: int, shift: int) -> list[Continuation] | None:
        """X's greedy continuations from the teacher-forced pass: Y_A up to each row's divergence,
        then X's own token there (both read off the pass), then decoded step by step. The rows that
        need decoding run as one batch from the KV the teacher-forced pass left in the cache at the
        earliest divergence among them; a row that diverges later is fed its read-off tokens until
        its own divergence. None for a cache whose rewinding keeps nothing to continue from."""
        tokens, margins = choices[0].tolist(), choices[1].tolist()
        out: list[Continuation | None] = [None] * len(diverged)
        rows = []
        for row, d in enumerate(diverged):
            margin = min(margins[row][: d + 1], default=float("inf"))
            if d == len(tokens[row]):  # never diverged: Y_X is Y_A
                out[row] = Continuation(y_a.ids, y_a.stopped_on_eos, margin)
            elif tokens[row][d] in self.stop:  # X stops where A went on
                out[row] = Continuation(y_a.ids[:d], True, margin)
            elif d + 1 == self.max_new_tokens:  # X's own token at the last step
                out[row] = Continuation((*y_a.ids[:d], tokens[row][d]), False, margin)
            else:
                rows.append(row)
        if not rows:
            return out
        start = min(diverged[r] for r in rows)
        sub = select_rows(cache, rows, n_in + start, n_in + self.max_new_tokens)
        if sub is None:
            return None
        forced = [list(y_a.ids[start:diverged[r]]) + [tokens[r][diverged[r]]] for r in rows]
        # every row's token at step `start` is read off already: no logits are needed for it
        logits = torch.zeros(len(rows), 2, device=self.device)
        decoded = greedy_from(self.model, logits, sub, self.max_new_tokens - start, self.eos_id,
                              start_index=n_in + start, position_shift=shift, forced=forced)
        for r, y in zip(rows, decoded):
            out[r] = Continuation((*y_a.ids[:start], *y.ids), y.stopped_on_eos,
                                  min(min(margins[r][: diverged[r] + 1]), y.min_margin))
        return out


def start(request) -> tuple[Engine, dict]:
    """The harness's own engine for a sweep (``backend=harness``, :mod:`harness.model.backends`):
    every measure; nothing of it enters the result keys beyond what they held before backends."""
    engine = Engine(request.loaded.model, request.stops, request.max_new_tokens, request.attention,
                    request.prefix_cache_bytes, request.decode_path, linear_dtype=request.linear_dtype)
    return engine, {}
