"""Every head's next-token distribution sums to 1, and its per-position scores agree with it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import HEAD_CASES, synthetic_layout, total_mass
from nslm.models.heads import HNLMHead, NNLMHead
from nslm.models.softmax import SoftmaxLayer


@settings(max_examples=25, deadline=None)
@given(
    vocab=st.integers(5, 300),
    dim=st.integers(2, 24),
    kind=st.sampled_from(["full", "adaptive"]),
    seed=st.integers(0, 10_000),
)
def test_nnlm_distribution_sums_to_one(vocab: int, dim: int, kind: str, seed: int) -> None:
    torch.manual_seed(seed)
    head = NNLMHead(dim, vocab, kind, [vocab // 5, vocab // 2], 2.0)
    h = torch.randn(7, dim) * 3
    assert np.all(np.abs(total_mass(head.log_dist(h)) - 1) < 1e-4)
    y = torch.randint(0, vocab, (7,))
    direct = head.target_log_prob(h, y, torch.zeros(7, dtype=torch.long))
    via_dist = head.log_dist(h).gather(1, y.unsqueeze(1)).squeeze(1)
    assert torch.allclose(direct, via_dist, atol=1e-4)


@settings(max_examples=25, deadline=None)
@given(**HEAD_CASES)
def test_hnlm_distribution_sums_to_one(
    vocab: int, n_classes: int, dim: int, kind: str, seed: int
) -> None:
    torch.manual_seed(seed)
    layout = synthetic_layout(vocab, n_classes, seed)
    head = HNLMHead(dim, layout, kind, [3, 8], 2.0)
    h = torch.randn(6, dim) * 3
    assert np.all(np.abs(total_mass(head.log_dist(h)) - 1) < 1e-4)
    # The pairs (word or class tag, member) also sum to 1: Σ_top P_top = 1 and each
    # within-class softmax sums to 1, so the joint over (c, w) pairs is normalised (Eq. 3).
    top = head.top.log_prob(h)
    assert np.all(np.abs(total_mass(top) - 1) < 1e-4)


def test_hnlm_scores_match_distribution() -> None:
    """At a word position, and at a class position whose type is in one V_c only, the
    per-position score equals the marginal distribution's entry; with overlapping V_c the
    pair score is at most the marginal."""
    torch.manual_seed(0)
    layout = synthetic_layout(120, 4, seed=3)
    head = HNLMHead(16, layout, "adaptive", [5, 20], 2.0)
    h = torch.randn(1, 16)
    dist = head.log_dist(h)[0]
    n_memberships = np.zeros(120, int)
    for m in layout.members[1:]:
        n_memberships[m] += 1
    for c, members in enumerate(layout.members):
        for w in members[:5].tolist() if c else np.flatnonzero(n_memberships == 0)[:5].tolist():
            score = head.target_log_prob(h, torch.tensor([w]), torch.tensor([c]))[0]
            if c == 0 or n_memberships[w] == 1:
                assert score.item() == pytest.approx(dist[w].item(), abs=1e-4)
            else:
                assert score.item() <= dist[w].item() + 1e-5


def test_hnlm_class_probability_is_the_top_level_entry() -> None:
    torch.manual_seed(1)
    layout = synthetic_layout(60, 3, seed=5)
    head = HNLMHead(8, layout, "full", [], 1.0)
    h = torch.randn(1, 8)
    top = head.top.log_prob(h)[0]
    w = int(layout.members[2][0])
    got = head.top_log_prob(h, torch.tensor([w]), torch.tensor([2]))[0]
    assert got.item() == pytest.approx(top[layout.top_of_tag[2]].item(), abs=1e-6)
    plain = int(np.flatnonzero(layout.top_of_word >= 0)[0])
    got = head.top_log_prob(h, torch.tensor([plain]), torch.tensor([0]))[0]
    assert got.item() == pytest.approx(top[layout.top_of_word[plain]].item(), abs=1e-6)


def test_adaptive_softmax_falls_back_to_full_for_tiny_outputs() -> None:
    layer = SoftmaxLayer(4, 3, "adaptive", [2000, 10000])
    assert layer.kind == "full"
