"""Which output of the HNLM's top level stands for which word or class tag: built from the
training corpus, saved with a run (``layout.json``) and read back from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class HNLMLayout:
    """Which output of the HNLM's top-level softmax stands for which word or class tag.

    The top level is a softmax over (non-class words ∪ class tags), ordered by training
    frequency so adaptive-softmax clusters are contiguous. ``top_of_word[w]`` is the top id
    of word type w (−1 if w only ever occurs as a class token), ``top_of_tag[c]`` that of
    class c's tag (−1 for c = 0, "word", and for classes with an empty vocabulary).
    ``members[c]`` is V_c (sorted type ids); the within-class softmax of class c is over it.
    """

    vocab_size: int
    top_of_word: np.ndarray  # (V,) int64
    top_of_tag: np.ndarray  # (C,) int64
    members: list[np.ndarray]  # C arrays; members[0] is empty

    @property
    def n_top(self) -> int:
        return int(max(self.top_of_word.max(initial=-1), self.top_of_tag.max(initial=-1)) + 1)

    @property
    def n_classes(self) -> int:
        return len(self.members)

    @classmethod
    def from_corpus(cls, corpus, *, shared: bool = False) -> HNLMLayout:
        """Build the layout from a :class:`~nslm.data.PreparedCorpus` (train split counts).

        ``shared``: the top level reuses the NNLM's output layer
        (:class:`~nslm.models.shared_top.SharedTopLevel`), so a word keeps its vocabulary id
        as its top id and the tags follow after the V word ids.
        """
        v = len(corpus.vocab)
        n_cls = len(corpus.class_names)
        members = [np.zeros(0, dtype=np.int64)] + [corpus.class_vocab(c) for c in range(1, n_cls)]
        is_class_type = np.zeros(v, dtype=bool)
        for m in members:
            is_class_type[m] = True
        train = corpus.train
        cids = train.class_ids.astype(np.int64)
        word_counts = np.bincount(train.token_ids[cids == 0], minlength=v)
        tag_counts = np.bincount(cids, minlength=n_cls)
        # A type is a top-level word unless it is a class type never seen as a plain word.
        word_ids = np.flatnonzero(~is_class_type | (word_counts > 0))
        tag_ids = np.array([c for c in range(1, n_cls) if len(members[c])], dtype=np.int64)
        if shared:
            top_of_word = np.full(v, -1, dtype=np.int64)
            top_of_word[word_ids] = word_ids
            top_of_tag = np.full(n_cls, -1, dtype=np.int64)
            top_of_tag[tag_ids] = v + np.arange(len(tag_ids))
            return cls(v, top_of_word, top_of_tag, members)
        counts = np.concatenate([word_counts[word_ids], tag_counts[tag_ids]])
        # Stable sort by descending count: frequent items land in the adaptive head cluster.
        order = np.argsort(-counts, kind="stable")
        top_of_word = np.full(v, -1, dtype=np.int64)
        top_of_tag = np.full(n_cls, -1, dtype=np.int64)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        top_of_word[word_ids] = rank[: len(word_ids)]
        top_of_tag[tag_ids] = rank[len(word_ids) :]
        return cls(v, top_of_word, top_of_tag, members)

    def to_json(self) -> dict:
        return {
            "vocab_size": self.vocab_size,
            "top_of_word": self.top_of_word.tolist(),
            "top_of_tag": self.top_of_tag.tolist(),
            "members": [m.tolist() for m in self.members],
        }

    @classmethod
    def from_json(cls, data: dict) -> HNLMLayout:
        return cls(
            int(data["vocab_size"]),
            np.asarray(data["top_of_word"], dtype=np.int64),
            np.asarray(data["top_of_tag"], dtype=np.int64),
            [np.asarray(m, dtype=np.int64) for m in data["members"]],
        )
