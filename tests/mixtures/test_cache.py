"""The neural cache (Grave et al. 2017): normalisation, λ = 0, repetition, vectorisation."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.mixtures.cache import (
    CacheParams,
    cache_distribution,
    cache_target_probs,
    mix_target_log_probs,
)

VOCAB = 13


def random_case(seed: int, n: int, d: int = 6):
    gen = torch.Generator().manual_seed(seed)
    hidden = torch.randn(n, d, generator=gen)
    tokens = torch.randint(0, VOCAB, (n,), generator=gen)
    logits = torch.randn(n, VOCAB, generator=gen)
    return hidden, tokens, torch.softmax(logits.double(), dim=1)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 40),
    window=st.integers(1, 12),
    lam=st.floats(0.0, 1.0),
    theta=st.floats(0.01, 3.0),
)
def test_mixed_distribution_sums_to_one(seed, n, window, lam, theta) -> None:
    hidden, tokens, probs = random_case(seed, n)
    params = CacheParams(window=window, lam=lam, theta=theta)
    t = n - 1
    mixed = cache_distribution(probs[t], hidden[t - 1], hidden[: t - 1], tokens[1:t], params)
    assert abs(float(mixed.sum()) - 1.0) < 1e-9
    assert bool((mixed >= 0).all())


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 60),
    window=st.integers(1, 15),
    block=st.integers(1, 17),
    theta=st.floats(0.01, 2.0),
)
def test_vectorised_scores_equal_one_position_at_a_time(seed, n, window, block, theta) -> None:
    hidden, tokens, probs = random_case(seed, n)
    lam = 0.3
    params = CacheParams(window=window, lam=lam, theta=theta)
    cache = cache_target_probs(hidden, tokens, window, theta, block=block)
    model_lp = torch.log(probs[torch.arange(n), tokens])
    fast = mix_target_log_probs(model_lp, cache, lam)
    for t in range(1, n):
        full = cache_distribution(probs[t], hidden[t - 1], hidden[: t - 1], tokens[1:t], params)
        assert math.isclose(float(fast[t]), math.log(float(full[tokens[t]])), rel_tol=1e-9)


def test_lambda_zero_returns_the_model_exactly() -> None:
    hidden, tokens, probs = random_case(0, 30)
    params = CacheParams(window=10, lam=0.0, theta=1.0)
    full = cache_distribution(probs[29], hidden[28], hidden[:28], tokens[1:29], params)
    assert torch.equal(full, probs[29])
    cache = cache_target_probs(hidden, tokens, 10, 1.0)
    model_lp = torch.log(probs[torch.arange(30), tokens])
    assert torch.allclose(mix_target_log_probs(model_lp, cache, 0.0), model_lp, atol=0, rtol=1e-15)


def test_a_repeated_token_gains_probability() -> None:
    hidden = torch.zeros(8, 4)
    hidden[:, 0] = 1.0  # identical states: the cache spreads evenly over its memory
    tokens = torch.tensor([1, 5, 2, 3, 4, 6, 7, 5])
    uniform = torch.full((8, VOCAB), 1.0 / VOCAB, dtype=torch.float64)
    model_lp = torch.log(uniform[torch.arange(8), tokens])
    cache = cache_target_probs(hidden, tokens, window=10, theta=1.0)
    mixed = mix_target_log_probs(model_lp, cache, lam=0.25)
    assert float(mixed[7]) > float(model_lp[7])  # 5 was seen at position 1
    assert float(mixed[6]) < float(model_lp[6])  # 7 was never seen: it loses mass
    # outside the window the repetition is forgotten
    far = cache_target_probs(hidden, tokens, window=3, theta=1.0)
    assert float(far[7]) == 0.0
