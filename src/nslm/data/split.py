"""One split of a prepared corpus: token ids, class ids, values and article ids as numpy
arrays, one entry per token (:class:`~nslm.data.corpus.PreparedCorpus` holds three)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SPLIT_ARRAYS = ("token_ids", "rule_class_ids", "values", "coords", "convert_targets", "article_ids")


@dataclass
class Split:
    """One split; all arrays have one entry per token.

    ``rule_class_ids`` is the class the rules gave the token. A valid/test token outside the
    training vocabulary becomes ``<unk>`` and, for modelling, a plain word: that is
    ``class_ids``. ``values`` holds a number's value, ``coords`` a place's (lat, lon), and
    ``convert_targets`` (N, 3) the preceding quantity of a ``<convert>`` token in each unit that
    training converts its unit to, most frequent first (NaN elsewhere; see
    :mod:`nslm.data.conversions`).
    """

    name: str
    token_ids: np.ndarray  # int32
    rule_class_ids: np.ndarray  # int16
    values: np.ndarray  # float64
    coords: np.ndarray  # float64, shape (N, 2)
    convert_targets: np.ndarray  # float64, shape (N, 3)
    article_ids: np.ndarray  # int32
    unk_id: int

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def class_ids(self) -> np.ndarray:
        if self.unk_id < 0:  # a closed vocabulary (bytes): nothing unknown, no copy
            return self.rule_class_ids
        return np.where(self.token_ids == self.unk_id, 0, self.rule_class_ids).astype(np.int16)

    @property
    def oov_class_mask(self) -> np.ndarray:
        """Class tokens (by rule) that fell outside the vocabulary."""
        return (self.rule_class_ids > 0) & (self.token_ids == self.unk_id)
