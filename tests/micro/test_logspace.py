"""nslm.micro.logspace against scipy.special.logsumexp: same values on finite rows, rows with
−inf entries and rows of only −inf, along either axis."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.special import logsumexp as scipy_logsumexp

from nslm.micro.logspace import log_normalise, logsumexp

finite_or_minus_inf = st.one_of(st.floats(-700, 700, allow_nan=False), st.just(-np.inf))


@settings(max_examples=200, deadline=None)
@given(
    x=arrays(
        np.float64, st.tuples(st.integers(1, 6), st.integers(1, 9)), elements=finite_or_minus_inf
    ),
    axis=st.sampled_from([0, 1]),
    keepdims=st.booleans(),
)
def test_logsumexp_is_scipys(x: np.ndarray, axis: int, keepdims: bool) -> None:
    with np.errstate(divide="ignore"):
        want = scipy_logsumexp(x, axis=axis, keepdims=keepdims)
    got = logsumexp(x, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    x=arrays(
        np.float64,
        st.tuples(st.integers(1, 5), st.integers(1, 40)),
        elements=st.floats(-1e4, 1e4, allow_nan=False),
    )
)
def test_log_normalise_rows_sum_to_one(x: np.ndarray) -> None:
    np.testing.assert_allclose(np.exp(log_normalise(x, axis=1)).sum(axis=1), 1.0, rtol=1e-12)


def test_a_row_of_only_minus_inf_stays_minus_inf_without_nan() -> None:
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]])
    np.testing.assert_array_equal(logsumexp(x, axis=1), [-np.inf, 0.0])
    assert not np.isnan(log_normalise(x[1:], axis=1)).any()
