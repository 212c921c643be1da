"""Attention-drift metrics (DESIGN.md section 3): pure functions on attention rows.

Inputs are float32 log-probabilities and pre-softmax scores of the same query tokens in run A and
in run X, shaped ``[..., rows, keys]`` (leading dims: batch, heads). X's keys are A's keys with a
prefix span ``[start, end)`` inserted after BOS, so A's key ``k`` is X's key ``k`` before the span
and ``k + (end - start)`` after it. Masked keys are ``-inf`` in both.

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


def _log_mean_exp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log((exp(a) + exp(b)) / 2)``, exactly ``a`` when ``a == b`` (so JS(P, P) is exactly 0)."""
    top = torch.maximum(a, b)
    finite = torch.isfinite(top)
    safe = torch.where(finite, top, torch.zeros_like(top))
    mid = safe + torch.log(0.5 * ((a - safe).exp() + (b - safe).exp()))
    return torch.where(finite, mid, top)


def row_metrics(
    logp_a: torch.Tensor,  # [..., R, Ka]
    scores_a: torch.Tensor,  # [..., R, Ka]
    logp_x: torch.Tensor,  # [..., R, Kx], Kx = Ka + (end - start)
    scores_x: torch.Tensor,  # [..., R, Kx]
    prefix: tuple[int, int],  # X's prefix key span [start, end)
) -> dict[str, torch.Tensor]:
    """Per-row metrics, each shaped ``[..., R]``.

    - ``kl``: KL(P_A || P_X) with P_A extended by zeros on the prefix keys;
    - ``prefix_mass``: X's attention on prefix keys;
    - ``kl_shared``: KL(P_A || P_X renormalized over shared keys) = kl + log(1 - prefix_mass);
    - ``js``: Jensen-Shannon divergence on X's key set, in nats (0 .. ln 2);
    - ``score_rmse``: RMS difference of the row-centred scores on the keys A can see;
    - ``sink_mass_a`` / ``sink_mass_x``: attention on position 0 in each run.
    """
    start, end = prefix
    shared_lx = drop_span(logp_x, start, end)
    pa, px_shared = logp_a.exp(), shared_lx.exp()
    zero = torch.zeros((), dtype=pa.dtype, device=pa.device)
    kl = torch.where(pa > 0, pa * (logp_a - shared_lx), zero).sum(-1)
    log_shared_mass = torch.logsumexp(shared_lx, dim=-1)
    prefix_mass = (
        torch.logsumexp(logp_x[..., start:end], dim=-1).exp() if end > start else torch.zeros_like(kl)
    )

    # JS on X's key set. On a prefix key P_A is 0, so the mixture is P_X / 2 and the key adds
    # 0.5 * P_X * ln 2: all prefix keys together add 0.5 * prefix_mass * ln 2.
    log_mid = _log_mean_exp(logp_a, shared_lx)
    js = 0.5 * (torch.where(pa > 0, pa * (logp_a - log_mid), zero).sum(-1)
                + torch.where(px_shared > 0, px_shared * (shared_lx - log_mid), zero).sum(-1)
                + prefix_mass * math.log(2.0))

    visible = torch.isfinite(scores_a)
    n_visible = visible.sum(-1).clamp(min=1)
    sa = torch.where(visible, scores_a, torch.zeros_like(scores_a))
    sx = torch.where(visible, drop_span(scores_x, start, end), torch.zeros_like(scores_a))
    ca = sa - (sa.sum(-1) / n_visible)[..., None]
    cx = sx - (sx.sum(-1) / n_visible)[..., None]
    sq = torch.where(visible, (ca - cx) ** 2, torch.zeros_like(ca))
    score_rmse = (sq.sum(-1) / n_visible).sqrt()

    return {
        "kl": kl,
        "kl_shared": kl + log_shared_mass,
        "js": js,
        "prefix_mass": prefix_mass,
        "score_rmse": score_rmse,
        "sink_mass_a": logp_a[..., 0].exp().expand_as(kl),
        "sink_mass_x": logp_x[..., 0].exp(),
    }


def token_kl(logp_a: torch.Tensor, logp_x: torch.Tensor) -> torch.Tensor:
    """KL(p_A || p_X) over the last (vocabulary) axis, from log-probabilities."""
    return _xlogy_terms(logp_a, logp_x).sum(-1)
