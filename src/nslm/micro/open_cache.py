"""Members new to training that the text has already named: a cache over the open set.

A phone number, a town's population, a year after the training text's last: once a text has
named a member of class c that the training text never held, it is likely to name it again.
A cache (Kuhn & De Mori 1990), kept over the members the vocabulary lacks only, so that it
adds to the open vocabulary what the closed one cannot have (a closed model reads all of them
as ``<unk>``) and leaves the known members to the micro-model:

    P(w | c, ctx, D_t) = (1 − κ_t) · P_open(w | c, ctx) + κ_t · n_t(w) / n_t
    κ_t = σ(α + β · log n_t)  where n_t > 0,   κ_t = 0 where n_t = 0

n_t(w) counts w among the class's tokens outside V_c in the last :data:`WINDOW` tokens of
the same article before t, n_t their total. Every cached string is a class token its rule
accepted, so both parts are distributions over O_c and so is the mixture.

α and β are fitted by deleted estimation, as the open micro-model's known weight is
(:mod:`nslm.micro.open_set`): the training articles in two halves, the counts from one half;
in the other half's articles, the cache holds the earlier class tokens that the counting half
has not seen, and α, β maximise the likelihood of that half's class tokens that had a
non-empty cache; then both ways round.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

# tokens back: the window of NSLM-best's unigram cache (benchmarks/wikitext2/best.py)
WINDOW = 3_000


@dataclass
class TextCache:
    """Per scored row: the new members the text named before it, ``counts[i]`` (string →
    count), within the window and the article."""

    counts: list[Counter]

    def __len__(self) -> int:
        return len(self.counts)

    @property
    def totals(self) -> np.ndarray:
        return np.array([sum(c.values()) for c in self.counts], dtype=float)

    def share(self, row: int, member: str) -> float:
        """n_t(w) / n_t at ``row`` (0 for an empty cache)."""
        counts = self.counts[row]
        total = sum(counts.values())
        return counts.get(member, 0) / total if total else 0.0

    def rows(self, index: np.ndarray) -> TextCache:
        return TextCache([self.counts[i] for i in np.asarray(index, dtype=np.int64)])

    @classmethod
    def empty(cls, n: int) -> TextCache:
        return cls([Counter() for _ in range(n)])


def text_cache(
    members: np.ndarray,
    positions_of_class: np.ndarray,
    article_ids: np.ndarray,
    new: np.ndarray,
    queries: np.ndarray,
    window: int = WINDOW,
) -> TextCache:
    """The cache at each of ``queries`` (positions, ascending): the members (strings or
    ids, ``members[i]`` at ``positions_of_class[i]``, ascending) marked ``new`` at earlier
    positions of the same article, at most ``window`` tokens back."""
    held: deque = deque()
    counts: Counter = Counter()
    out = []
    k = 0
    for q in np.asarray(queries, dtype=np.int64).tolist():
        while k < len(positions_of_class) and positions_of_class[k] < q:
            if new[k]:
                held.append((int(positions_of_class[k]), members[k]))
                counts[members[k]] += 1
            k += 1
        article = article_ids[q]
        while held and (held[0][0] < q - window or article_ids[held[0][0]] != article):
            _, gone = held.popleft()
            counts[gone] -= 1
            if not counts[gone]:
                del counts[gone]
        out.append(Counter(counts))
    return TextCache(out)


def split_cache(
    split, strings: Sequence[str], class_mask: np.ndarray, known, queries: np.ndarray
) -> TextCache:
    """The cache of a class at ``queries`` of a scored text: its tokens (``class_mask``, by
    rule) whose string is outside V_c (``known``) are the new members."""
    at = np.flatnonzero(class_mask)
    members = np.array([strings[p] for p in at], dtype=object)
    new = np.array([m not in known for m in members], dtype=bool)
    return text_cache(members, at, split.article_ids, new, queries)


@dataclass
class CacheWeight:
    """κ = σ(α + β · log n) for a cache of n tokens, 0 for an empty one."""

    alpha: float = -30.0
    beta: float = 0.0

    def _logit(self, cache: TextCache) -> tuple[np.ndarray, np.ndarray]:
        totals = cache.totals
        some = totals > 0
        return self.alpha + self.beta * np.log(np.where(some, totals, 1.0)), some

    def log_kappa(self, cache: TextCache) -> tuple[np.ndarray, np.ndarray]:
        """(log κ, log (1 − κ)) per row; −inf and 0 where the cache is empty."""
        z, some = self._logit(cache)
        log_k = np.where(some, -np.logaddexp(0.0, -z), -np.inf)
        log_rest = np.where(some, -np.logaddexp(0.0, z), 0.0)
        return log_k, log_rest

    def kappa(self, cache: TextCache) -> np.ndarray:
        z, some = self._logit(cache)
        return np.where(some, expit(z), 0.0)
