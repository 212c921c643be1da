"""The independent oracle for the attention metrics: eager ``output_attentions`` on full sequences,
and every metric of ``harness.measure.attention_metrics`` written out again in float64 numpy/scipy from
the attention probabilities alone (no scores, no caches, no probe).

What it is for: the harness computes its metrics from streamed, recomputed float32 scores with a
KV cache, a prefix cache, forks and batches; this module computes the same definitions the plain
way, so a test can compare the two to 1e-5. Keys a row cannot see have probability exactly 0 in
eager attention (causal and sliding-window masks alike); a learned sink's mass is what the keys
leave (``1 - row sum``). A's row is renormalized over the keys X also sees by their own sum.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon
from scipy.special import rel_entr

METRICS = ("kl", "kl_shared", "capture", "js", "prefix_mass", "mass_from_sink", "mass_from_context", "mass_from_task",
           "mass_from_continuation", "score_rmse", "sink_mass_a", "sink_mass_x", "unseen_mass_a")


def eager_attention(model, ids: list[int]):
    """Attention probabilities ``[layers][heads, T, T]`` (float64) and logits ``[T, V]`` of one
    eager forward over ``ids``; the model's implementation is restored afterwards."""
    impl = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad():
            out = model(torch.tensor([list(ids)]), output_attentions=True, use_cache=False)
    finally:
        model.set_attn_implementation(impl)
    return [a[0].double().numpy() for a in out.attentions], out.logits[0].double().numpy()


def row(pa: np.ndarray, px: np.ndarray, block: tuple[int, int], a_input_len: int, sinks: bool) -> dict:
    """Every metric of one query row. ``pa``: A's probabilities over A's keys up to and including
    the query; ``px``: X's over X's keys up to the same token."""
    start, end = block
    n = end - start
    to_x = lambda k: k if k < start else k + n  # noqa: E731 - A's key k in X's numbering
    ka = len(pa)
    seen_a = pa > 0
    both = np.array([seen_a[k] and px[to_x(k)] > 0 for k in range(ka)])
    unseen = pa[seen_a & ~both].sum()
    # renormalize by what stays visible, summed itself: 1 - unseen loses digits when most of the
    # mass is out of X's window (95% unseen: 7e-5 off in float32 probabilities)
    sink_mass = max(1.0 - pa.sum(), 0.0) if sinks else 0.0
    keep = pa[both].sum() + sink_mass if unseen > 0 else 1.0  # nothing unseen: A's row as it is
    sink_a = sink_mass / keep
    sink_x = max(1.0 - px.sum(), 0.0) if sinks else 0.0
    pa_s = np.where(both, pa, 0.0) / keep
    px_s = np.array([px[to_x(k)] if both[k] else 0.0 for k in range(ka)])
    prefix_mass = px[start:end].sum()
    shared = px_s.sum() + sink_x
    kl = rel_entr(pa_s, px_s).sum() + (rel_entr(sink_a, sink_x) if sinks else 0.0)
    kl_shared = rel_entr(pa_s, px_s / shared).sum() + (rel_entr(sink_a, sink_x / shared) if sinks else 0.0)
    # JS over every outcome of either run: shared keys, block keys, X keys outside both, the sink
    shared_in_x = {to_x(k) for k in range(ka) if both[k]}
    rest = np.array([px[j] for j in range(len(px)) if not (start <= j < end) and j not in shared_in_x])
    p = np.concatenate([pa_s, np.zeros(n), np.zeros(len(rest)), [sink_a]])
    q = np.concatenate([px_s, px[start:end], rest, [sink_x]])
    js = jensenshannon(p, q) ** 2
    # centred log-probabilities (= centred scores) on the keys both see, the sink counted as one
    la = np.log(pa[both])
    lx = np.log(px_s[both])
    if sinks:
        la = np.append(la, np.log(1.0 - pa.sum()))
        lx = np.append(lx, np.log(sink_x))
    score_rmse = np.sqrt((((la - la.mean()) - (lx - lx.mean())) ** 2).mean())
    moved = pa_s - px_s
    return {
        "kl": kl, "kl_shared": kl_shared, "capture": -np.log(shared), "js": js, "prefix_mass": prefix_mass,
        "mass_from_sink": moved[0] + (sink_a - sink_x),
        "mass_from_context": moved[1:start].sum(),
        "mass_from_task": moved[max(start, 1):a_input_len].sum(),
        "mass_from_continuation": moved[a_input_len:].sum(),
        "score_rmse": score_rmse, "sink_mass_a": pa[0], "sink_mass_x": px[to_x(0)], "unseen_mass_a": unseen,
    }


def condition_metrics(model, a_ids, x_ids, y_a, block: tuple[int, int], task: tuple[int, int],
                      sinks: bool = False) -> dict[str, dict[str, np.ndarray]]:
    """``[segment][metric] -> [layers, heads]`` for condition X against A, the segments being A's
    task tokens ``task`` (A's numbering) and A's continuation ``y_a`` (teacher-forced into X)."""
    att_a, _ = eager_attention(model, list(a_ids) + list(y_a))
    att_x, _ = eager_attention(model, list(x_ids) + list(y_a))
    n_a, n = len(a_ids), block[1] - block[0]
    rows = {"task": range(*task), "continuation": range(n_a, n_a + len(y_a))}
    out = {}
    for segment, positions in rows.items():
        if not len(positions):
            continue
        layers = []
        for la, lx in zip(att_a, att_x):
            heads = []
            for h in range(la.shape[0]):
                per_row = [row(la[h, q, : q + 1], lx[h, q + n, : q + n + 1], block, n_a, sinks) for q in positions]
                heads.append({m: np.mean([r[m] for r in per_row]) for m in METRICS})
            layers.append(heads)
        out[segment] = {m: np.array([[h[m] for h in heads] for heads in layers]) for m in METRICS}
    return out


def output_kl(model, a_ids, x_ids, y_a, stopped_on_eos: bool) -> float:
    """Mean KL(p_A || p_X) over the vocabulary at the steps predicting Y_A (and the EOS)."""
    from scipy.special import log_softmax

    _, logits_a = eager_attention(model, list(a_ids) + list(y_a))
    _, logits_x = eager_attention(model, list(x_ids) + list(y_a))
    steps = len(y_a) + int(stopped_on_eos)
    la = log_softmax(logits_a[len(a_ids) - 1: len(a_ids) - 1 + steps], axis=-1)
    lx = log_softmax(logits_x[len(x_ids) - 1: len(x_ids) - 1 + steps], axis=-1)
    return float(rel_entr(np.exp(la), np.exp(lx)).sum(-1).mean())
