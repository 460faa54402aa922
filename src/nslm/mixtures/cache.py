"""The neural cache of Grave, Joulin & Usunier (2017), for any model with hidden states.

The cache stores the pairs (h_i, w_{i+1}) of the last ``window`` positions and predicts

    p_cache(w | h_t) ∝ Σ_{i ∈ window, w_{i+1} = w} exp(θ · h_tᵀ h_i)          (Grave Eq. 2)
    p(w | h_t) = (1 − λ) · p_model(w | h_t) + λ · p_cache(w | h_t)             (Grave Eq. 3)

Scoring is vectorised: one matrix product per block of positions against the keys that
any of them can see, never a Python loop per position.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
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


def _blocks(targets: torch.Tensor, block: int, span: int) -> list[tuple[int, int]]:
    """Runs of ``targets`` (sorted) of at most ``block`` entries covering at most ``span``
    positions, so each run's key range stays near ``window + span`` however sparse it is."""
    runs, start, n = [], 0, targets.shape[0]
    while start < n:
        stop = int(torch.searchsorted(targets, targets[start] + span))
        stop = max(start + 1, min(stop, start + block))
        runs.append((start, stop))
        start = stop
    return runs


def cache_probs_grid(
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    windows: Sequence[int],
    thetas: Sequence[float],
    *,
    positions: torch.Tensor | np.ndarray | None = None,
    block: int = 0,
    dtype: torch.dtype = torch.float64,
) -> dict[tuple[int, float], torch.Tensor]:
    """p_cache(tokens[t]) (Grave Eq. 2) at ``positions`` for every (window, θ) of a grid.

    ``hidden[i]`` is the state that predicted ``tokens[i + 1]``. Position t is predicted from
    the query ``hidden[t − 1]``; its memory is the pairs (hidden[i], tokens[i + 1]) of the
    ``window`` positions before it, t − 1 − window ≤ i < t − 1. ``positions`` (sorted, each
    ≥ 1; default every t ≥ 1) are the targets wanted; the result has one float64 entry per
    position, NaN where the memory is still empty.

    One matrix product per block of targets against every key the largest window can see
    serves the whole grid: a smaller window is a slice of its columns, a θ a rescaling. The
    product runs in ``dtype`` (float32: the faster, at a relative error of ~1e-5). The
    rest is kept to a few passes over each block, since it can cost more than the product: the
    window is an additive 0/−inf mask (one band, reused, for the usual full contiguous
    block), and the matching keys, few per row, are gathered instead of masked.
    """
    n = tokens.shape[0]
    if positions is None:
        targets = torch.arange(1, n)
    else:
        targets = torch.as_tensor(np.asarray(positions), dtype=torch.long)
    if targets.numel() and int(targets[0]) < 1:
        raise ValueError("position 0 has no query state")
    grid = [(int(w), float(th)) for w in windows for th in thetas]
    out = {key: torch.full((targets.shape[0],), math.nan, dtype=torch.float64) for key in grid}
    w_max = max(w for w, _ in grid)
    # ~window/4 targets per block keeps the wasted triangle of the key range small (measured)
    block = block or max(32, min(256, w_max // 4))
    h = hidden.to(dtype)
    ids = tokens.to(torch.int32)  # a cheaper comparison than int64
    bands: dict[tuple[int, int], torch.Tensor] = {}
    for start, stop in _blocks(targets, block, span=block):
        t = targets[start:stop]
        first_key = max(0, int(t[0]) - 1 - w_max)
        last_key = int(t[-1]) - 1  # exclusive: keys i < t − 1
        if last_key <= first_key:
            continue
        raw = h[t - 1] @ h[first_key:last_key].T  # (B, K): h_tᵀ h_i
        rows, cols = torch.nonzero(
            ids[first_key + 1 : last_key + 1][None, :] == ids[t][:, None], as_tuple=True
        )  # keys whose next word is the target
        has_memory = t >= 2  # every window ≥ 1 sees position t − 2
        for window in sorted({w for w, _ in grid}):
            cut = max(0, int(t[0]) - 1 - window - first_key)  # keys no target here can see
            mask = _window_mask(t, first_key + cut, last_key, window, bands, dtype)
            keep = cols >= cut
            r, c = rows[keep], cols[keep] - cut
            for theta in [th for w, th in grid if w == window]:
                scores = torch.add(mask, raw[:, cut:], alpha=theta)  # θ·h_tᵀh_i, −inf unseen
                weights = torch.softmax(scores, dim=1)  # one fused kernel (NaN: no memory)
                p = torch.zeros(len(t), dtype=dtype).index_add_(0, r, weights[r, c])
                got = out[(window, theta)][start:stop]
                got[has_memory] = p[has_memory].to(torch.float64)
    return out


def _window_mask(
    t: torch.Tensor,
    first_key: int,
    last_key: int,
    window: int,
    bands: dict[tuple[int, int], torch.Tensor],
    dtype: torch.dtype,
) -> torch.Tensor:
    """0 where target t sees key i (t − 1 − window ≤ i < t − 1), −inf elsewhere: (B, K)."""
    b, k = len(t), last_key - first_key
    contiguous = int(t[-1]) - int(t[0]) == b - 1 and int(t[0]) - 1 - window == first_key
    if contiguous:  # target j sees keys j .. j + window − 1: the same band in every such block
        if (b, window) not in bands:
            bands[(b, window)] = _mask(torch.arange(b), torch.arange(b) + window, k, dtype)
        return bands[(b, window)]
    return _mask(t - 1 - window - first_key, t - 1 - first_key, k, dtype)


def _mask(lo: torch.Tensor, hi: torch.Tensor, k: int, dtype: torch.dtype) -> torch.Tensor:
    r = torch.arange(k)[None, :]
    visible = (r >= lo[:, None]) & (r < hi[:, None])
    return torch.zeros(visible.shape, dtype=dtype).masked_fill_(~visible, -math.inf)


def cache_target_probs(
    hidden: torch.Tensor, tokens: torch.Tensor, window: int, theta: float, block: int = 512
) -> torch.Tensor:
    """p_cache(tokens[t]) for every position t (NaN at t = 0 and where the cache is empty);
    :func:`cache_probs_grid` for one (window, θ), in float64."""
    n = tokens.shape[0]
    out = torch.full((n,), math.nan, dtype=torch.float64)
    if n > 1:
        got = cache_probs_grid(hidden, tokens, [window], [theta], block=block)
        out[1:] = got[(int(window), float(theta))]
    return out


def mix_target_log_probs(
    model_log_probs: torch.Tensor, cache_probs: torch.Tensor, lam: float
) -> torch.Tensor:
    """log((1 − λ) p_model + λ p_cache) at each target (Grave Eq. 3), in log space.

    Where the cache is empty (NaN), the model's own probability is kept, so every position's
    distribution still sums to 1; λ = 0 returns the model's log-probabilities exactly. NaN
    model entries (unscored positions) stay NaN.
    """
    model = torch.as_tensor(model_log_probs).to(torch.float64)
    if lam == 0.0:
        return model.clone()
    cache = torch.as_tensor(cache_probs).to(torch.float64)
    keep = -math.inf if lam == 1.0 else math.log1p(-lam)
    mixed = torch.logaddexp(keep + model, math.log(lam) + torch.log(cache))
    return torch.where(torch.isnan(cache), model, mixed)


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
