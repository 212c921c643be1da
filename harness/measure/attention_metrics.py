"""Attention-drift metrics (docs/concepts.md): pure functions on attention rows.

Inputs are float32 log-probabilities and pre-softmax scores of the same query tokens in run A and
in run X, shaped ``[..., rows, keys]`` (leading dims: batch, heads). X's keys are A's keys with
one block ``[start, end)`` inserted (the prefix, with whatever wrapper tokens its placement adds),
so A's key ``k`` is X's key ``k`` before the block and ``k + (end - start)`` after it. Keys a row
cannot see are ``-inf`` in its scores and log-probabilities.

Two quantities make up the headline divergence, per query row:

- **capture**: how much of X's attention the block takes. ``prefix_mass`` = m is X's mass on the
  block; ``capture`` = -log(1 - m) (exactly: minus the log of X's mass on the keys it shares with
  A); ``mass_from_*`` says whose mass it took, as A's mass minus X's mass on each class of A's keys
  (``sink``: position 0 and a learned sink logit; ``context``: other keys before the block;
  ``task``: from the block to the end of A's input; ``continuation``: A's generated tokens). The
  four sum to m.
- **redistribution**: ``kl_shared`` = KL(P_A || P_X renormalized over the shared keys): does X,
  among the keys A also has, attend differently?

and ``kl`` = KL(P_A || P_X), P_A extended by zeros on the block, is exactly their sum, per row and
so for row means too (the stored values are row means of each).

Sliding windows: a block pushes the keys before it (BOS, a system prompt) out of a windowed
layer's reach in X while A still sees them. P_A is then compared on the keys both runs can see,
renormalized, and the mass it loses is reported as ``unseen_mass_a`` (zero in full-attention
layers). Learned attention sinks (GPT-OSS) are one more softmax outcome that is not a key: they
enter every metric as a shared "key" present in both runs (sink logits ``sink_a``, ``sink_x``,
shaped ``[..., rows]``), count towards ``mass_from_sink``, and are never part of the block.

Every metric is computed from log-probabilities (``log_softmax`` of the scores), never as the log
of a rounded probability.
"""

from __future__ import annotations

import math

import torch


def drop_span(t: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """``t`` without the key columns ``[start, end)`` (X's keys mapped onto A's)."""
    return torch.cat([t[..., :start], t[..., end:]], dim=-1)


def _xlogy_terms(logp: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """``p * (log p - other)`` with the convention ``0 * anything = 0``."""
    p = logp.exp()
    return torch.where(p > 0, p * (logp - other), torch.zeros_like(p))


def _with_sink(t: torch.Tensor, sink: torch.Tensor | None) -> torch.Tensor:
    return t if sink is None else torch.cat([t, sink[..., None]], dim=-1)


def row_metrics(
    logp_a: torch.Tensor,  # [..., R, Ka]
    scores_a: torch.Tensor,  # [..., R, Ka]
    logp_x: torch.Tensor,  # [..., R, Kx], Kx = Ka + (end - start)
    scores_x: torch.Tensor,  # [..., R, Kx]
    block: tuple[int, int],  # X's inserted key span [start, end)
    a_input_len: int | None = None,  # A's input length: keys from here on are its continuation
    sink_a: tuple[torch.Tensor, torch.Tensor] | None = None,  # (log-prob, score) of a learned sink, [..., R]
    sink_x: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Per-row metrics (see the module docstring), each shaped ``[..., R]``."""
    start, end = block
    ka = logp_a.shape[-1]
    a_input_len = ka if a_input_len is None else a_input_len
    shared_lx = drop_span(logp_x, start, end)
    shared_sx = drop_span(scores_x, start, end)
    zero = torch.zeros((), dtype=logp_a.dtype, device=logp_a.device)

    # Keys both runs see (log-probabilities are finite or -inf, never NaN or +inf); A's mass on the
    # others (out of X's window) is renormalized away, the kept mass summed in log space: when the
    # window loses nearly all of A's mass, 1 - lost would cancel catastrophically.
    seen_a, seen_x = logp_a > -math.inf, shared_lx > -math.inf
    rows = torch.broadcast_shapes(logp_a.shape, shared_lx.shape)[:-1]  # A's rows may broadcast over a batch
    if torch.equal(*torch.broadcast_tensors(seen_a, seen_x)):  # no window lost anything (the usual case)
        both, log_keep = seen_a, torch.zeros_like(logp_a[..., :1])
        la, lx = logp_a, shared_lx
    else:
        both = seen_a & seen_x
        lost_any = (seen_a & ~both).any(-1, keepdim=True)
        kept = _with_sink(logp_a.masked_fill(~both, -math.inf), None if sink_a is None else sink_a[0])
        log_keep = torch.where(lost_any, torch.logsumexp(kept, dim=-1, keepdim=True), zero)
        la, lx = (logp_a - log_keep).masked_fill(~both, -math.inf), shared_lx.masked_fill(~both, -math.inf)
    unseen = -torch.expm1(log_keep[..., 0]).expand(rows)
    sa_sink = sx_sink = None
    vis = both
    if sink_a is not None:
        la = _with_sink(la, sink_a[0] - log_keep[..., 0])
        lx = _with_sink(lx, sink_x[0])
        sa_sink, sx_sink = sink_a[1], sink_x[1]
        vis = _with_sink(both, torch.ones_like(sa_sink, dtype=torch.bool))  # the sink is seen by both
    pa, px = la.exp(), lx.exp()

    kl = (pa * (la - lx)).masked_fill_(~vis, 0.0).sum(-1)
    # with nothing inserted (A against itself) X has no mass outside the shared keys: exactly 0
    log_shared_mass = torch.logsumexp(lx, dim=-1) if end > start else torch.zeros_like(kl)
    prefix_mass = (torch.logsumexp(logp_x[..., start:end], dim=-1).exp() if end > start
                   else torch.zeros_like(kl))

    # JS on the union of both runs' keys. On a block key P_A is 0, so the mixture is P_X / 2 and
    # the key adds 0.5 * P_X * ln 2: all block keys together add 0.5 * prefix_mass * ln 2. On a
    # shared key both are seen, so log M is finite there (elsewhere it is masked out), and exactly
    # log P_A when P_X = P_A (so JS(P, P) is exactly 0).
    top = torch.maximum(la, lx)
    log_mid = top + torch.log(0.5 * ((la - top).exp() + (lx - top).exp()))
    js = 0.5 * ((pa * (la - log_mid) + px * (lx - log_mid)).masked_fill_(~vis, 0.0).sum(-1)
                + prefix_mass * math.log(2.0))

    # Centred scores on the keys both see (the sink logit counts as one of them).
    sa = _with_sink(scores_a, sa_sink).masked_fill(~vis, 0.0)
    sx = _with_sink(shared_sx, sx_sink).masked_fill(~vis, 0.0)
    n_vis = vis.sum(-1).clamp(min=1)
    d = (sa - sx) - ((sa.sum(-1) - sx.sum(-1)) / n_vis)[..., None]
    score_rmse = ((d * d).masked_fill_(~vis, 0.0).sum(-1) / n_vis).sqrt()

    # Where the captured mass came from: A's mass minus X's mass, by class of A's keys.
    moved = pa[..., :ka] - px[..., :ka]  # both are 0 on keys one of them does not see
    first_task = max(start, 1)
    from_sink = moved[..., 0] + (pa[..., ka] - px[..., ka] if sink_a is not None else zero)

    sink_x_index = 0 if start > 0 else end  # A's position 0, wherever it sits in X
    return {
        "kl": kl,
        "kl_shared": kl + log_shared_mass,
        "capture": -log_shared_mass,
        "js": js,
        "prefix_mass": prefix_mass,
        "mass_from_sink": from_sink,
        "mass_from_context": moved[..., 1:start].sum(-1),
        "mass_from_task": moved[..., first_task:a_input_len].sum(-1),
        "mass_from_continuation": moved[..., a_input_len:].sum(-1),
        "score_rmse": score_rmse,
        "sink_mass_a": logp_a[..., 0].exp().expand_as(kl),
        "sink_mass_x": logp_x[..., sink_x_index].exp(),
        "unseen_mass_a": unseen,
    }


def token_kl(logp_a: torch.Tensor, logp_x: torch.Tensor) -> torch.Tensor:
    """KL(p_A || p_X) over the last (vocabulary) axis, from log-probabilities."""
    return _xlogy_terms(logp_a, logp_x).sum(-1)
