"""Perplexity: the one definition every table, benchmark and training log uses.

Every model in nslm hands the evaluator one float64 array per split, aligned with the
split's tokens: entry ``t`` is ``log P(w_t | w_<t)`` (natural log) of the token actually
there, and NaN where the model does not score (position 0, which has no history).
"""

from __future__ import annotations

import math

import numpy as np


def perplexity(log_probs: np.ndarray) -> float:
    """exp(−mean log P) over the scored (non-NaN) entries; NaN when none is scored.

    A −inf (a token given probability 0) makes the perplexity infinite, reported as such.
    """
    values = np.asarray(log_probs, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan
    mean = values.mean()
    return math.inf if mean == -math.inf else float(math.exp(-mean))
