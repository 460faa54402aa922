"""Per-class perplexity from per-position log-probabilities (the paper's Tables 2 and 3).

Every model in nslm hands the evaluator one float array per split, aligned with the split's
tokens: entry ``t`` is ``log P(w_t | w_<t)`` (natural log) of the token actually there, and
NaN where the model does not score (position 0, which has no history). The same array
shape serves the NNLM, HNLM, NSLM, CRNN, cache and n-gram models alike.
"""

from __future__ import annotations

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.perplexity import perplexity

AGGREGATES = {"Numbers": NUMBER_CLASSES, "Locations": PLACE_CLASSES}


def class_perplexities(
    log_probs: np.ndarray, split: Split, corpus: PreparedCorpus
) -> dict[str, dict[str, float | int]]:
    """``{row: {"ppl": …, "tokens": …}}`` for each class, the aggregates and ``Global``.

    A class row counts the positions whose target is an in-vocabulary token of that class
    (OOV class tokens became ``<unk>`` words). ``Global`` counts every scored position,
    ``<eos>`` included.
    """
    log_probs = np.asarray(log_probs, dtype=np.float64)
    if log_probs.shape != split.token_ids.shape:
        raise ValueError(
            f"log_probs has shape {log_probs.shape}, split {split.name} has {len(split)} tokens"
        )
    scored = ~np.isnan(log_probs)
    class_ids = split.class_ids
    rows: dict[str, dict[str, float | int]] = {}

    def add(row: str, mask: np.ndarray) -> None:
        picked = log_probs[mask & scored]
        rows[row] = {"ppl": perplexity(picked), "tokens": int(picked.size)}

    for cid, name in enumerate(corpus.class_names):
        if cid:
            add(name, class_ids == cid)
    for row, members in AGGREGATES.items():
        ids = [corpus.class_names.index(m) for m in members if m in corpus.class_names]
        if ids:
            add(row, np.isin(class_ids, ids))
    add("Global", np.ones_like(scored))
    return rows
