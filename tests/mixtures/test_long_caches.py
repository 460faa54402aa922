"""The class cache and the unigram cache against one-position-at-a-time references."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.mixtures.long_caches import class_cache_probs, unigram_cache_probs

VOCAB = 7


def case(seed: int, n: int, d: int = 4):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=gen)
    tokens = torch.randint(0, VOCAB, (n,), generator=gen)
    is_key = np.random.default_rng(seed).random(n) < 0.4
    return hidden, tokens, is_key


def class_cache_distribution(hidden, tokens, is_key, t: int, window: int, theta: float):
    """The whole p_class(· | h_t) over the vocabulary, or None when the window has no key."""
    keys = [i for i in range(max(0, t - 1 - window), t - 1) if is_key[i + 1]]
    if not keys:
        return None
    scores = torch.tensor([theta * float(hidden[t - 1] @ hidden[i]) for i in keys])
    weights = torch.softmax(scores.double(), 0)
    dist = np.zeros(VOCAB)
    for w, i in zip(weights.tolist(), keys, strict=True):
        dist[int(tokens[i + 1])] += w
    return dist


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 60), block=st.integers(1, 9))
def test_class_cache_equals_the_reference_and_sums_to_one(seed: int, n: int, block: int) -> None:
    hidden, tokens, is_key = case(seed, n)
    windows, thetas = (1, 5, 30), (0.3, 1.2)
    positions = np.arange(1, n)
    got = class_cache_probs(hidden, tokens, is_key, windows, thetas, positions, block=block)
    for w in windows:
        for th in thetas:
            for j, t in enumerate(positions):
                dist = class_cache_distribution(hidden, tokens, is_key, int(t), w, th)
                if dist is None:
                    assert math.isnan(got[(w, th)][j])
                    continue
                assert dist.sum() == pytest.approx(1.0, abs=1e-9)
                assert got[(w, th)][j] == pytest.approx(dist[int(tokens[t])], abs=1e-5)


def test_class_cache_at_chosen_positions_equals_all_positions() -> None:
    hidden, tokens, is_key = case(4, 80)
    every = class_cache_probs(hidden, tokens, is_key, [10], [0.5], np.arange(1, 80))
    some = np.array([3, 17, 18, 40, 79])
    picked = class_cache_probs(hidden, tokens, is_key, [10], [0.5], some, block=2)
    np.testing.assert_allclose(
        picked[(10, 0.5)], every[(10, 0.5)][some - 1], rtol=1e-5, equal_nan=True
    )


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 80), window=st.integers(1, 30))
def test_unigram_cache_equals_counting(seed: int, n: int, window: int) -> None:
    tokens = np.random.default_rng(seed).integers(0, VOCAB, size=n)
    positions = np.arange(n)
    got = unigram_cache_probs(tokens, window, positions)
    for t in positions:
        before = tokens[max(0, t - window) : t]
        if len(before) == 0:
            assert math.isnan(got[t])
            continue
        assert got[t] == pytest.approx(np.mean(before == tokens[t]))
        # a distribution: the shares of all types add up to 1
        assert sum(np.mean(before == w) for w in range(VOCAB)) == pytest.approx(1.0)
