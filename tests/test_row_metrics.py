"""Invariants of the per-row attention metrics on random attention rows (hypothesis)."""

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import jensenshannon

from harness.attention_metrics import row_metrics, token_kl


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
