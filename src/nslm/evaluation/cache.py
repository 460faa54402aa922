"""The neural cache of Grave, Joulin & Usunier (2017), for any model with hidden states.

The cache stores the pairs (h_i, w_{i+1}) of the last ``window`` positions and predicts

    p_cache(w | h_t) ∝ Σ_{i ∈ window, w_{i+1} = w} exp(θ · h_tᵀ h_i)          (Grave Eq. 2)
    p(w | h_t) = (1 − λ) · p_model(w | h_t) + λ · p_cache(w | h_t)             (Grave Eq. 3)

Scoring is vectorised: one matrix product per block of positions against the keys that
any of them can see, never a Python loop per position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CacheParams:
    window: int = 500
    lam: float = 0.25  # λ, the weight of the cache
    theta: float = 0.75  # θ, the flatness of the cache distribution

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError("cache window must be ≥ 1")
        if not 0.0 <= self.lam <= 1.0:
            raise ValueError("cache λ must lie in [0, 1]")


def cache_target_probs(
    hidden: torch.Tensor, tokens: torch.Tensor, window: int, theta: float, block: int = 512
) -> torch.Tensor:
    """p_cache(tokens[t]) for every position t, NaN where the cache is still empty.

    ``hidden[i]`` is the state that predicted ``tokens[i + 1]``. Position t is predicted from
    the query ``hidden[t − 1]``; its memory is the pairs (hidden[i], tokens[i + 1]) of the
    ``window`` positions before it, t − 1 − window ≤ i < t − 1.
    """
    n = tokens.shape[0]
    out = torch.full((n,), math.nan, dtype=torch.float64)
    queries_idx = torch.arange(1, n)  # predict tokens[t] from hidden[t-1]
    for start in range(0, n - 1, block):
        q = queries_idx[start : start + block]  # target positions t
        first_key = max(0, int(q[0]) - 1 - window)
        last_key = int(q[-1]) - 1  # exclusive: keys i < t - 1
        if last_key <= first_key:
            continue
        keys = hidden[first_key:last_key].to(torch.float64)  # (K, d)
        key_next = tokens[first_key + 1 : last_key + 1]  # the word each key predicted
        scores = theta * (hidden[q - 1].to(torch.float64) @ keys.T)  # (B, K)
        key_pos = torch.arange(first_key, last_key)
        visible = (key_pos[None, :] < q[:, None] - 1) & (
            key_pos[None, :] >= q[:, None] - 1 - window
        )
        scores = scores.masked_fill(~visible, -math.inf)
        has_memory = visible.any(dim=1)
        weights = torch.softmax(scores[has_memory], dim=1)
        match = key_next[None, :] == tokens[q[has_memory]][:, None]
        out[q[has_memory]] = (weights * match).sum(dim=1)
    return out


def mix_target_log_probs(
    model_log_probs: torch.Tensor, cache_probs: torch.Tensor, lam: float
) -> torch.Tensor:
    """log((1 − λ) p_model + λ p_cache) at each target (Grave Eq. 3).

    Where the cache is empty (NaN), the model's own probability is kept, so every position's
    distribution still sums to 1. NaN model entries (unscored positions) stay NaN.
    """
    model = torch.exp(model_log_probs.to(torch.float64))
    mixed = (1.0 - lam) * model + lam * cache_probs
    return torch.log(torch.where(torch.isnan(cache_probs), model, mixed))


def cache_distribution(
    model_probs: torch.Tensor,
    query: torch.Tensor,
    keys: torch.Tensor,
    key_next: torch.Tensor,
    params: CacheParams,
) -> torch.Tensor:
    """The whole mixed next-token distribution at one position (for ``predict`` and tests).

    ``keys``/``key_next`` are the cached (h_i, w_{i+1}) pairs, at most ``window`` of them.
    """
    mixed = (1.0 - params.lam) * model_probs.to(torch.float64)
    if keys.shape[0] == 0:
        return mixed + params.lam * model_probs.to(torch.float64)
    keys, key_next = keys[-params.window :], key_next[-params.window :]
    weights = torch.softmax(params.theta * (keys.to(torch.float64) @ query.to(torch.float64)), 0)
    cache = torch.zeros_like(mixed).index_add_(0, key_next, weights)
    return mixed + params.lam * cache
