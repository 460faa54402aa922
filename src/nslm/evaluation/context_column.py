"""The "NSLM-context" column: the run's NSLM with its context-aware micro-models.

Eq. 4 with the context-aware micro-models (:mod:`nslm.micro.context_model`,
:mod:`nslm.micro.shifted`) in place of the plain P_MM of the classes that kept one
(``RUN/micro_context.json``), the others as in the NSLM column; the reported column is the
same ensemble as the NSLM's, λ·P_NNLM + (1 − λ)·P_NSLM-context, with λ tuned on valid the
same way (per table, on the positions :func:`nslm.evaluation.report.objective_mask` gives).
Scored through the run's :class:`~nslm.scores.passes.Scorer`, whose one pass per split it
shares (with the states at the classes' positions).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.evaluation.columns import ColumnSource
from nslm.scores.mixture import tune_lambda
from nslm.scores.passes import Scorer
from nslm.scores.split_scores import SplitScores

COLUMN = "NSLM-context"


class ContextSource(ColumnSource):
    """Adds the "NSLM-context" column (the λ-ensemble; its Eq. 4 alone is :meth:`scores`)."""

    def __init__(self, scorer: Scorer, micro: dict[str, Any]) -> None:
        self.scorer, self.micro = scorer, micro
        self._scores: dict[tuple[str, int], SplitScores] = {}
        self.lambdas: dict[str, float] = {}

    def scores(self, name: str, split: Split) -> SplitScores:
        key = (name, len(split))
        if key not in self._scores:
            self._scores[key] = self.scorer.nslm(split, self.micro)
        return self._scores[key]

    def fit(
        self, table: str, valid: Split, columns: dict[str, np.ndarray], mask: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """λ of the table's ensemble, tuned as the run's own NSLM column's (Eq. 5)."""
        got = self.scores("valid", valid)
        self.lambdas[table], _ = tune_lambda(got.nnlm, got.pure, mask)
        return {COLUMN: got.ensemble(self.lambdas[table])}

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict[str, np.ndarray]:
        if table not in self.lambdas:
            raise NslmError(f"{COLUMN}: no λ for table {table!r}; fit it on valid first")
        return {COLUMN: self.scores(name, split).ensemble(self.lambdas[table])}

    def describe(self, table: str, entry: dict[str, Any]) -> dict[str, Any]:
        kept = sorted(n for n, m in self.micro.items() if m.needs_features)
        lam = self.lambdas[table]
        note = (
            f"NSLM-context = {lam:.2f}·NNLM + {1 - lam:.2f}·Eq. 4 with the "
            f"context micro-models for {', '.join(f'<{n}>' for n in kept) or 'no class'}, "
            "the plain ones elsewhere."
        )
        return {
            "lambda_context": lam,
            "context_classes": kept,
            "notes": [*entry.get("notes", []), note],
        }
