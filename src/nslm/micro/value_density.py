"""A density over positive values, and the probability it gives the interval a number rounds.

Spithourakis & Riedel (2018) score a numeral by a mixture of Gaussians over its value,
integrated over the interval the written numeral stands for. The same here, on the log
scale, where counts, prices and distances of very different sizes are alike:

    t = log10(x) − log10(r),    p(t) = Σ_k π_k · N(t; μ_k, σ_k²)

with r = 1 for a density of the value itself and r = a reference value (the previous
number of the article, the quantity a conversion converts) for a density of the ratio
x / r. The probability of a spelling that rounds the interval [lo, hi) is

    P([lo, hi)) = Σ_k π_k · (Φ((log10 hi − log10 r − μ_k)/σ_k) − Φ((log10 lo − log10 r − μ_k)/σ_k))

(lo ≤ 0 reads as −∞), computed in log space from whichever tail keeps the difference
precise, so that a width of 10⁻⁸ of a value still has a finite logarithm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import log_ndtr

from nslm.micro.logspace import logsumexp


def log_gaussian_interval(za: np.ndarray, zb: np.ndarray) -> np.ndarray:
    """log(Φ(zb) − Φ(za)) for za ≤ zb (broadcast), precise in both tails."""
    za, zb = np.broadcast_arrays(np.asarray(za, float), np.asarray(zb, float))
    upper = za > 0  # both in the upper tail: Φ(zb) − Φ(za) = Q(za) − Q(zb)
    hi = log_ndtr(np.where(upper, -za, zb))
    lo = log_ndtr(np.where(upper, -zb, za))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = hi + np.log(-np.expm1(lo - hi))
    return np.where(zb > za, out, -np.inf)


@dataclass
class LogMixture:
    """A mixture of Gaussians over log10 of a value (or of its ratio to a reference)."""

    weights: np.ndarray
    means: np.ndarray
    sigmas: np.ndarray

    @classmethod
    def fit(cls, t: np.ndarray, max_components: int = 4, floor: float = 0.02) -> LogMixture:
        """EM (scikit-learn's GaussianMixture) on the finite entries of ``t``, the number of
        components chosen by BIC; σ at least ``floor`` (a hundredth of a decade is
        about the precision the corpus writes values at)."""
        from sklearn.mixture import GaussianMixture

        t = np.asarray(t, float)
        t = t[np.isfinite(t)][:, None]
        if len(t) < 2:
            return cls(np.ones(1), np.array([float(t.mean()) if len(t) else 0.0]), np.ones(1))
        best, best_bic = None, np.inf
        for k in range(1, min(max_components, len(np.unique(t))) + 1):
            gm = GaussianMixture(k, reg_covar=floor**2, random_state=0, max_iter=300).fit(t)
            bic = gm.bic(t)
            if bic < best_bic:
                best, best_bic = gm, bic
        assert best is not None
        sig = np.sqrt(best.covariances_.reshape(-1))
        return cls(best.weights_.astype(float), best.means_[:, 0].astype(float), sig)

    def log_interval(self, lo: np.ndarray, hi: np.ndarray, log_ref: np.ndarray) -> np.ndarray:
        """log P(lo ≤ x < hi) with x = r · 10^t (broadcast over lo, hi and log10 r)."""
        lo, hi, log_ref = np.broadcast_arrays(
            np.asarray(lo, float), np.asarray(hi, float), np.asarray(log_ref, float)
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            ta = np.where(lo > 0, np.log10(np.where(lo > 0, lo, 1.0)), -np.inf) - log_ref
            tb = np.log10(hi) - log_ref
        z = (np.stack([ta, tb], -1)[..., None] - self.means) / self.sigmas  # (..., 2, K)
        parts = np.log(self.weights) + log_gaussian_interval(z[..., 0, :], z[..., 1, :])
        return logsumexp(parts, axis=-1)

    def log_below(self, x: float, log_ref: np.ndarray) -> np.ndarray:
        """log P(x' < x): the mass of the support [0, x)."""
        return self.log_interval(np.zeros_like(log_ref), np.full_like(log_ref, x), log_ref)

    def get_params(self) -> dict[str, Any]:
        return {
            "weights": self.weights.tolist(),
            "means": self.means.tolist(),
            "sigmas": self.sigmas.tolist(),
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> LogMixture:
        return cls(*(np.asarray(params[k], float) for k in ("weights", "means", "sigmas")))
