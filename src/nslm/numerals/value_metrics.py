"""How well a model predicts the value of a numeral (Spithourakis & Riedel 2018, Sec. 5):
the mode of its distribution over a candidate set, scored against the gold value.

Any model can be scored: give the gold values and the values it predicts. The candidate set
is theirs: the in-vocabulary numerals and ~100 training numerals at evenly spaced ranks of the
value order (:func:`candidate_strings`). The metrics:

* MAPE — mean absolute percentage error, 100 · mean |ŷ − y| / |y|;
* MdAPE — its median;
* MdAE — the median absolute error, median |ŷ − y|.

A percentage error needs y ≠ 0: positions with a gold value of 0 are left out of MAPE and
MdAPE (``n_zero``) and kept in MdAE. The baselines predict one constant everywhere: the
training numerals' mean and their median.
"""

from __future__ import annotations

import numpy as np

from nslm.data.numbers import is_number
from nslm.numerals.vocab import value_candidates


def numeral_vocabulary(corpus, min_count: int = 2) -> list[str]:
    """K: the corpus's numerals seen ≥ ``min_count`` times in training, in vocabulary order."""
    itos, counts = corpus.vocab.itos, np.asarray(corpus.vocab.counts)
    return [t for i, t in enumerate(itos) if is_number(t) and counts[i] >= min_count]


def candidate_strings(corpus, min_count: int = 2) -> list[str]:
    """The candidates for a corpus: K (:func:`numeral_vocabulary`) and the training
    numerals at 100 evenly spaced ranks of the value order."""
    itos = corpus.vocab.itos
    train = [itos[i] for i in corpus.train.token_ids.tolist() if is_number(itos[i])]
    return value_candidates(numeral_vocabulary(corpus, min_count), train)


def value_metrics(gold: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """MAPE and MdAPE (in %, over gold ≠ 0) and MdAE of ``predicted`` against ``gold``."""
    gold = np.asarray(gold, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    if gold.shape != predicted.shape or not len(gold):
        raise ValueError("gold and predicted values need one entry per position, at least one")
    error = np.abs(predicted - gold)
    nonzero = gold != 0
    ape = 100.0 * error[nonzero] / np.abs(gold[nonzero])
    return {
        "mape": float(ape.mean()) if len(ape) else float("nan"),
        "mdape": float(np.median(ape)) if len(ape) else float("nan"),
        "mdae": float(np.median(error)),
        "n": len(gold),
        "n_zero": int((~nonzero).sum()),
    }


def baseline_metrics(gold: np.ndarray, train_mean: float, train_median: float) -> dict:
    """The metrics of predicting the training mean, and the training median, everywhere."""
    gold = np.asarray(gold, dtype=np.float64)
    return {
        "train_mean": value_metrics(gold, np.full_like(gold, train_mean)),
        "train_median": value_metrics(gold, np.full_like(gold, train_median)),
    }
