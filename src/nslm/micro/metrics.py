"""Metric functions f_c(w_t, w_{t-1}) of the paper ("Micro-Models", Eq. 1), and their registry.

A metric is a numpy expression over a :class:`Candidates` and a :class:`Context` that
broadcasts: called with candidates shaped (1, K) and contexts (B, 1) it scores every member
of V_c for every position in one array op (no loop over candidates); called with both
shaped (B,) it scores each position's actual target.

User code adds a metric without editing nslm::

    from nslm.micro import register_metric

    @register_metric("log_value", needs=("value",), kind="continuous")
    def log_value(cand, ctx):
        return np.log1p(cand.values)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nslm.errors import NslmError, lookup
from nslm.micro.classdata import Candidates
from nslm.micro.history import Context

# Fields a metric may need. Candidate fields must be finite for every member of V_c;
# context fields decide per position whether the metric applies (else: unigram fall-back).
CANDIDATE_FIELDS = frozenset({"value", "coords"})
CONTEXT_FIELDS = frozenset({"prev_value", "prev_coords", "prev_ids", "convert_target"})
METRIC_KINDS = ("continuous", "count", "binary")

MetricFn = Callable[[Candidates, Context], np.ndarray]


@dataclass(frozen=True)
class Metric:
    """A named metric function with what it needs and what kind of values it yields.

    ``kind`` decides which PDFs may take it: ``binary`` (0/1) metrics go with the binary
    PDF, ``count`` metrics (training counts) also with the unigram PDF.
    """

    name: str
    fn: MetricFn
    needs: frozenset[str]
    kind: str
    description: str = ""

    @property
    def context_fields(self) -> frozenset[str]:
        return self.needs & CONTEXT_FIELDS

    def __call__(self, cand: Candidates, ctx: Context) -> np.ndarray:
        return np.asarray(self.fn(cand, ctx), dtype=np.float64)

    def available(self, ctx: Context) -> np.ndarray:
        """Per position: whether the context holds what this metric needs (B,) bool."""
        ok = np.ones(len(ctx), dtype=bool)
        if "prev_value" in self.needs:
            ok &= np.isfinite(ctx.prev_value)
        if "prev_coords" in self.needs:
            ok &= np.isfinite(ctx.prev_coords).all(axis=1)
        if "prev_ids" in self.needs:
            ok &= ctx.prev_ids >= 0
        if "convert_target" in self.needs:
            ok &= np.isfinite(ctx.convert_target).any(axis=-1)
        return ok

    def applies_to(self, cand: Candidates) -> bool:
        """Whether every member of V_c has the attributes this metric reads."""
        if "value" in self.needs and not np.isfinite(cand.values).all():
            return False
        return not ("coords" in self.needs and not np.isfinite(cand.coords).all())


_METRICS: dict[str, Metric] = {}


def register_metric(
    name: str, *, needs: tuple[str, ...] = (), kind: str = "continuous", description: str = ""
) -> Callable[[MetricFn], MetricFn]:
    """Decorator: make ``fn(cand, ctx) -> array`` available as metric ``name``."""
    unknown = set(needs) - CANDIDATE_FIELDS - CONTEXT_FIELDS
    if unknown:
        raise NslmError(f"metric {name!r}: unknown needs {sorted(unknown)}")
    if kind not in METRIC_KINDS:
        raise NslmError(f"metric {name!r}: kind must be one of {', '.join(METRIC_KINDS)}")

    def decorate(fn: MetricFn) -> MetricFn:
        _METRICS[name] = Metric(name, fn, frozenset(needs), kind, description or fn.__doc__ or "")
        return fn

    return decorate


def get_metric(name: str) -> Metric:
    return lookup(_METRICS, name, "metric")


def metric_names() -> list[str]:
    return list(_METRICS)


# -- the paper's five metrics ("Number and Geography NSLMs"; docs/micro-models.md) ---------


@register_metric("diff", needs=("value", "prev_value"))
def diff(cand: Candidates, ctx: Context) -> np.ndarray:
    """value(w) − value(w_prev): the numeric difference (paper Figure 2 for years)."""
    return cand.values - ctx.prev_value


@register_metric("freq", kind="count")
def freq(cand: Candidates, ctx: Context) -> np.ndarray:
    """The training count of w as this class (unary)."""
    return cand.counts


@register_metric("value", needs=("value",))
def value(cand: Candidates, ctx: Context) -> np.ndarray:
    """value(w) (unary)."""
    return cand.values


@register_metric("convert", needs=("value", "convert_target"), kind="binary")
def convert(cand: Candidates, ctx: Context) -> np.ndarray:
    """1 if w equals the preceding quantity converted to a plausible unit, at w's precision.

    The unit written after w is not known when w is predicted, so ``ctx.convert_target``
    holds the quantity in each unit the training split converts the quantity's unit to
    (see :mod:`nslm.data.conversions`); matching any of them counts. "At w's precision":
    |target − value(w)| ≤ half of w's rounding step (see
    :func:`~nslm.micro.classdata.precision_step`); the 1e-9 absorbs binary float error in
    ties such as 2.5 km written as "2.5".
    """
    gap = np.abs(ctx.convert_target - cand.values[..., None])
    return (gap <= 0.5 * cand.steps[..., None] + 1e-9).any(axis=-1).astype(float)


@register_metric("euclidean", needs=("coords", "prev_coords"))
def euclidean(cand: Candidates, ctx: Context) -> np.ndarray:
    """−squared distance from the previous place in (lat, long) degrees (Tobler's law)."""
    return -((cand.coords - ctx.prev_coords) ** 2).sum(axis=-1)
