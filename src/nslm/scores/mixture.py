"""The NSLM of paper Eq. 4 and the reported ensemble with the NNLM, from the heads' outputs.

    P_NSLM(w_t | h) = P(c | h) · P_MM(w_t | c, w_prev^(c))                 (paper Eq. 4)
    P_ens(w_t | h)  = λ · P_NNLM(w_t | h) + (1 − λ) · P_NSLM(w_t | h)       (paper "Model
                                                                            Implementations")

P(c | h) is the HNLM's top-level softmax over (non-class words ∪ class tags); at a word
position the NSLM is that softmax's probability of the word itself. A class that has no
micro-model keeps the HNLM's neural within-class softmax (Eq. 3), so the NSLM is always a
complete distribution over the vocabulary.

Both act on per-position target scores (float64 arrays aligned with ``split.token_ids``,
NaN = unscored); a class position is scored by the probability of its (class, word) pair,
as the HNLM is. The full next-token distribution is :mod:`nslm.scores.distribution`.
"""

from __future__ import annotations

import math

import numpy as np

from nslm.errors import NslmError
from nslm.perplexity import perplexity

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
    positions (:class:`nslm.scores.split_scores.SplitScores`); ``micro_log_prob`` is log P_MM at the
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
        ppl = perplexity(ensemble_log_probs(a, b, float(lam)))
        if ppl < best[1]:
            best = (float(lam), ppl)
    return best
