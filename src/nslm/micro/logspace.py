"""log Σ exp along an axis, for the micro-models' small arrays.

``scipy.special.logsumexp`` is general (weights, signs, array-API dispatch) and costs tens of
microseconds of overhead a call; the explorer's next-token breakdown makes about fifty such
calls on rows of a few hundred members, where that overhead is most of the time. This is the
plain max-shifted form, with the same results on finite, −inf and all-−inf rows.
"""

from __future__ import annotations

import numpy as np


def logsumexp(x: np.ndarray, axis: int = -1, keepdims: bool = False) -> np.ndarray:
    """log Σ exp(x) along ``axis``, shifted by the max so nothing overflows; a row of only
    −inf gives −inf (an empty restriction), NaN propagates."""
    x = np.asarray(x, dtype=np.float64)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # log 0 = −inf: a row of only −inf
        out = np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True)) + top
    return out if keepdims else np.squeeze(out, axis=axis)


def log_normalise(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """x − log Σ exp(x) along ``axis``: log-probabilities that sum to 1 (log-softmax)."""
    return x - logsumexp(x, axis=axis, keepdims=True)


def log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 − e^x) for x ≤ 0, precise near 0 and far below it."""
    x = np.asarray(x, float)
    with np.errstate(divide="ignore"):
        return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def sigmoid(x: float) -> float:
    """A weight in (0, 1) from its logit: the open micro-models fit their weights as logits."""
    return float(1 / (1 + np.exp(-x)))


def logit(p: float) -> float:
    return float(np.log(p) - np.log1p(-p))
