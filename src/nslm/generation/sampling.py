"""Sampling the next token from a distribution: temperature, top-k, top-p (nucleus), seeded.

Model-agnostic: it takes a probability vector (n-gram LMs) or logits / log-probabilities
(neural LMs, after ``.double().cpu().numpy()``), so every LM in nslm samples the same way.

The filters apply in this order (the usual one, e.g. in Holtzman et al. 2020):

1. temperature T: p_i ∝ p_i^(1/T), i.e. logits / T. T = 0 means greedy (argmax); as T → 0
   the distribution tends to the argmax, and T = 1 leaves it unchanged.
2. top-k: keep the k most probable tokens (k = 0 or None keeps all).
3. top-p: keep the smallest set of most probable tokens whose mass reaches p (p = 1 keeps all).

Ties are broken towards the lower token id, so greedy decoding is deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nslm.errors import NslmError


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and np.isfinite(self.temperature)):
            raise NslmError(f"temperature must be a finite number ≥ 0, got {self.temperature}")
        if self.top_k is not None and self.top_k < 0:
            raise NslmError(f"top-k must be ≥ 0 (0 = no limit), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise NslmError(f"top-p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0 or self.top_k == 1


def filtered_distribution(
    scores: np.ndarray, config: SamplingConfig, *, log_space: bool = False
) -> np.ndarray:
    """The distribution actually sampled from, after temperature, top-k and top-p.

    ``scores`` are probabilities, or logits / log-probabilities with ``log_space``.
    Returns a float64 probability vector summing to 1.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise ValueError("expected a non-empty 1-D score vector")
    if log_space:
        logits = scores.copy()
    else:
        if np.any(scores < 0) or not np.isfinite(scores).all():
            raise ValueError("probabilities must be finite and ≥ 0")
        with np.errstate(divide="ignore"):
            logits = np.log(scores)
    if not np.isfinite(logits.max()):
        raise ValueError("the distribution has no token with positive probability")
    out = np.zeros_like(logits)
    if config.greedy:
        out[int(np.argmax(logits))] = 1.0
        return out
    logits = logits / config.temperature
    # Stable order: descending score, ties by lower id.
    order = np.lexsort((np.arange(len(logits)), -logits))
    keep = len(order)
    if config.top_k:
        keep = min(keep, config.top_k)
    top = order[:keep]
    probs = np.exp(logits[top] - logits[top[0]])
    probs /= probs.sum()
    if config.top_p < 1.0:
        # the smallest prefix whose cumulative mass reaches top_p
        cut = int(np.searchsorted(np.cumsum(probs), config.top_p, side="left")) + 1
        top, probs = top[:cut], probs[:cut] / probs[:cut].sum()
    out[top] = probs
    return out


class Sampler:
    """Draws token ids with one seeded generator, so a seed fixes the whole sequence."""

    def __init__(self, config: SamplingConfig, seed: int | None = None) -> None:
        self.config = config
        self.rng = np.random.default_rng(seed)

    def sample(self, scores: np.ndarray, *, log_space: bool = False) -> int:
        probs = filtered_distribution(scores, self.config, log_space=log_space)
        if self.config.greedy:
            return int(np.argmax(probs))
        # inverse-CDF draw: one uniform per token, reproducible across numpy versions
        u = self.rng.random()
        cdf = np.cumsum(probs)
        return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(probs) - 1))
