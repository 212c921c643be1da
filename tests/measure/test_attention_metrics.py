"""Invariants of the per-row attention metrics on random attention rows (hypothesis)."""

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from harness.measure.attention_metrics import row_metrics, token_kl


@st.composite
def rows(draw):
    """Scores for A over Ka keys and for X over the same keys with a prefix span inserted after
    an optional BOS; a causal tail of masked keys in both."""
    ka = draw(st.integers(2, 12))
    n_prefix = draw(st.integers(0, 6))
    start = draw(st.integers(0, 1))
    masked = draw(st.integers(0, ka - 1 - start)) if ka - 1 - start > 0 else 0
    scale = draw(st.sampled_from([0.1, 1.0, 8.0]))
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    sa = torch.randn(3, ka, generator=g) * scale
    sx = torch.randn(3, ka + n_prefix, generator=g) * scale
    if masked:
        sa[:, ka - masked:] = float("-inf")
        sx[:, ka + n_prefix - masked:] = float("-inf")
    return sa, sx, (start, start + n_prefix)


@settings(max_examples=200, deadline=None)
@given(rows())
def test_row_invariants(case):
    sa, sx, prefix = case
    la, lx = torch.log_softmax(sa, -1), torch.log_softmax(sx, -1)
    m = row_metrics(la, sa, lx, sx, prefix)
    assert torch.all(m["kl"] >= -1e-6)
    assert torch.all(m["js"] >= -1e-7) and torch.all(m["js"] <= math.log(2) + 1e-6)
    mass = m["prefix_mass"].double()
    # The identity read back through a float32 prefix_mass is ill-conditioned as m -> 1 (the
    # harness itself computes kl_shared from the shared keys' log mass, which is not).
    ok = mass < 0.99
    expected = m["kl"].double() + torch.log1p(-mass)
    torch.testing.assert_close(m["kl_shared"].double()[ok], expected[ok], atol=2e-5, rtol=1e-5)
    # JS against scipy on X's key set
    pa = torch.cat([la.exp()[:, : prefix[0]], torch.zeros(3, prefix[1] - prefix[0]), la.exp()[:, prefix[0]:]], -1)
    for r in range(3):
        want = jensenshannon(pa[r].double().numpy(), lx.double().exp()[r].numpy()) ** 2
        assert abs(float(m["js"][r]) - want) < 1e-5
    # A against itself: every divergence is exactly zero
    same = row_metrics(la, sa, la, sa, (prefix[0], prefix[0]))
    assert torch.all(same["kl"] == 0) and torch.all(same["js"] == 0) and torch.all(same["prefix_mass"] == 0)
    assert torch.allclose(same["score_rmse"], torch.zeros(3), atol=1e-6)


def test_score_rmse_is_shift_invariant():
    sa = torch.tensor([[0.5, -1.0, 2.0, 0.0]])
    sx = torch.cat([sa[:, :1], torch.tensor([[3.0, 3.0]]), sa[:, 1:] ], -1) + 7.0  # shifted, prefix inserted
    m = row_metrics(torch.log_softmax(sa, -1), sa, torch.log_softmax(sx, -1), sx, (1, 3))
    assert float(m["score_rmse"]) < 1e-6
    assert float(m["prefix_mass"]) > 0.5 and float(m["kl"]) > 0


def test_hand_example():
    # A: uniform over 2 keys. X: prefix key with mass 1/2, the rest uniform over the 2 shared keys.
    la = torch.log(torch.tensor([[0.5, 0.5]]))
    lx = torch.log(torch.tensor([[0.25, 0.5, 0.25]]))  # keys: bos, prefix, task
    m = row_metrics(la, la, lx, lx, (1, 2))
    assert abs(float(m["kl"]) - math.log(2)) < 1e-6  # sum 0.5 * log(0.5 / 0.25)
    assert abs(float(m["kl_shared"])) < 1e-6  # renormalized shared rows are identical
    assert abs(float(m["prefix_mass"]) - 0.5) < 1e-6
    assert abs(float(m["sink_mass_a"]) - 0.5) < 1e-6 and abs(float(m["sink_mass_x"]) - 0.25) < 1e-6
    assert abs(float(token_kl(la, la))) == 0


@st.composite
def windowed_rows(draw):
    """A's and X's scores where X's window has lost A's first keys, optionally with a sink logit."""
    ka = draw(st.integers(3, 10))
    n_block = draw(st.integers(1, 5))
    start = draw(st.integers(1, 2))
    lost = draw(st.integers(0, start))  # keys before the block that X no longer sees
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    sa = torch.randn(2, ka, generator=g) * 2
    sx = torch.randn(2, ka + n_block, generator=g) * 2
    sx[:, :lost] = float("-inf")
    sinks = torch.randn(2, generator=g) if draw(st.booleans()) else None
    return sa, sx, (start, start + n_block), sinks


def _with_sink(scores, sink):
    if sink is None:
        return torch.log_softmax(scores, -1), None
    logp = torch.log_softmax(torch.cat([scores, sink[:, None]], -1), -1)
    return logp[:, :-1], (logp[:, -1], sink)


@settings(max_examples=200, deadline=None)
@given(windowed_rows())
def test_capture_plus_redistribution_is_kl_and_sources_sum_to_mass(case):
    sa, sx, block, sink = case
    la, sink_a = _with_sink(sa, sink)
    lx, sink_x = _with_sink(sx, sink)
    kw = {} if sink is None else {"sink_a": sink_a, "sink_x": sink_x}
    m = row_metrics(la, sa, lx, sx, block, a_input_len=sa.shape[-1] - 1, **kw)
    torch.testing.assert_close(m["kl"], m["kl_shared"] + m["capture"], atol=1e-5, rtol=0)
    sources = m["mass_from_sink"] + m["mass_from_context"] + m["mass_from_task"] + m["mass_from_continuation"]
    torch.testing.assert_close(sources, m["prefix_mass"], atol=1e-5, rtol=0)
    # capture is -log(1 - prefix mass): X sees nothing outside the block and the keys it shares with A.
    # The reference is computed from X's scores in float64 (near a mass of 1, -log1p(-mass) in float32
    # loses every digit: that is why capture is not computed that way)
    x64 = sx.double() if sink is None else torch.cat([sx.double(), sink.double()[:, None]], -1)
    outside = torch.cat([x64[:, : block[0]], x64[:, block[1]:]], -1)
    reference = (torch.logsumexp(x64, -1) - torch.logsumexp(outside, -1)).float()
    torch.testing.assert_close(m["capture"], reference, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(1 - torch.exp(-m["capture"]), m["prefix_mass"], atol=1e-5, rtol=0)
    lost = torch.isinf(sx[:, : block[0]]).any()
    assert bool((m["unseen_mass_a"] > 0).all()) == bool(lost)
    assert torch.all(m["kl"] >= -1e-6) and torch.all(m["js"] <= math.log(2) + 1e-6)
