"""The shared HNLM top level (``hnlm_top = "shared"``): normalised, and equal to the maths it
claims — the NNLM's own scores, and the top level renormalised over (V_top ∪ tags)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings

from helpers import HEAD_CASES, shared_layout, synthetic_layout, total_mass
from nslm.models.heads import HNLMHead, NNLMHead


def shared_heads(vocab: int, n_classes: int, dim: int, kind: str, seed: int):
    torch.manual_seed(seed)
    layout = shared_layout(vocab, n_classes, seed)
    nnlm = NNLMHead(dim, vocab, kind, [vocab // 5, vocab // 2], 2.0)
    hnlm = HNLMHead(dim, layout, kind, [], 1.0, words=nnlm.softmax)
    return layout, nnlm, hnlm


@settings(max_examples=30, deadline=None)
@given(**HEAD_CASES)
def test_shared_top_level_is_normalised_and_agrees_with_its_scores(
    vocab: int, n_classes: int, dim: int, kind: str, seed: int
) -> None:
    layout, nnlm, hnlm = shared_heads(vocab, n_classes, dim, kind, seed)
    n = 9
    h = torch.randn(n, dim) * 3
    top = hnlm.top.log_prob(h)
    assert top.shape == (n, vocab + n_classes)
    assert np.all(np.abs(total_mass(top) - 1) < 1e-4)
    assert np.all(np.abs(total_mass(hnlm.log_dist(h)) - 1) < 1e-4)
    # a class-only type has no top-level mass of its own
    assert torch.all(top[:, :vocab][:, torch.as_tensor(layout.top_of_word < 0)] == -torch.inf)

    rng = np.random.default_rng(seed)
    classes = torch.as_tensor(rng.integers(0, n_classes + 1, n))
    targets = torch.empty(n, dtype=torch.long)
    for i, c in enumerate(classes.tolist()):
        pool = layout.members[c] if c else np.flatnonzero(layout.top_of_word >= 0)
        targets[i] = int(rng.choice(pool))
    got_nnlm, got_top, got_mass = hnlm.top.joint(h, targets, classes)
    # the NNLM half is exactly the NNLM head's score (one pass, no approximation)
    want_nnlm = nnlm.target_log_prob(h, targets, classes)
    assert torch.allclose(got_nnlm, want_nnlm, atol=1e-4)
    top_ids = torch.where(
        classes > 0, torch.as_tensor(layout.top_of_tag)[classes], torch.as_tensor(targets)
    )
    want_top = top.gather(1, top_ids.unsqueeze(1)).squeeze(1)
    assert torch.allclose(got_top, want_top, atol=1e-4)
    assert torch.allclose(hnlm.top_log_prob(h, targets, classes), want_top, atol=1e-4)
    # the class mass is the top level's Σ_c P(c | h), whatever the target
    want_mass = torch.logsumexp(top[:, vocab:], dim=1)
    assert torch.allclose(got_mass, want_mass, atol=1e-4)


def test_top_level_keeps_the_nnlm_ratios_within_a_softmax_level() -> None:
    """Two top-level words in the same part of the output layer (the shortlist, or one tail
    cluster) keep their NNLM probability ratio: same logits, only normalisers change."""
    layout, nnlm, hnlm = shared_heads(200, 3, 16, "adaptive", seed=4)
    h = torch.randn(1, 16)
    top = hnlm.top.log_prob(h)[0]
    nn_dist = nnlm.log_dist(h)[0]
    cutoffs = nnlm.softmax.adaptive.cutoffs
    bounds = [(0, nnlm.softmax.adaptive.shortlist_size), *itertools.pairwise(cutoffs)]
    for lo, hi in bounds:
        words = [w for w in range(lo, hi) if layout.top_of_word[w] >= 0]
        a, b = words[0], words[-1]
        assert a != b
        assert (top[a] - top[b]).item() == pytest.approx((nn_dist[a] - nn_dist[b]).item(), abs=1e-4)


def test_shared_top_trains_the_nnlm_layer_and_adds_only_tag_rows() -> None:
    layout, nnlm, hnlm = shared_heads(100, 3, 8, "adaptive", seed=2)
    own = {id(p) for p in nnlm.parameters()}
    extra = [p for p in hnlm.top.parameters() if id(p) not in own]
    assert sum(p.numel() for p in extra) == 3 * 8 + 3  # the tag rows and their biases
    h = torch.randn(5, 8)
    words = np.flatnonzero(layout.top_of_word >= 0)
    targets = torch.as_tensor(words[:5])
    _, top, _ = hnlm.top.joint(h, targets, torch.zeros(5, dtype=torch.long))
    (-top.sum()).backward()
    assert nnlm.softmax.adaptive.head.weight.grad.abs().sum() > 0


def test_separate_layout_is_refused_by_the_shared_top_level() -> None:
    layout = synthetic_layout(50, 2, seed=1)
    nnlm = NNLMHead(8, 50, "full", [], 1.0)
    with pytest.raises(ValueError, match="shared=True"):
        HNLMHead(8, layout, "full", [], 1.0, words=nnlm.softmax)


@pytest.mark.parametrize("kind", ["full", "adaptive"])
def test_class_words_holding_almost_all_mass_take_the_exact_path(kind: str) -> None:
    """When class-only types hold > 99.9 % of a softmax block, 1 − Σ dropped would lose
    float32 precision; those rows are recomputed exactly and still match ``log_prob``."""
    layout, nnlm, hnlm = shared_heads(120, 2, 8, kind, seed=7)
    class_only = np.flatnonzero(layout.top_of_word < 0)
    if kind == "adaptive":
        layer = nnlm.softmax.adaptive.head
        shortlist = nnlm.softmax.adaptive.shortlist_size
    else:
        layer, shortlist = nnlm.softmax.linear, 120
    w = int(class_only[class_only < shortlist][0])
    h = torch.randn(4, 8)
    with torch.no_grad():
        layer.weight[w] = h[0] * 50 / h[0].norm() ** 2  # logit ≈ 50 on row 0
        hnlm.top.tags.bias.fill_(-100.0)  # no tag mass to hide the kept words' share
    words = np.flatnonzero(layout.top_of_word >= 0)
    targets = torch.as_tensor(words[:4])
    _, top, _ = hnlm.top.joint(h, targets, torch.zeros(4, dtype=torch.long))
    want = hnlm.top.log_prob(h).gather(1, targets.unsqueeze(1)).squeeze(1)
    assert torch.isfinite(top).all()
    assert torch.allclose(top, want, atol=1e-3)
