"""Interpolated modified Kneser-Ney estimation, matching KenLM's ``lmplz``.

Chen & Goodman (1998), "An Empirical Study of Smoothing Techniques for Language Modeling",
§3 and eq. (26), as lmplz implements it (Heafield et al. 2013):

* **Adjusted counts a(·).** The highest order and every n-gram starting with ``<s>`` use the
  raw count; the other lower-order n-grams use the continuation count N1+(• w_i^j), the number
  of distinct words seen to their left (``<s>`` counts as a word there).
* **Discounts** per order from the count-of-counts n_1..n_4 of the adjusted counts:
  Y = n1 / (n1 + 2·n2),  D_k = k − (k+1)·Y·n_{k+1}/n_k  for k = 1, 2, 3 (D3 serves all ≥ 3).
* **Interpolation.** For context h with children w:
  P(w | h) = (a(h w) − D(a(h w))) / Σ_x a(h x)  +  γ(h) · P(w | h'),
  γ(h) = (D1·N1(h •) + D2·N2(h •) + D3·N3+(h •)) / Σ_x a(h x),
  h' = h without its first word. γ(h) is the ARPA backoff weight of h.
* **Unigrams** interpolate with the uniform distribution over the vocabulary minus ``<s>``:
  P(w) = (a(w) − D(a(w))) / Σ_x a(x) + γ(ε) / (|V| − 1). A type with adjusted count 0 (lmplz's
  reserved ``<unk>``) gets only the uniform share γ(ε)/(|V|−1): the leftover mass.
"""

from __future__ import annotations

import numpy as np

from nslm.errors import NslmError
from nslm.ngram.counting import NgramCounts
from nslm.ngram.model import NgramModel


def adjusted_counts(counts: NgramCounts) -> list[np.ndarray]:
    """a(·) for every order (see the module docstring)."""
    out = []
    for k in range(1, counts.order + 1):
        raw = counts.orders[k - 1].count
        if k == counts.order:
            out.append(raw.copy())
            continue
        adjusted = counts.continuation[k - 1].copy()
        starts_bos = counts.top_level(k)
        adjusted[starts_bos] = raw[starts_bos]
        if k == 1:
            adjusted[counts.bos_id] = 0
        out.append(adjusted)
    return out


def count_of_counts(adjusted: np.ndarray) -> np.ndarray:
    """n_1..n_4: how many n-grams have adjusted count exactly 1, 2, 3, 4 (index 0 unused)."""
    return np.bincount(np.minimum(adjusted, 5), minlength=6)[:5].astype(np.int64)


def discounts_from_counts(n: np.ndarray, order: int) -> np.ndarray:
    """[0, D1, D2, D3+] from count-of-counts, Chen & Goodman (1998) eq. (26)."""
    for j in (1, 2, 3, 4):
        if n[j] == 0:
            raise NslmError(
                f"cannot estimate Kneser-Ney discounts for {order}-grams: no {order}-gram has "
                f"adjusted count {j} (corpus too small or artificial); try --discount-fallback"
            )
    y = n[1] / (n[1] + 2.0 * n[2])
    d = np.zeros(4)
    for j in (1, 2, 3):
        d[j] = j - (j + 1) * y * n[j + 1] / n[j]
        if not 0.0 <= d[j] <= j:
            raise NslmError(f"{order}-gram discount D{j} = {d[j]:.4f} is out of range [0, {j}]")
    return d


def estimate_kneser_ney(
    counts: NgramCounts,
    *,
    discounts: list[list[float]] | None = None,
    fallback: tuple[float, float, float] | None = None,
    itos: list[str],
    unk_id: int,
) -> NgramModel:
    """Build the interpolated modified-KN model from counts.

    ``discounts`` optionally fixes [D1, D2, D3+] per order (index 0 = unigrams) instead of
    estimating them. ``fallback`` (like lmplz's ``--discount_fallback``, whose default is
    0.5 1 1.5) is used for an order whose count-of-counts cannot give eq. (26) discounts.
    """
    adjusted = adjusted_counts(counts)
    v = counts.vocab_size
    used_discounts: list[list[float]] = []
    log10_prob: list[np.ndarray] = []
    log10_backoff: list[np.ndarray] = []
    lower_prob = None
    for k in range(1, counts.order + 1):
        a = adjusted[k - 1]
        if discounts is not None:
            d = np.array([0.0, *discounts[k - 1]], dtype=np.float64)
        else:
            try:
                d = discounts_from_counts(count_of_counts(a), k)
            except NslmError:
                if fallback is None:
                    raise
                d = np.array([0.0, *fallback], dtype=np.float64)
        used_discounts.append([float(x) for x in d[1:]])
        # D(a): the discount each n-gram pays; D(0) = 0 for unseen (reserved) types.
        disc = d[np.minimum(a, 3)]
        oc = counts.orders[k - 1]
        if k == 1:
            total = float(a.sum())
            gamma0 = float(disc.sum()) / total
            prob = (a - disc) / total + gamma0 / (v - 1)
            prob[counts.bos_id] = 0.0
        else:
            n_ctx = len(counts.orders[k - 2])
            prefix = oc.prefix
            denom = np.bincount(prefix, weights=a, minlength=n_ctx)
            mass = np.bincount(prefix, weights=disc, minlength=n_ctx)
            has_children = denom > 0
            gamma = np.ones(n_ctx)
            gamma[has_children] = mass[has_children] / denom[has_children]
            prob = (a - disc) / denom[prefix] + gamma[prefix] * lower_prob[oc.suffix]
            del prefix
            log10_backoff.append(_log10(gamma))
        log10_prob.append(_log10(prob))
        lower_prob = prob
    meta = {
        "method": "kneser-ney",
        "discounts": used_discounts,
        "count_of_counts": [count_of_counts(a)[1:].tolist() for a in adjusted],
    }
    return NgramModel.from_counts(counts, itos, unk_id, log10_prob, log10_backoff, meta)


def _log10(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log10(x)
