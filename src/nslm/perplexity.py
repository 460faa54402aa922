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


def bits_per_token(log_probs: np.ndarray) -> float:
    """Mean −log₂ P over the scored (non-NaN) entries: bits per byte for a byte LM.

    The mean NLL in nats divided by ln 2, i.e. log₂ of the perplexity; Carvalho's byte LM
    reports its loss in these units (docs/byte-lm.md). NaN when nothing is scored.
    """
    values = np.asarray(log_probs, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return math.nan
    return float(-values.mean() / math.log(2))


def accuracy(correct: np.ndarray) -> float:
    """The share of scored positions whose most probable next token was the right one
    (``correct`` is 1.0/0.0 per position, NaN where unscored)."""
    values = np.asarray(correct, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else math.nan
