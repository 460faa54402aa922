"""Helpers shared by the real-data tests."""

from __future__ import annotations

import numpy as np

from nslm.data import PreparedCorpus
from nslm.data.numbers import rejoin_numbers


def find(corpus: PreparedCorpus, split: str, text: str) -> int:
    """Position of the first occurrence of ``text`` (WikiText tokens) in a prepared split."""
    ids = corpus.vocab.encode(rejoin_numbers(text).split())
    stream = corpus.splits[split].token_ids
    windows = np.lib.stride_tricks.sliding_window_view(stream, len(ids))
    hits = np.flatnonzero((windows == ids).all(axis=1))
    assert hits.size, f"{text!r} does not occur in {split}"
    return int(hits[0])


def classes_at(corpus: PreparedCorpus, split: str, text: str) -> list[tuple[str, str]]:
    start = find(corpus, split, text)
    s = corpus.splits[split]
    n = len(rejoin_numbers(text).split())
    return [
        (corpus.vocab.itos[s.token_ids[i]], corpus.class_names[s.rule_class_ids[i]])
        for i in range(start, start + n)
        if s.rule_class_ids[i]
    ]
