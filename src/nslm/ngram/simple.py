"""Unsmoothed (MLE) and add-k n-gram models, to show why sparse n-gram counts need smoothing.

Both condition on the full history: the previous N−1 words, or fewer after ``<s>`` at the
start of a sentence. With c(h w) the raw count and V' = |V| − 1 the predictable types:

* MLE:   P(w | h) = c(h w) / Σ_x c(h x). An unseen (h w) gets 0, and an unseen history h
  leaves P undefined, also scored 0: log P = −inf, and the perplexity is reported as inf.
* add-k: P(w | h) = (c(h w) + k) / (Σ_x c(h x) + k·V'), uniform 1/V' for an unseen h.

They are stored in the same backoff form as Kneser-Ney, so one scorer serves all: complete
histories (the top level, see :meth:`NgramCounts.top_level`) carry their estimate; every other
stored n-gram carries the fallback (uniform for add-k, log 0 for MLE), and the backoff weight of
a seen history h is the ratio that turns that fallback into P(unseen w | h).
"""

from __future__ import annotations

import numpy as np

from nslm.ngram.counting import NgramCounts
from nslm.ngram.model import NgramModel


def estimate_simple(
    counts: NgramCounts, *, add_k: float | None, itos: list[str], unk_id: int
) -> NgramModel:
    """MLE when ``add_k`` is None (or 0), else add-k smoothing with that k > 0."""
    k_add = float(add_k or 0.0)
    if k_add < 0:
        raise ValueError("add-k needs k ≥ 0")
    v = counts.vocab_size
    n_pred = v - 1  # <s> is never predicted
    fallback = np.log10(1.0 / n_pred) if k_add > 0 else -np.inf
    log10_prob: list[np.ndarray] = []
    log10_backoff: list[np.ndarray] = []
    for k in range(1, counts.order + 1):
        oc = counts.orders[k - 1]
        top = counts.top_level(k)
        raw = oc.count.astype(np.float64)
        n_ctx = 1 if k == 1 else len(counts.orders[k - 2])
        prefix = oc.prefix
        # Σ_x c(h x) over the complete-history n-grams with context h.
        denom = np.bincount(prefix[top], weights=raw[top], minlength=n_ctx)
        with np.errstate(divide="ignore", invalid="ignore"):
            est = (raw + k_add) / (denom[prefix] + k_add * n_pred)
            logp = np.where(top, np.log10(est), fallback)
        if k == 1:
            logp[counts.bos_id] = -np.inf
        else:
            # backoff of each order-(k-1) n-gram used as a complete history
            seen = denom > 0
            backoff = np.zeros(n_ctx)
            if k_add > 0:
                unseen_p = k_add / (denom[seen] + k_add * n_pred)
                backoff[seen] = np.log10(unseen_p) - fallback
            else:
                backoff[seen] = -np.inf
            log10_backoff.append(backoff)
        log10_prob.append(logp)
    meta = {"method": "add-k" if k_add > 0 else "mle"}
    if k_add > 0:
        meta["k"] = k_add
    return NgramModel.from_counts(counts, itos, unk_id, log10_prob, log10_backoff, meta)
