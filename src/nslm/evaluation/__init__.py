"""Evaluation: per-position log-probabilities → per-class perplexity tables.

The scoring pass that turns a run into per-position log-probabilities (NNLM, HNLM, the NSLM
of paper Eq. 4 and the ensemble) lives in :mod:`nslm.scores`. This package turns such scores
into per-class perplexities and the paper's Tables 2 and 3, with their optional columns
(cache, CRNN, n-gram) and the rarity breakdown of Figure 3 (docs/nslm.md, "Reading the
tables").
"""

from nslm.evaluation.class_perplexity import class_perplexities, perplexity

__all__ = ["class_perplexities", "perplexity"]
