"""PDFs that turn metric values into weights over V_c (paper "Micro-Models"), and their registry.

Each PDF is a small estimator in the scikit-learn habit: constructed with hyperparameters
(chosen on validation, ``hyper_grid``), ``fit(m)`` on the metric values of the training
targets, then ``log_score(M)`` gives an unnormalised log-weight for every candidate of every
row of a (B, K) metric matrix. The micro-model normalises these over V_c (docs/micro-models.md,
"PDFs"): P(w) = pdf(m(w)) / Σ_{w'∈V_c} pdf(m(w')). Parameters are plain JSON (``get_params``).

The discrete PDFs (``multinomial``, ``binary``) share a bin's probability among the
candidates that fall in it *in that row*, so the bin probabilities are the probabilities of
the target's bin, as fitted.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from nslm.errors import NslmError, lookup
from nslm.micro.logspace import logsumexp

_LOG_2PI = math.log(2 * math.pi)


class Pdf:
    """Base class; subclasses set ``name``, ``accepts`` (metric kinds) and ``hyper_grid``."""

    name: ClassVar[str] = ""
    accepts: ClassVar[frozenset[str]] = frozenset()
    hyper_grid: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    # True when a candidate's score depends on its metric value alone (not on its row).
    elementwise: ClassVar[bool] = True

    def __init__(self, **hyper: Any) -> None:
        self.hyper = dict(hyper)
        self.fitted: dict[str, Any] = {}

    def fit(self, m: np.ndarray) -> Pdf:
        raise NotImplementedError

    def log_score(self, m: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def log_density(self, x: np.ndarray) -> np.ndarray:
        """Density (or, for discrete PDFs, probability per unit width) at points x: plots."""
        return self.log_score(np.atleast_2d(x))[0]

    def get_params(self) -> dict[str, Any]:
        return {"name": self.name, "hyper": self.hyper, "fitted": _jsonable(self.fitted)}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Pdf:
        pdf = get_pdf(params["name"])(**params.get("hyper", {}))
        pdf.fitted = {
            k: np.asarray(v, dtype=float) if isinstance(v, list) else v
            for k, v in params.get("fitted", {}).items()
        }
        return pdf


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in d.items()}


_PDFS: dict[str, type[Pdf]] = {}


def register_pdf(cls: type[Pdf]) -> type[Pdf]:
    """Class decorator: make a :class:`Pdf` subclass available by its ``name``."""
    if not cls.name:
        raise NslmError(f"PDF class {cls.__name__} has no name")
    _PDFS[cls.name] = cls
    return cls


def get_pdf(name: str) -> type[Pdf]:
    return lookup(_PDFS, name, "PDF")


def pdf_names() -> list[str]:
    return list(_PDFS)


def _finite_1d(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64).ravel()
    m = m[np.isfinite(m)]
    if m.size == 0:
        raise NslmError("cannot fit a PDF: no training positions with this metric")
    return m


def _shared_log_score(bins: np.ndarray, log_p: np.ndarray) -> np.ndarray:
    """log p[bin] − log (#candidates of the row in that bin), for a (B, K) bin matrix."""
    bins = np.atleast_2d(bins)
    n_rows, n_bins = bins.shape[0], len(log_p)
    flat = bins + n_bins * np.arange(n_rows)[:, None]
    per_row = np.bincount(flat.ravel(), minlength=n_rows * n_bins).reshape(n_rows, n_bins)
    members = np.take_along_axis(per_row, bins, axis=1)
    return log_p[bins] - np.log(members)


@register_pdf
class UnigramPdf(Pdf):
    """∝ training count: pdf(m) = m + α on the ``freq`` metric (add-α keeps unseen types > 0)."""

    name = "unigram"
    accepts = frozenset({"count"})
    hyper_grid = ({"alpha": 0.01}, {"alpha": 0.1}, {"alpha": 0.5}, {"alpha": 1.0})

    def fit(self, m: np.ndarray) -> Pdf:
        return self

    def log_score(self, m: np.ndarray) -> np.ndarray:
        return np.log(np.asarray(m, dtype=float) + self.hyper.get("alpha", 0.1))


@register_pdf
class MultinomialPdf(Pdf):
    """A categorical over binned metric values, shared within a bin (docs/micro-models.md).

    Bin edges are training quantiles, so bins hold equal training mass and a tied value
    (a year difference of exactly 1) gets a bin of its own; the outer bins are open.
    Bin probabilities are add-½ smoothed so no bin has probability 0.
    """

    name = "multinomial"
    accepts = frozenset({"continuous", "count"})
    hyper_grid = tuple({"bins": b} for b in (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048))
    elementwise = False

    def fit(self, m: np.ndarray) -> Pdf:
        m = _finite_1d(m)
        # method="lower": edges are observed values, so no bin falls between two integers
        probs = np.linspace(0, 1, self.hyper.get("bins", 16) + 1)[1:-1]
        qs = np.quantile(m, probs, method="lower")
        edges = np.unique(qs)
        counts = np.bincount(np.searchsorted(edges, m, side="right"), minlength=len(edges) + 1)
        self.fitted = {"edges": edges, "probs": (counts + 0.5) / (counts.sum() + 0.5 * len(counts))}
        return self

    def bins(self, m: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.fitted["edges"], m, side="right")

    def log_score(self, m: np.ndarray) -> np.ndarray:
        return _shared_log_score(self.bins(m), np.log(self.fitted["probs"]))

    def log_density(self, x: np.ndarray) -> np.ndarray:
        edges = np.asarray(self.fitted["edges"])
        lo = edges[0] - (edges[-1] - edges[0] + 1.0)  # open outer bins: draw them as wide
        full = np.concatenate([[lo], edges, [edges[-1] + (edges[-1] - edges[0] + 1.0)]])
        widths = np.diff(full)
        b = self.bins(x)
        return np.log(self.fitted["probs"][b]) - np.log(widths[b])


@register_pdf
class BinaryPdf(Pdf):
    """For 0/1 metrics: P(m = 1) = p, shared among the candidates scoring 1 (and 1−p the rest)."""

    name = "binary"
    accepts = frozenset({"binary"})
    elementwise = False

    def fit(self, m: np.ndarray) -> Pdf:
        m = _finite_1d(m)
        ones = float((m > 0.5).sum())
        self.fitted = {"p": (ones + 0.5) / (m.size + 1.0)}
        return self

    def log_score(self, m: np.ndarray) -> np.ndarray:
        p = self.fitted["p"]
        return _shared_log_score((np.asarray(m) > 0.5).astype(np.int64), np.log([1 - p, p]))


@register_pdf
class GaussianPdf(Pdf):
    """A Gaussian by maximum likelihood; the variance floor keeps a constant metric usable."""

    name = "gaussian"
    accepts = frozenset({"continuous", "count"})

    def fit(self, m: np.ndarray) -> Pdf:
        m = _finite_1d(m)
        var = float(m.var())
        self.fitted = {"mean": float(m.mean()), "var": var + 1e-6 * (1.0 + var)}
        return self

    def log_score(self, m: np.ndarray) -> np.ndarray:
        mean, var = self.fitted["mean"], self.fitted["var"]
        return -0.5 * (_LOG_2PI + math.log(var) + (np.asarray(m, float) - mean) ** 2 / var)

    @property
    def mode(self) -> float:
        return float(self.fitted["mean"])


@register_pdf
class MixturePdf(Pdf):
    """A mixture of Gaussians fitted by EM (scikit-learn's GaussianMixture).

    The number of components and the variance floor (``reg``, in units of the data's
    variance) are hyperparameters chosen on validation. Fitting runs on standardised values,
    so years, squared degrees and populations alike are well conditioned.
    """

    name = "mog"
    accepts = frozenset({"continuous", "count"})
    hyper_grid = tuple(
        {"components": k, "reg": r} for k in (1, 2, 3, 4, 6, 8, 12, 16) for r in (1e-6, 1e-4, 1e-2)
    )

    def fit(self, m: np.ndarray) -> Pdf:
        from sklearn.mixture import GaussianMixture

        m = _finite_1d(m)
        center, scale = float(np.median(m)), float(m.std()) or 1.0
        z = ((m - center) / scale)[:, None]
        k = min(int(self.hyper.get("components", 2)), len(np.unique(z)))
        gm = GaussianMixture(
            n_components=max(k, 1),
            covariance_type="full",
            reg_covar=float(self.hyper.get("reg", 1e-6)),
            random_state=0,
            max_iter=300,
        ).fit(z)
        self.fitted = {
            "weights": gm.weights_.astype(float),
            "means": center + scale * gm.means_[:, 0],
            "vars": scale**2 * gm.covariances_[:, 0, 0],
        }
        return self

    def log_score(self, m: np.ndarray) -> np.ndarray:
        w, mu, var = (np.asarray(self.fitted[k], float) for k in ("weights", "means", "vars"))
        x = np.asarray(m, float)[..., None]
        comp = np.log(w) - 0.5 * (_LOG_2PI + np.log(var) + (x - mu) ** 2 / var)
        return logsumexp(comp, axis=-1)


@register_pdf
class ExponentialPdf(Pdf):
    """pdf(m) ∝ exp(−λ (origin − m)) for m ≤ origin, λ by maximum likelihood.

    With ``euclidean`` (m = −d²) this is the isotropic 2-D Gaussian around w_prev,
    exp(−d² / 2σ²) with σ² = E[d²] / 2: our reading of the paper's "Euclidean + Gaussian"
    for places, next to the literal Gaussian over m. Values beyond the origin score as it.
    """

    name = "exponential"
    accepts = frozenset({"continuous"})

    def fit(self, m: np.ndarray) -> Pdf:
        m = _finite_1d(m)
        origin = float(m.max())
        mean_gap = float((origin - m).mean())
        self.fitted = {"origin": origin, "rate": 1.0 / max(mean_gap, 1e-12)}
        return self

    def log_score(self, m: np.ndarray) -> np.ndarray:
        origin, rate = self.fitted["origin"], self.fitted["rate"]
        gap = np.maximum(origin - np.asarray(m, dtype=float), 0.0)
        return math.log(rate) - rate * gap
