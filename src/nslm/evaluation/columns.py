"""Extra columns of the per-class tables: the interface a 5-gram, a CRNN, a cache or a
rarity recorder implements to take part in :func:`nslm.evaluation.report.evaluate_run`.

A source is called with (split name, split, the columns so far) for "valid" and for the
reported split, once per table, and returns new columns of per-position log-probabilities
(the :func:`nslm.evaluation.class_perplexity.class_perplexities` contract: float64, one per
position, NaN = unscored). Sources run in order, so a later one can build on an earlier
one's columns (the cache mixes into every column before it). The two hooks have no-op
defaults; a source overrides only what it needs. Sources that need the backbone's outputs
(the cache's hidden states, the CRNN's P(c | h)) read them from the run's
:class:`~nslm.scores.passes.Scorer`, whose memoised pass the run's own columns share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nslm.data.corpus import Split


class ColumnSource:
    """Base class of the table-column sources (see the module docstring)."""

    def __call__(
        self, name: str, split: Split, columns: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def start_table(self, table: str, valid_mask: np.ndarray) -> None:
        """Called before a table's two calls, with the validation positions λ is tuned on
        (per-table tuning of the source's own parameters)."""

    def describe(self, table: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Keys merged into the table's JSON; a ``notes`` list is printed under the table."""
        return {}
