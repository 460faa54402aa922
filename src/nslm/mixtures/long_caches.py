"""Two caches that reach far back at little cost, beside the neural cache (nslm.mixtures.cache).

The neural cache (Grave et al. 2017) compares the query with every state of its window, so
its cost grows with the window; on WikiText-2 the Numbers tokens still gain from windows of
5,000 and more (BENCHMARKS.md, "The best NSLM"). These two see as far at a fraction of that:

* The **class cache**: Grave's Eq. 2 over the keys whose next token is a class token
  (a number, a date, a place), the only ones a Numbers or Locations token can match:

      p_class(w | h_t) ∝ Σ_{i ∈ window, c(w_{i+1}) > 0, w_{i+1} = w} exp(θ · h_tᵀ h_i)

  normalised over those keys alone, so a class token of the window gets the mass the word
  keys would dilute. About 1 key in 30 on WikiText-2, so a window of 10,000 tokens costs
  what a window of ~350 costs the neural cache.
* The **unigram cache** of Kuhn & De Mori (1990): p_uni(w) = (occurrences of w among the
  last ``window`` tokens) / ``window``, no states at all.

Each is a distribution over the vocabulary wherever its window holds a key (NaN where it
holds none), so a fixed-weight mixture with it stays one (nslm.mixtures.best_column).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch


def class_cache_probs(
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    is_key: np.ndarray,
    windows: Sequence[int],
    thetas: Sequence[float],
    positions: np.ndarray,
    block: int = 256,
) -> dict[tuple[int, float], np.ndarray]:
    """p_class(tokens[t]) at ``positions`` (sorted, ≥ 1) for every (window, θ).

    Layout as :func:`nslm.mixtures.cache.cache_probs_grid`: ``hidden[i]`` predicted
    ``tokens[i + 1]``, position t is queried with ``hidden[t − 1]`` against the keys i with
    t − 1 − window ≤ i < t − 1; here only the i whose ``is_key[i + 1]`` (the next token's
    class) count. NaN where a window holds no key.
    """
    key_pos = np.flatnonzero(np.asarray(is_key)[1:])  # i such that tokens[i + 1] is a key
    keys = hidden[torch.from_numpy(key_pos)].float()
    key_next = tokens[torch.from_numpy(key_pos + 1)]
    out = {(int(w), float(th)): np.full(len(positions), math.nan) for w in windows for th in thetas}
    w_max = max(windows)
    for start in range(0, len(positions), block):
        t = np.asarray(positions[start : start + block])
        lo = int(np.searchsorted(key_pos, t[0] - 1 - w_max))
        hi = int(np.searchsorted(key_pos, t[-1] - 1))  # keys i < t − 1
        if hi <= lo:
            continue
        where = torch.from_numpy(key_pos[lo:hi])[None, :]
        query = torch.from_numpy(t - 1)[:, None]
        raw = hidden[torch.from_numpy(t - 1)].float() @ keys[lo:hi].T  # (B, K): h_tᵀ h_i
        match = key_next[lo:hi][None, :] == tokens[torch.from_numpy(t)][:, None]
        for window in windows:
            visible = (where >= query - window) & (where < query)
            has = visible.any(dim=1).numpy()
            for theta in thetas:
                weights = torch.softmax((theta * raw).masked_fill(~visible, -math.inf), dim=1)
                p = (weights * match).sum(dim=1).double().numpy()
                got = out[(int(window), float(theta))][start : start + len(t)]
                got[has] = p[has]
    return out


def unigram_cache_probs(tokens: np.ndarray, window: int, positions: np.ndarray) -> np.ndarray:
    """p_uni(tokens[t]): the share of the ``window`` tokens before t (t − window ≤ i < t,
    fewer at a split's start) that equal tokens[t], at ``positions``; NaN at t = 0."""
    tokens = np.asarray(tokens, dtype=np.int64)
    n = len(tokens)
    # every occurrence as one sorted key, type-major then position: the occurrences of a
    # type in [lo, hi) are the keys between type·(n+1) + lo and type·(n+1) + hi
    keys = np.sort(tokens * (n + 1) + np.arange(n))
    t = np.asarray(positions)
    base = tokens[t] * (n + 1)
    count = np.searchsorted(keys, base + t) - np.searchsorted(
        keys, base + np.maximum(t - window, 0)
    )
    seen = np.minimum(t, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, count / seen, math.nan)
