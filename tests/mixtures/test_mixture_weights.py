"""History-bucketed mixture weights (mixtures/mixture_weights.py): the rates are the
smoothed training shares, a bucket reads only the previous token, the bucketed mixture is a
distribution at every position, and EM per bucket finds weights a pooled mixture cannot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.mixtures import mixture_weights as mw
from nslm.perplexity import perplexity


class TinySplit:
    def __init__(self, token_ids, class_ids) -> None:
        self.token_ids = np.asarray(token_ids)
        self.class_ids = np.asarray(class_ids)


def test_rates_are_smoothed_training_shares() -> None:
    # token 0 ("in") is followed by a class token 2 times of 3; token 1 never precedes one
    split = TinySplit([0, 2, 0, 2, 0, 1, 1, 0], [0, 1, 0, 1, 0, 0, 0, 0])
    rates = mw.class_next_rates(split, vocab_size=4)
    overall = 2 / 7
    a = mw.ALPHA
    assert rates[0] == pytest.approx((2 + a * overall) / (3 + a))
    assert rates[1] == pytest.approx((0 + a * overall) / (2 + a))
    assert rates[3] == pytest.approx(overall)  # never seen: the overall rate


def test_a_position_is_bucketed_by_its_previous_token_only() -> None:
    rates = np.array([0.0, 0.05, 0.5])
    signal = mw.previous_rates(np.array([2, 0, 1, 2, 2]), rates)
    assert signal.tolist() == [0.0, 0.5, 0.0, 0.05, 0.5]
    assert mw.history_buckets(signal, edges=(0.01, 0.1)).tolist() == [0, 2, 0, 1, 2]


def test_an_unscored_position_falls_in_the_first_bucket() -> None:
    signal = np.array([np.nan, 0.002, 0.02, 0.7])  # log Σ_c P(c | h) is NaN at position 0
    assert mw.history_buckets(signal).tolist() == [0, 0, 2, 6]


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 5),
    t=st.integers(1, 40),
    v=st.integers(2, 30),
    n_buckets=st.integers(1, 4),
)
def test_the_bucketed_mixture_sums_to_one(seed, k, t, v, n_buckets) -> None:
    """Weights chosen by the history's bucket: at every position the mixture of the full
    distributions sums to 1, and its entry at the target is what blend_by_bucket scores."""
    rng = np.random.default_rng(seed)
    full = rng.dirichlet(np.full(v, 0.5), size=(k, t))  # (K, T, V)
    weights = rng.dirichlet(np.ones(k), size=n_buckets)
    buckets = rng.integers(0, n_buckets, size=t)
    targets = rng.integers(0, v, size=t)
    got = mw.blend_by_bucket(np.log(full[:, np.arange(t), targets]), buckets, weights)
    for j in range(t):
        mixed = (weights[buckets[j]][:, None] * full[:, j]).sum(axis=0)
        assert abs(mixed.sum() - 1.0) < 1e-9
        assert got[j] == pytest.approx(math.log(mixed[targets[j]]), rel=1e-9)


def test_em_per_bucket_finds_what_each_bucket_needs() -> None:
    """Bucket 0's tokens come from model A, bucket 1's from model B: each bucket's weights
    go to its own model, and the bucketed mixture beats the best pooled one; a bucket with
    too few positions keeps the pooled weights."""
    rng = np.random.default_rng(0)
    n = 3 * mw.MIN_POSITIONS
    buckets = np.repeat([0, 1, 2], [n, n, 10])
    good, bad = (
        np.log(rng.uniform(0.3, 0.6, 2 * n + 10)),
        np.log(rng.uniform(0.001, 0.01, 2 * n + 10)),
    )
    lp = np.stack([np.where(buckets == 0, good, bad), np.where(buckets == 1, good, bad)])
    pooled = mw.fit_weights(lp)
    fitted = mw.fit_bucket_weights(lp, buckets, pooled, n_buckets=3)
    assert fitted[0, 0] > 0.95 and fitted[1, 1] > 0.95
    assert np.allclose(fitted[2], pooled)
    bucketed = perplexity(mw.blend_by_bucket(lp, buckets, fitted))
    assert bucketed < 0.8 * perplexity(mw.blend_log_probs(lp, pooled))
