"""Every n-gram variant and order gives a normalised distribution, and the two scoring paths
(vectorised stream scoring and the dense next-word distribution) agree."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngram_corpora import markov_stream
from nslm.ngram.build import build_model
from nslm.perplexity import perplexity

TRAIN = markov_stream(20_000, seed=0)
HELD_OUT = markov_stream(3_000, seed=1)
VARIANTS = ("kn", "mle", "add-k")
ORDERS = (1, 2, 3, 4, 5)


@functools.cache
def model_for(method: str, order: int):
    return build_model(TRAIN, order, method, add_k=0.1)


@functools.cache
def held_out_scores(method: str, order: int) -> np.ndarray:
    return model_for(method, order).score_ids(HELD_OUT.ids, first_nan=False)


def _history(ids: np.ndarray, t: int) -> list[int]:
    """The tokens before position t, back to 8 tokens (the model cuts at </s> itself)."""
    return [int(x) for x in ids[max(0, t - 8) : t]]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("method", VARIANTS)
@settings(max_examples=25, deadline=None)
@given(t=st.integers(min_value=0, max_value=len(TRAIN.ids) - 1))
def test_seen_contexts_sum_to_one(method: str, order: int, t: int) -> None:
    model = model_for(method, order)
    total = model.distribution(_history(TRAIN.ids, t)).sum()
    assert abs(total - 1.0) < 1e-6


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("method", VARIANTS)
@settings(max_examples=25, deadline=None)
@given(history=st.lists(st.integers(min_value=0, max_value=len(TRAIN.itos) - 1), max_size=6))
def test_arbitrary_contexts(method: str, order: int, history: list[int]) -> None:
    """Smoothed models normalise at any history, seen or not; MLE is undefined (all zero) at
    a history it never saw and normalised at one it saw."""
    model = model_for(method, order)
    total = model.distribution(history).sum()
    if method == "mle":
        assert abs(total - 1.0) < 1e-6 or total == 0.0
    else:
        assert abs(total - 1.0) < 1e-6


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("method", VARIANTS)
@settings(max_examples=15, deadline=None)
@given(t=st.integers(min_value=0, max_value=len(HELD_OUT.ids) - 1))
def test_stream_scores_equal_the_distribution(method: str, order: int, t: int) -> None:
    model = model_for(method, order)
    expected = model.distribution(_history(HELD_OUT.ids, t))[HELD_OUT.ids[t]]
    got = np.exp(held_out_scores(method, order)[t])
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_mle_unseen_ngrams_give_infinite_perplexity() -> None:
    """The lecture's sparsity point: MLE gives some held-out trigrams probability 0."""
    scores = held_out_scores("mle", 3)
    assert np.isneginf(scores).any()
    assert perplexity(scores) == float("inf")
    # smoothing fixes it: every held-out token gets a positive probability
    for method in ("kn", "add-k"):
        assert np.isfinite(held_out_scores(method, 3)).all()
        assert np.isfinite(perplexity(held_out_scores(method, 3)))


def test_higher_order_kn_fits_training_text_better() -> None:
    train_ppl = [perplexity(model_for("kn", n).score_ids(TRAIN.ids)[1:]) for n in (1, 2, 3)]
    assert train_ppl[0] > train_ppl[1] > train_ppl[2]


def test_first_position_is_nan_for_the_evaluator() -> None:
    scores = model_for("kn", 2).score_ids(HELD_OUT.ids)
    assert scores.shape == HELD_OUT.ids.shape
    assert np.isnan(scores[0]) and not np.isnan(scores[1:]).any()
