"""The NSLM's full next-token distribution, kept in its parts (paper Eq. 4).

Per-position target scores (:mod:`nslm.scores.passes`) are what the evaluator reads; this
is the other view of the same model, the distribution over every type at chosen positions,
for ``nslm predict``, generation and the sum-to-one checks. A type may belong to several
classes (a number type is in ``<range>`` and ``<year>``), so its probability is the sum of
its readings: the plain-word one, P_top(w | h), and each class c's P(c | h) · P(w | c).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nslm.errors import NslmError


def position_in(members: np.ndarray, type_ids: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Where each type sits in the sorted V_c ``members``: (found, index), index clipped.

    The one V_c membership lookup of the package: predict's breakdown, the sampler's
    readings, :meth:`FullDistribution.pair_log_prob` and the n-gram NSLM's fallback use it.
    """
    type_ids = np.asarray(type_ids)
    if len(members) == 0:
        return np.zeros(type_ids.shape, dtype=bool), np.zeros(type_ids.shape, dtype=np.int64)
    where = np.minimum(np.searchsorted(members, type_ids), len(members) - 1)
    return members[where] == type_ids, where


@dataclass(frozen=True)
class Reading:
    """One way to produce a type: as a plain word (``cls`` 0) or as a token of class ``cls``."""

    cls: int
    log_prob: float  # log P(reading, w | h)
    log_class: float = 0.0  # log P(c | h) (0 for a plain word)
    log_within: float = 0.0  # log P(w | c): the micro-model's P_MM, or the neural fallback


@dataclass
class FullDistribution:
    """The NSLM's next-token distribution at N positions, kept in its parts (Eq. 4).

    * ``word`` (N, V): log P_top(w | h) for types that are top-level words, −inf otherwise;
    * ``tag`` (N, C): log P(c | h) for every class c (−inf for c = 0 and tagless classes);
    * ``within[c]`` = (V_c type ids (K,), log P(w | c) (N, K)): the micro-model's P_MM, or
      the model's neural within-class distribution for a class without one (``source[c]``
      names which).
    """

    word: np.ndarray
    tag: np.ndarray
    within: dict[int, tuple[np.ndarray, np.ndarray]]
    source: dict[int, str] = field(default_factory=dict)

    def pair_log_prob(self, cls: int, type_ids: np.ndarray) -> np.ndarray:
        """log P(c, w | h) for class ``cls`` (0 = plain word) and one type per row: (N,)."""
        rows = np.arange(self.word.shape[0])
        if cls == 0:
            return self.word[rows, type_ids]
        ids, logp = self.within[cls]
        found, where = position_in(ids, type_ids)
        return np.where(found, self.tag[:, cls] + logp[rows, where], -np.inf)

    def readings(self, row: int, type_id: int) -> list[Reading]:
        """Every reading of ``type_id`` at ``row`` with a non-zero probability."""
        out = []
        if np.isfinite(self.word[row, type_id]):
            out.append(Reading(0, float(self.word[row, type_id])))
        for c, (ids, logp) in self.within.items():
            found, where = position_in(ids, type_id)
            if found:
                inside = float(logp[row, where])
                joint = float(self.tag[row, c]) + inside
                if np.isfinite(joint):
                    out.append(Reading(c, joint, float(self.tag[row, c]), inside))
        return out

    def class_parts(self) -> dict[int, np.ndarray]:
        """log P(c | h) + log P(w | c) over V_c for every class with a tag: {c: (N, K)}."""
        return {c: self.tag[:, c : c + 1] + logp for c, (_, logp) in self.within.items()}

    def marginal(self) -> np.ndarray:
        """log P_NSLM(w | h) over every type (N, V): the word part plus every class's pairs."""
        out = self.word.copy()
        for c, joint in self.class_parts().items():
            ids = self.within[c][0]
            out[:, ids] = np.logaddexp(out[:, ids], joint)
        return out


def full_distribution(
    top: np.ndarray,
    top_of_word: np.ndarray,
    top_of_tag: np.ndarray,
    within: dict[int, tuple[np.ndarray, np.ndarray]],
    source: dict[int, str] | None = None,
) -> FullDistribution:
    """Assemble :class:`FullDistribution` from the HNLM's top-level log-softmax ``top`` (N, T).

    ``top_of_word`` / ``top_of_tag`` are the HNLM layout's index maps (−1 = absent);
    ``within`` gives, per tagged class, V_c's type ids and log P(w | c) for every position.
    """
    n = top.shape[0]
    word = np.full((n, len(top_of_word)), -np.inf)
    has = top_of_word >= 0
    word[:, has] = top[:, top_of_word[has]]
    tag = np.full((n, len(top_of_tag)), -np.inf)
    tagged = top_of_tag >= 0
    tag[:, tagged] = top[:, top_of_tag[tagged]]
    missing = [c for c in np.flatnonzero(tagged).tolist() if c not in within]
    if missing:
        raise NslmError(f"no within-class distribution for class ids {missing}")
    return FullDistribution(word, tag, dict(within), dict(source or {}))
