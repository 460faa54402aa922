"""Exhaustive grid search over {metric, PDF} pairs per class on validation (paper Table 1, step 4).

For one class the NSLM's perplexity (Eq. 4) depends on the micro-model only through P_MM at
that class's positions, since P(c | h) does not involve it. So the search scores each cell by
the validation perplexity of P_MM alone, and needs no language model.

Every cell (metric, context mode, PDF) is fitted on train for each of the PDF's
hyperparameters; the unigram-smoothing ε is tuned jointly; the cell's score is its best
validation perplexity. The class unigram's α is tuned first, on validation too: it is both
the baseline the report compares against and the smoothing/fall-back distribution.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.classdata import ClassData
from nslm.micro.history import CONTEXT_MODES
from nslm.micro.metrics import get_metric, metric_names
from nslm.micro.model import (
    MicroModel,
    metric_matrix,
    normalised_log_pdf,
    smooth,
    target_metric,
    unigram_log_probs,
    unique_values,
)
from nslm.micro.pdfs import get_pdf, pdf_names
from nslm.perplexity import perplexity

EPSILONS = (1e-3, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9)
UNIGRAM_ALPHAS = (0.01, 0.03, 0.1, 0.3, 1.0)


@dataclass
class Cell:
    """One grid cell: its best validation perplexity and the settings that gave it."""

    metric: str
    context: str
    pdf: str
    valid_ppl: float = math.inf
    hyper: dict[str, Any] = field(default_factory=dict)
    epsilon: float = math.nan
    error: str | None = None
    model: MicroModel | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric,
            "context": self.context,
            "pdf": self.pdf,
            "valid_ppl": self.valid_ppl if math.isfinite(self.valid_ppl) else None,
            "hyper": self.hyper,
            "epsilon": self.epsilon if math.isfinite(self.epsilon) else None,
        }
        if self.error:
            out["error"] = self.error
        if self.model is not None:
            out["pdf_params"] = self.model.pdf.get_params()
        return out


@dataclass
class ClassSelection:
    """The outcome for one class: every cell, the winner, and the unigram baseline."""

    cls: ClassData
    cells: list[Cell]
    selected: Cell
    unigram_alpha: float
    unigram_valid_ppl: float
    valid_tokens: int
    source: dict[str, Any]

    @property
    def model(self) -> MicroModel:
        assert self.selected.model is not None
        return self.selected.model


def candidate_cells(
    cls: ClassData,
    train: Split,
    metrics: list[str] | None = None,
    pdfs: list[str] | None = None,
) -> list[Cell]:
    """The valid {metric, context, PDF} cells for a class.

    A metric is valid if every member of V_c has what it reads and some training target has
    the context it needs; a PDF if it accepts the metric's kind. Context modes matter only
    for metrics that read w_prev; a user class has no family, so only ``class``.
    """
    positions, _ = cls.positions(train)
    cells = []
    for name in metrics or metric_names():
        metric = get_metric(name)
        if not metric.applies_to(cls.candidates):
            continue
        reads_prev = any(f.startswith("prev") for f in metric.context_fields)
        modes = CONTEXT_MODES if reads_prev and cls.family != "user" else ("class",)
        for mode in modes:
            if (
                metric.context_fields
                and not metric.available(cls.context(train, positions, mode)).any()
            ):
                continue
            for pdf_name in pdfs or pdf_names():
                if metric.kind in get_pdf(pdf_name).accepts:
                    cells.append(Cell(name, mode, pdf_name))
    return cells


def _validate_names(metrics: list[str] | None, pdfs: list[str] | None) -> None:
    for name in metrics or []:
        get_metric(name)
    for name in pdfs or []:
        get_pdf(name)


def select_class(
    cls: ClassData,
    train: Split,
    valid: Split,
    metrics: list[str] | None = None,
    pdfs: list[str] | None = None,
    source: dict[str, Any] | None = None,
) -> ClassSelection:
    """Fit every cell on ``train`` and pick the lowest validation perplexity of P_MM."""
    _validate_names(metrics, pdfs)
    positions, index = cls.positions(valid)
    if len(positions) == 0:
        raise NslmError(f"class <{cls.name}> has no validation tokens to select a micro-model on")
    if len(cls.positions(train)[0]) == 0:
        raise NslmError(f"class <{cls.name}> has no training tokens to fit a micro-model on")

    alpha, uni_ppl = min(
        ((a, perplexity(unigram_log_probs(cls, a)[index])) for a in UNIGRAM_ALPHAS),
        key=lambda pair: pair[1],
    )
    log_uni = unigram_log_probs(cls, alpha)[index]
    cells = candidate_cells(cls, train, metrics, pdfs)
    if not cells:
        raise NslmError(f"no valid metric/PDF pair for class <{cls.name}>")

    cached: dict[tuple[str, str], tuple] = {}
    for cell in cells:
        key = (cell.metric, cell.context)
        if key not in cached:
            metric = get_metric(cell.metric)
            ctx = cls.context(valid, positions, cell.context)
            ok = metric.available(ctx)
            matrix = np.ascontiguousarray(metric_matrix(metric, cls, ctx.rows(ok)))
            train_values = target_metric(metric, cls, train, cell.context)
            cached = {key: (ok, matrix, unique_values(matrix), train_values)}  # one at a time
        _score_cell(cell, cls, *cached[key], index, log_uni, alpha)

    scored = [c for c in cells if math.isfinite(c.valid_ppl)]
    if not scored:
        raise NslmError(f"every micro-model failed to fit for class <{cls.name}>")
    best = min(scored, key=lambda c: c.valid_ppl)
    return ClassSelection(
        cls=cls,
        cells=cells,
        selected=best,
        unigram_alpha=alpha,
        unigram_valid_ppl=uni_ppl,
        valid_tokens=len(positions),
        source=source or {"kind": "builtin"},
    )


def _score_cell(
    cell: Cell,
    cls: ClassData,
    ok: np.ndarray,
    matrix: np.ndarray,
    unique: tuple[np.ndarray, np.ndarray],
    train_values: np.ndarray,
    index: np.ndarray,
    log_uni: np.ndarray,
    alpha: float,
) -> None:
    """Try every hyperparameter of the cell's PDF and every ε; keep the best on validation."""
    pdf_cls = get_pdf(cell.pdf)
    for hyper in pdf_cls.hyper_grid:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # EM convergence notes; validation judges
                pdf = pdf_cls(**hyper).fit(train_values)
                log_mm = normalised_log_pdf(pdf, matrix, unique)[np.arange(ok.sum()), index[ok]]
        except (ValueError, FloatingPointError, np.linalg.LinAlgError, NslmError) as exc:
            cell.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            continue
        eps = np.asarray(EPSILONS)[:, None]
        mixed = np.broadcast_to(log_uni, (len(EPSILONS), len(log_uni))).copy()
        mixed[:, ok] = smooth(log_mm[None, :], log_uni[None, ok], eps)
        ppls = np.exp(-mixed.mean(axis=1))
        best = int(np.argmin(ppls))
        if ppls[best] < cell.valid_ppl:
            cell.valid_ppl = float(ppls[best])
            cell.hyper = dict(hyper)
            cell.epsilon = float(EPSILONS[best])
            cell.model = MicroModel(
                cls,
                cell.metric,
                pdf,
                context=cell.context,
                epsilon=cell.epsilon,
                unigram_alpha=alpha,
            )
    if cell.model is not None:
        cell.error = None


def evaluate(selection: ClassSelection, split: Split) -> dict[str, Any]:
    """P_MM and class-unigram perplexity of one class on a split (the LM-free gain)."""
    model = selection.model
    log_mm = model.log_prob_targets(split)
    positions, index = selection.cls.positions(split)
    log_uni = unigram_log_probs(selection.cls, selection.unigram_alpha)[index]
    ctx = selection.cls.context(split, positions, model.context)
    return {
        "tokens": len(positions),
        "fallback_tokens": int((~model.metric.available(ctx)).sum()),
        "mm_ppl": perplexity(log_mm[positions]),
        "unigram_ppl": perplexity(log_uni),
    }
