"""A micro-model: metric ∘ PDF normalised over V_c, smoothed with the class unigram (Eq. 1).

    P_MM(w | c, w_prev) = (1 − ε) · pdf(m(w, w_prev)) / Σ_{w'∈V_c} pdf(m(w', w_prev))
                          + ε · P_uni(w)                      (paper Eq. 1; docs/micro-models.md)

and P_MM = P_uni where the position has no context (no previous class token in the article,
or none of what the metric needs). P_uni(w) = (count_c(w) + α) / Σ (count_c + α) is the
class unigram with add-α, so every member of V_c keeps a probability > 0 whenever ε > 0.

The NSLM of paper Eq. 4 is then log P(c | h) + :meth:`MicroModel.log_prob_targets`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.classdata import ClassData
from nslm.micro.history import CONTEXT_MODES, Context
from nslm.micro.logspace import log_normalise
from nslm.micro.metrics import Metric, get_metric
from nslm.micro.pdfs import Pdf, get_pdf

# Rows × candidates held in memory at once when scoring (the MoG adds a components axis).
_CELL_BUDGET = 1 << 20


def check_pair(metric: Metric, pdf: type[Pdf]) -> None:
    """A PDF takes only the metric kinds it declares (``binary`` PDF for 0/1 metrics, …)."""
    if metric.kind not in pdf.accepts:
        raise NslmError(
            f"PDF {pdf.name!r} does not take the {metric.kind} metric {metric.name!r} "
            f"(it takes: {', '.join(sorted(pdf.accepts))})"
        )


def metric_matrix(metric: Metric, cls: ClassData, ctx: Context) -> np.ndarray:
    """m(w, w_prev) for every row of ``ctx`` and every w in V_c: one broadcast op, (B, K)."""
    values = metric(cls.candidates.as_row(), ctx.as_column())
    return np.broadcast_to(values, (len(ctx), len(cls.candidates)))


def unique_values(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct metric values and where each entry maps (diffs of years repeat a lot)."""
    uniq, inverse = np.unique(matrix, return_inverse=True)
    return uniq, inverse.reshape(-1)


def normalised_log_pdf(
    pdf: Pdf, matrix: np.ndarray, unique: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """log pdf(m(w)) − log Σ_{w'∈V_c} pdf(m(w')), row by row (the normaliser over V_c).

    See docs/micro-models.md, "PDFs": P(w) = pdf(m(w)) / Σ_{w'∈V_c} pdf(m(w')).

    An elementwise PDF is evaluated once per distinct metric value (``unique``, reusable
    across PDFs on one matrix); the others row by row in bounded-memory chunks.
    """
    if pdf.elementwise and matrix.size:
        uniq, inverse = unique if unique is not None else unique_values(matrix)
        scores = pdf.log_score(uniq)[inverse].reshape(matrix.shape)
        return log_normalise(scores, axis=1)
    out = np.empty(matrix.shape)
    step = max(1, _CELL_BUDGET // max(matrix.shape[1], 1))
    for start in range(0, matrix.shape[0], step):
        scores = pdf.log_score(np.ascontiguousarray(matrix[start : start + step]))
        scores = np.broadcast_to(scores, (min(step, matrix.shape[0] - start), matrix.shape[1]))
        out[start : start + step] = log_normalise(scores, axis=1)
    return out


def target_metric(metric: Metric, cls: ClassData, split: Split, mode: str) -> np.ndarray:
    """m(w_t, w_prev) of each actual target in ``split`` that has the context it needs (1-D).

    These are the samples a PDF is fitted on (the histogram of paper Figure 2).
    """
    positions, index = cls.positions(split)
    ctx = cls.context(split, positions, mode)
    ok = metric.available(ctx)
    values = metric(cls.candidates.take(index[ok]), ctx.rows(ok))
    return np.broadcast_to(values, (int(ok.sum()),))


def unigram_log_probs(cls: ClassData, alpha: float) -> np.ndarray:
    """log P_uni over V_c: add-α class counts (K,)."""
    weights = cls.candidates.counts + alpha
    return np.log(weights) - np.log(weights.sum())


def smooth(log_mm: np.ndarray, log_uni: np.ndarray, epsilon: float) -> np.ndarray:
    """log((1 − ε) P_MM + ε P_uni), in log space so a tiny P_MM never underflows to 0."""
    eps = np.asarray(epsilon, dtype=float)  # an array of ε broadcasts: the tuning grid
    if eps.ndim == 0 and eps <= 0:
        return log_mm
    return np.logaddexp(np.log1p(-eps) + log_mm, np.log(eps) + log_uni)


def log_prob_at(
    log_prob: Callable[[Context], np.ndarray], ctx: Context, index: np.ndarray, n_candidates: int
) -> np.ndarray:
    """``log_prob(ctx)[b, ..., index[b]]`` for every row b, without the (B, …, K) matrix:
    (B,) from a (B, K) ``log_prob``, (B, M) from a (B, M, K) one (M components at once).

    Each distinct context is scored once (:meth:`Context.unique`): rows that share a previous
    year or city share a distribution over V_c.
    """
    distinct, which = ctx.unique()
    out: np.ndarray | None = None
    order = np.argsort(which, kind="stable")
    bounds = np.searchsorted(which[order], np.arange(len(distinct) + 1))
    step = max(1, _CELL_BUDGET // max(n_candidates, 1))
    for start in range(0, len(distinct), step):
        stop = min(start + step, len(distinct))
        full = log_prob(distinct.rows(np.arange(start, stop)))
        if out is None:
            out = np.empty((len(ctx), *full.shape[1:-1]))
        rows = order[bounds[start] : bounds[stop]]
        out[rows] = full[which[rows] - start, ..., index[rows]]
    return out if out is not None else np.empty(0)


class MicroModel:
    """Metric + PDF + unigram smoothing + fall-back for one class, scikit-learn style.

    It reads the previous token of its class only; the context-aware model that also reads
    the LM's hidden state (:class:`nslm.micro.context_model.ContextMicroModel`) takes the
    same calls with the states given, and this one ignores them (``needs_features``).
    """

    needs_features = False

    def __init__(
        self,
        cls: ClassData,
        metric: str,
        pdf: str | Pdf,
        *,
        context: str = "class",
        epsilon: float = 0.05,
        unigram_alpha: float = 0.1,
        **pdf_hyper: Any,
    ) -> None:
        if context not in CONTEXT_MODES:
            raise NslmError(f"unknown context {context!r}; choose {', '.join(CONTEXT_MODES)}")
        if not 0 <= epsilon < 1:
            raise NslmError(f"epsilon must be in [0, 1), got {epsilon}")
        self.cls = cls
        self.metric = get_metric(metric)
        self.pdf = pdf if isinstance(pdf, Pdf) else get_pdf(pdf)(**pdf_hyper)
        check_pair(self.metric, type(self.pdf))
        if not self.metric.applies_to(cls.candidates):
            raise NslmError(f"metric {metric!r} needs attributes that <{cls.name}> lacks")
        self.context = context
        self.epsilon = float(epsilon)
        self.unigram_alpha = float(unigram_alpha)

    # -- fitting ---------------------------------------------------------------------------

    def target_metric(self, split: Split) -> np.ndarray:
        return target_metric(self.metric, self.cls, split, self.context)

    def fit(self, train: Split) -> MicroModel:
        """Fit the PDF on the metric values of the training targets (θ_MM of Eq. 1)."""
        self.pdf.fit(self.target_metric(train))
        return self

    # -- scoring ---------------------------------------------------------------------------

    @property
    def unigram(self) -> np.ndarray:
        """log P_uni over V_c (read-only), computed once per α: every row without context
        and every smoothed row reads it."""
        cached = getattr(self, "_unigram", None)
        if cached is None or cached[0] != self.unigram_alpha:
            table = unigram_log_probs(self.cls, self.unigram_alpha)
            table.setflags(write=False)
            cached = self._unigram = (self.unigram_alpha, table)
        return cached[1]

    @property
    def label(self) -> str:
        """What produced a class's within-class part, as tables and predictions name it."""
        return f"{self.metric.name}+{self.pdf.name}"

    def log_prob(self, ctx: Context, H: np.ndarray | None = None) -> np.ndarray:
        """log P_MM(w | c, context) for every row of ``ctx`` and every w in V_c: (B, K).
        ``H`` (the LM's states at the rows) is not read: see the class docstring.

        Each row is a normalised distribution over V_c (Eq. 1 with the ε-smoothing of
        docs/micro-models.md, "PDFs").
        """
        uni = self.unigram
        out = np.broadcast_to(uni, (len(ctx), len(uni))).copy()
        ok = self.metric.available(ctx)
        if ok.any():
            sub = ctx.rows(ok)
            log_mm = normalised_log_pdf(self.pdf, metric_matrix(self.metric, self.cls, sub))
            out[ok] = smooth(log_mm, uni[None, :], self.epsilon)
        return out

    def log_prob_at(self, ctx: Context, index: np.ndarray) -> np.ndarray:
        """log P_MM of candidate ``index[b]`` in row b, without keeping the (B, K) matrix."""
        return log_prob_at(self.log_prob, ctx, index, len(self.cls.candidates))

    def log_prob_targets(self, split: Split, features: Any = None) -> np.ndarray:
        """Per-position array for the evaluator: log P_MM(w_t | c_t, prev) at this class's
        in-vocabulary positions, NaN elsewhere (aligned with ``split.token_ids``).
        ``features`` is not read (see the class docstring)."""
        out = np.full(len(split), np.nan)
        positions, index = self.cls.positions(split)
        ctx = self.cls.context(split, positions, self.context)
        out[positions] = self.log_prob_at(ctx, index)
        return out

    # -- parameters ------------------------------------------------------------------------

    def get_params(self) -> dict[str, Any]:
        return {
            "class": self.cls.name,
            "family": self.cls.family,
            "metric": self.metric.name,
            "context": self.context,
            "pdf": self.pdf.get_params(),
            "epsilon": self.epsilon,
            "unigram_alpha": self.unigram_alpha,
            "vc_size": len(self.cls.candidates),
            "vc_fingerprint": self.cls.fingerprint,
        }

    to_json = get_params

    @classmethod
    def from_json(cls, data: dict[str, Any], class_data: ClassData) -> MicroModel:
        """Rebuild a fitted model for ``class_data``; refuse one fitted on another V_c."""
        if data.get("vc_fingerprint") != class_data.fingerprint:
            raise NslmError(
                f"micro-model for <{data.get('class')}> was fitted on another class vocabulary "
                f"({data.get('vc_size')} types, fingerprint {data.get('vc_fingerprint')}; "
                f"this corpus has {len(class_data.candidates)}, {class_data.fingerprint})"
            )
        return cls(
            class_data,
            data["metric"],
            Pdf.from_params(data["pdf"]),
            context=data["context"],
            epsilon=data["epsilon"],
            unigram_alpha=data["unigram_alpha"],
        )

    def __repr__(self) -> str:
        return (
            f"MicroModel(<{self.cls.name}>, metric={self.metric.name}, pdf={self.pdf.name}, "
            f"context={self.context}, epsilon={self.epsilon})"
        )
