"""N-gram LMs: interpolated modified Kneser-Ney, MLE and add-k (docs/ngram.md).

Modified Kneser-Ney is Chen & Goodman's (1998) refinement of Kneser & Ney (1995), estimated
as KenLM's ``lmplz`` does; MLE and add-k show why n-gram counts need smoothing.

Counting uses sorted numpy key arrays (:mod:`nslm.ngram.counting`); every estimator yields an
:class:`NgramModel` in ARPA's backoff form (:mod:`nslm.ngram.model`), which scores a corpus
into the evaluator's per-position log-probability arrays and exports/imports ARPA.
"""

from nslm.ngram.arpa import read_arpa, write_arpa
from nslm.ngram.build import (
    METHODS,
    build_model,
    prepared_stream,
    raw_lines,
    raw_stream,
    score_split,
)
from nslm.ngram.counting import MAX_ORDER, count_ngrams
from nslm.ngram.model import NgramModel

__all__ = [
    "MAX_ORDER",
    "METHODS",
    "NgramModel",
    "build_model",
    "count_ngrams",
    "prepared_stream",
    "raw_lines",
    "raw_stream",
    "read_arpa",
    "score_split",
    "write_arpa",
]
