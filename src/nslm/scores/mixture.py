"""The NSLM of paper Eq. 4 and the reported ensemble with the NNLM, from the heads' outputs.

    P_NSLM(w_t | h) = P(c | h) · P_MM(w_t | c, w_prev^(c))                 (paper Eq. 4)
    P_ens(w_t | h)  = λ · P_NNLM(w_t | h) + (1 − λ) · P_NSLM(w_t | h)       (paper "Model
                                                                            Implementations")

P(c | h) is the HNLM's top-level softmax over (non-class words ∪ class tags); at a word
position the NSLM is that softmax's probability of the word itself. A class that has no
micro-model keeps the HNLM's neural within-class softmax (Eq. 3), so the NSLM is always a
complete distribution over the vocabulary.

Two views of the same model live here: per-position target scores (what the evaluator
consumes, float64 arrays aligned with ``split.token_ids``, NaN = unscored) and the full
next-token distribution over every type (``nslm predict`` and the sum-to-one checks). A
class position is scored by the probability of its (class, word) pair, as the HNLM is; the
full distribution of a type sums the pairs of every class it can belong to, plus its word
probability.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nslm.errors import NslmError

# λ grid for the ensemble: 0 is pure NSLM, 1 is the NNLM alone.
LAMBDAS = tuple(np.round(np.linspace(0.0, 1.0, 101), 2))


def nslm_log_probs(
    class_log_prob: np.ndarray,
    class_ids: np.ndarray,
    micro_log_prob: np.ndarray,
    hnlm: np.ndarray | None = None,
) -> np.ndarray:
    """Per-position log P_NSLM(w_t | h) (Eq. 4).

    ``class_log_prob`` is log P(c_t | h) at class positions and log P_top(w_t | h) at word
    positions (:class:`nslm.scores.positions.PositionScores`); ``micro_log_prob`` is log P_MM at the
    positions a micro-model covers, NaN elsewhere (:func:`nslm.micro.pipeline.micro_log_probs`).
    A class position without a micro-model takes the HNLM's score (Eq. 3), so ``hnlm`` is
    required when some class is not covered.
    """
    out = np.array(class_log_prob, dtype=np.float64, copy=True)
    is_class = np.asarray(class_ids) > 0
    covered = ~np.isnan(micro_log_prob)
    if (covered & ~is_class).any():
        raise NslmError("micro-model scores at word positions: arrays from different splits?")
    out[covered] += micro_log_prob[covered]
    neural = is_class & ~covered & ~np.isnan(out)
    if neural.any():
        if hnlm is None:
            raise NslmError("some class positions have no micro-model and no HNLM score")
        out[neural] = hnlm[neural]
    return out


def ensemble_log_probs(nnlm: np.ndarray, nslm: np.ndarray, lam: float) -> np.ndarray:
    """log(λ·P_NNLM + (1 − λ)·P_NSLM) per position; λ = 1 and λ = 0 return the inputs exactly."""
    if not 0.0 <= lam <= 1.0:
        raise NslmError(f"λ must be in [0, 1], got {lam}")
    if lam == 1.0:
        return np.array(nnlm, dtype=np.float64, copy=True)
    if lam == 0.0:
        return np.array(nslm, dtype=np.float64, copy=True)
    with np.errstate(invalid="ignore"):  # NaN (unscored) positions stay NaN
        return np.logaddexp(math.log(lam) + nnlm, math.log1p(-lam) + nslm)


def tune_lambda(
    nnlm: np.ndarray, nslm: np.ndarray, mask: np.ndarray | None = None
) -> tuple[float, float]:
    """The λ of :data:`LAMBDAS` with the lowest perplexity over ``mask`` (validation); (λ, ppl)."""
    keep = ~(np.isnan(nnlm) | np.isnan(nslm))
    if mask is not None:
        keep &= mask
    if not keep.any():
        raise NslmError("no scored positions to tune λ on")
    a, b = nnlm[keep], nslm[keep]
    best = (1.0, math.inf)
    for lam in LAMBDAS:
        ppl = math.exp(-float(ensemble_log_probs(a, b, float(lam)).mean()))
        if ppl < best[1]:
            best = (float(lam), ppl)
    return best


@dataclass
class FullDistribution:
    """The NSLM's next-token distribution at N positions, kept in its parts (Eq. 4).

    * ``word`` (N, V): log P_top(w | h) for types that are top-level words, −inf otherwise;
    * ``tag`` (N, C): log P(c | h) for every class c (−inf for c = 0 and tagless classes);
    * ``within[c]`` = (V_c type ids (K,), log P(w | c) (N, K)): the micro-model's P_MM, or
      the HNLM's within-class softmax for a class without one (``source[c]`` says which).
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
        where = np.searchsorted(ids, type_ids)
        found = (where < len(ids)) & (ids[np.minimum(where, len(ids) - 1)] == type_ids)
        inside = logp[rows, np.minimum(where, len(ids) - 1)]
        return np.where(found, self.tag[:, cls] + inside, -np.inf)

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
