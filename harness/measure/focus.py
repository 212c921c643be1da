"""What an attention-based detector reads of one input: one forward pass, no continuation (a
detector sees only the input). Per layer and head:

* ``task_mass``: the attention of the last input token on the task's tokens (the user's
  instruction), and ``data_mass`` on the prefix's own tokens (the data): Attention Tracker's
  "focus" reads these (Hung et al., NAACL Findings 2025; :mod:`harness.analysis.detection`);
* ``capture``: the prefix's capture at the task's query rows, the mean over those rows of
  ``-log(1 - mass on the inserted block)`` (the harness's own measure: docs/concepts.md).

The block before the task (BOS, template scaffolding, the prefix) comes from the prefix cache, as in
the sweep's engine, so a prefix shared by many prompts is computed once. Probability mass is read
from the probe's float32 log-softmax rows (:mod:`harness.model.probe`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from harness.inputs.conditions import Condition, batchable
from harness.model.decoding import forward
from harness.model.kv_buffers import buffered_cache
from harness.model.prefix_cache import PrefixCache
from harness.model.probe import capture_rows

FOCUS_MEASURES = ("task_mass", "data_mass", "capture")


@dataclass
class Focus:
    """One input's attention as a detector reads it: each measure ``[layers, heads]``."""

    condition: Condition
    task_mass: np.ndarray
    data_mass: np.ndarray
    capture: np.ndarray


def _mass(logp: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Probability mass on keys ``[start, end)`` of log-probability rows ``[..., keys]``."""
    return torch.logsumexp(logp[..., start:end], dim=-1).exp() if end > start else torch.zeros_like(logp[..., 0])


@torch.no_grad()
def focus_pass(model: torch.nn.Module, prefix_cache: PrefixCache, batch: list[Condition]) -> list[Focus]:
    """:class:`Focus` of each condition of ``batch`` (one input length, the same spans:
    :func:`harness.inputs.conditions.batchable`; no isolation), from one forward pass. The probe must
    be installed (:func:`harness.model.probe.install_probe`)."""
    first = batch[0].assembled
    assert all(batchable(batch[0], c) and c.isolation.mode == "none" for c in batch), "one batchable group"
    n_in, head = len(first.input_ids), first.task_start
    device = next(model.parameters()).device
    cache = (prefix_cache.batch([c.assembled.input_ids[:head] for c in batch], n_in) if head
             else buffered_cache(model, n_in))
    rest = torch.tensor([c.assembled.input_ids[head:] for c in batch], device=device)
    found: dict[int, tuple[torch.Tensor, ...]] = {}

    def on_layer(layer, logp, scores, sink):  # logp [batch, heads, rows, keys]; rows: the task and after it
        block = _mass(logp[:, :, :first.task_len], first.block_start, first.block_end)
        shared = torch.cat([logp[:, :, :first.task_len, :first.block_start],
                            logp[:, :, :first.task_len, first.block_end:]], dim=-1)
        capture = -torch.logsumexp(shared, dim=-1) if shared.shape[-1] else torch.full_like(block, torch.inf)
        last = logp[:, :, -1]
        found[layer] = (_mass(last, first.task_start, first.task_end), _mass(last, first.prefix_start, first.prefix_end),
                        capture.mean(-1))

    with capture_rows(slice(0, n_in - head), on_layer):
        forward(model, rest, cache, last_only=True)
    stacked = [torch.stack([found[layer][i] for layer in sorted(found)], dim=1).float().cpu().numpy()
               for i in range(3)]  # each [batch, layers, heads]
    return [Focus(c, stacked[0][i], stacked[1][i], stacked[2][i]) for i, c in enumerate(batch)]


def focus_batches(conditions: list[Condition], batch_size: int) -> list[list[Condition]]:
    """The B/C conditions in batches :func:`focus_pass` takes: one prompt, one input length and the
    same spans, at most ``batch_size`` each, in the order given."""
    groups: dict[tuple, list[Condition]] = {}
    for c in conditions:
        if c.group == "A":
            continue
        a = c.assembled
        groups.setdefault((c.prompt_id, len(a.input_ids), a.block, a.prefix_start, a.prefix_end, a.task_start,
                           c.isolation), []).append(c)
    return [members[i:i + batch_size] for members in groups.values() for i in range(0, len(members), batch_size)]
