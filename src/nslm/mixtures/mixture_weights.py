"""The weights of NSLM-best's mixture (:mod:`nslm.mixtures.best_column`): maximum
likelihood by EM, the blend they define, and weights that depend on the history.

EM (Dempster, Laird & Rubin 1977; the way SRILM's ``compute-best-mix`` tunes interpolated
LMs) finds the mixture weights π_k maximising Σ_t log Σ_k π_k P_k(w_t): a concave problem,
so it climbs to its optimum from the uniform start.

Weights chosen by the history alone, never by the predicted word, keep the mixture a
distribution at every position:

    P(w_t | h) = Σ_k π_k(b(h)) · P_k(w_t | h),   Σ_k π_k(b) = 1 for every bucket b

Jelinek & Mercer (1980) tie the weights of deleted interpolation by buckets of the history;
here a history's bucket is a probability that a class token (a number, a date, a place)
comes next, read one of two ways (:data:`SIGNALS`):

* ``r(w_prev)``: how often the history's last token v = w_{t−1} was followed by a class
  token in training, smoothed towards the overall rate r̄,

      r(v) = (#{i : w_i = v, c(w_{i+1}) > 0} + α·r̄) / (#{i : w_i = v} + α)

* ``P(class|h)``: the LM's own Σ_c P(c | h), the HNLM top level's mass on the class tags
  (Eq. 3's first factor; free in the shared top level's scoring pass).

So where a number or a place is likely (after "in", in a list of places) the caches and the
micro-models may weigh more than where a plain word is. Each bucket's weights are EM's on
the tuning positions of that bucket; a bucket with fewer than ``MIN_POSITIONS`` of them
keeps the pooled weights.
"""

from __future__ import annotations

import math

import numpy as np

from nslm.data.corpus import Split
from nslm.micro.logspace import logsumexp

# probability edges: 7 buckets, about a factor 3 apart, from "never a class" to "mostly"
EDGES = (0.003, 0.01, 0.03, 0.1, 0.3, 0.6)
SIGNALS = ("r(w_prev)", "P(class|h)")
ALPHA = 10.0  # the prior's weight in training tokens
MIN_POSITIONS = 1000  # fewer tuning positions than this: the bucket keeps the pooled weights


def fit_weights(log_probs: np.ndarray, iters: int = 200, tol: float = 1e-7) -> np.ndarray:
    """Mixture weights maximising Σ_t log Σ_k π_k P_k(w_t) (EM; ``log_probs``: (K, T)),
    until the mean log-likelihood gains less than ``tol`` nats (perplexity to ~1e-7).

    A missing entry (NaN: a cache with an empty window) stands for the mixture of the others
    at that position, as :func:`blend_log_probs` scores it, refreshed at every step.
    """
    k = log_probs.shape[0]
    missing = np.isnan(log_probs)
    weights = np.full(k, 1.0 / k)
    previous = -math.inf
    for _ in range(iters):
        filled = log_probs
        if missing.any():
            filled = np.where(missing, blend_log_probs(log_probs, weights)[None, :], log_probs)
        with np.errstate(divide="ignore"):  # a weight that reached 0 stays 0
            joint = filled + np.log(weights)[:, None]
        total = logsumexp(joint, axis=0)
        weights = np.exp(joint - total).mean(axis=1)  # E step and M step in one line
        mean = float(total.mean())
        if mean - previous < tol:
            break
        previous = mean
    weights /= weights.sum()
    # EM nears an optimum on the simplex's edge only slowly: a single model may still be
    # likelier than where it stopped, and then it is the answer (so the mixture is never
    # worse on the tuning positions than any one of its parts)
    if not missing.any():
        alone = log_probs.mean(axis=1)
        if alone.max() > blend_log_probs(log_probs, weights).mean():
            weights = np.eye(k)[int(alone.argmax())]
    return weights


def blend_log_probs(log_probs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """log Σ_k π_k P_k(w_t) per position (``log_probs``: (K, T), NaN = component missing).

    A missing component's weight goes to the others in proportion; a position the first
    component (the NNLM) does not score stays unscored (NaN), as in every other column.
    """
    present = ~np.isnan(log_probs)
    # a weight EM drove to 0 is kept at 1e-300: where only such components are present
    # (the cache alone missing, the rest at 0), they share the position, and it is scored
    log_w = np.log(np.maximum(np.asarray(weights, dtype=np.float64), 1e-300))[:, None]
    out = logsumexp(np.where(present, log_probs + log_w, -math.inf), axis=0)
    with np.errstate(invalid="ignore"):  # −inf − (−inf) where nothing is present: NaN below
        out -= logsumexp(np.where(present, log_w, -math.inf), axis=0)
    out[~present[0]] = math.nan
    return out


def class_next_rates(train: Split, vocab_size: int) -> np.ndarray:
    """r(v) for every vocabulary id v (module docstring), from the training split."""
    before = np.asarray(train.token_ids[:-1], dtype=np.int64)
    class_next = np.asarray(train.class_ids[1:]) > 0
    seen = np.bincount(before, minlength=vocab_size).astype(np.float64)
    hits = np.bincount(before, weights=class_next, minlength=vocab_size)
    overall = float(class_next.mean()) if len(class_next) else 0.0
    return (hits + ALPHA * overall) / (seen + ALPHA)


def previous_rates(token_ids: np.ndarray, rates: np.ndarray) -> np.ndarray:
    """r(w_{t−1}) at every position t of a split (position 0, with no history: 0)."""
    out = np.zeros(len(token_ids), dtype=np.float64)
    out[1:] = rates[np.asarray(token_ids[:-1])]
    return out


def history_buckets(signal: np.ndarray, edges=EDGES) -> np.ndarray:
    """The bucket of every position from its probability of a class next (NaN: bucket 0)."""
    return np.searchsorted(np.asarray(edges), np.nan_to_num(signal, nan=0.0), side="right")


def fit_bucket_weights(
    log_probs: np.ndarray, buckets: np.ndarray, pooled: np.ndarray, n_buckets: int = len(EDGES) + 1
) -> np.ndarray:
    """(n_buckets, K) weights: EM on each bucket's positions of ``log_probs`` (K, T), the
    ``pooled`` weights where a bucket has fewer than MIN_POSITIONS of them."""
    out = np.tile(np.asarray(pooled, dtype=np.float64), (n_buckets, 1))
    for b in range(n_buckets):
        at = buckets == b
        if at.sum() >= MIN_POSITIONS:
            out[b] = fit_weights(log_probs[:, at])
    return out


def blend_by_bucket(log_probs: np.ndarray, buckets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """log Σ_k π_k(b_t) P_k(w_t) per position (:func:`blend_log_probs`, bucket by bucket)."""
    out = np.full(log_probs.shape[1], np.nan)
    for b in np.unique(buckets):
        at = buckets == b
        out[at] = blend_log_probs(log_probs[:, at], weights[b])
    return out
