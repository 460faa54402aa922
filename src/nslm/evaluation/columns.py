"""Extra columns of the per-class tables: the interface a 5-gram, a CRNN, a cache or a
rarity recorder implements to take part in :func:`nslm.evaluation.report.evaluate_run`.

Per table, a source is first fitted on the validation split (:meth:`ColumnSource.fit`:
the positions of the table's λ objective, the columns so far) and then scores the reported
split (:meth:`ColumnSource.score`), returning new columns of per-position log-probabilities
(the :func:`nslm.evaluation.class_perplexity.class_perplexities` contract: float64, one per
position, NaN = unscored). What a source tunes it keeps per table, so the order of the
tables, or scoring one split twice, changes nothing. Sources run in order, so a later one
can build on an earlier one's columns (the cache mixes into every column before it). A
source without parameters of its own implements :meth:`~ColumnSource.score` alone. Sources
that need the backbone's outputs (the cache's hidden states, the CRNN's P(c | h)) read them
from the run's :class:`~nslm.scores.passes.Scorer`, whose memoised pass the run's own
columns share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nslm.data.corpus import Split


class ColumnSource:
    """Base class of the table-column sources (see the module docstring)."""

    def fit(
        self, table: str, valid: Split, columns: dict[str, np.ndarray], mask: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        """Tune the source's own parameters for ``table`` on the validation split, at the
        positions ``mask`` selects (the table's λ objective; None: all), and return its
        columns on valid for the sources after it to fit on. Without parameters: the
        columns alone."""
        return self.score("valid", valid, columns, table)

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict[str, np.ndarray]:
        """The source's columns on ``split`` (called ``name``), with what :meth:`fit` chose
        for ``table``."""
        raise NotImplementedError

    def describe(self, table: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Keys merged into the table's JSON; a ``notes`` list is printed under the table."""
        return {}
