"""The n-gram model every estimator produces: ARPA's backoff form, held in sorted arrays.

For each order k the model keeps the sorted n-gram keys (see :mod:`nslm.ngram.counting`),
``log10 P(w | context)`` and, below the highest order, the ``log10`` backoff weight of the
n-gram used as a context. Scoring follows the ARPA rule (Chen & Goodman 1998, §2.8; the
interpolated estimates are stored pre-interpolated, so backoff reproduces them exactly):

    log P(w | h) = log P_k*(w | h_k*) + Σ_{j = k*}^{|h|} log b(h_j)

where k*−1 is the longest suffix of the history h for which (h_k* w) is stored and h_j is the
suffix of length j (a missing context has b = 1). Vocabulary ids: the words, ``</s>`` and
``<s>`` (context only, never predicted).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nslm.errors import NslmError
from nslm.files.atomic import remove_stale_temporaries, temporary_prefix
from nslm.ngram.counting import with_sentence_starts

BOS = "<s>"
EOS = "</s>"
LN10 = math.log(10.0)
FORMAT = "nslm-ngram/1"


@dataclass
class NgramModel:
    """An n-gram LM in backoff form. ``keys[k-1]``, ``log10_prob[k-1]`` describe order k."""

    itos: list[str]
    bos_id: int
    eos_id: int
    unk_id: int
    keys: list[np.ndarray]
    log10_prob: list[np.ndarray]
    log10_backoff: list[np.ndarray]  # orders 1..N-1
    meta: dict = field(default_factory=dict)
    stoi: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if len(self.keys) != len(self.log10_prob) or len(self.log10_backoff) != self.order - 1:
            raise ValueError("inconsistent n-gram tables")
        if len(self.keys[0]) != len(self.itos):
            raise ValueError("the unigram table must be dense over the vocabulary")

    @classmethod
    def from_counts(
        cls,
        counts,
        itos: list[str],
        unk_id: int,
        log10_prob: list[np.ndarray],
        log10_backoff: list[np.ndarray],
        meta: dict,
    ) -> NgramModel:
        """A model estimated from ``counts`` (a :class:`~nslm.ngram.counting.NgramCounts`):
        its n-gram keys, with the estimator's probabilities and backoff weights."""
        keys = [oc.keys for oc in counts.orders]
        return cls(
            itos, counts.bos_id, counts.eos_id, unk_id, keys, log10_prob, log10_backoff, meta
        )

    @property
    def order(self) -> int:
        return len(self.keys)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def sizes(self) -> list[int]:
        return [len(k) for k in self.keys]

    # -- lookups ---------------------------------------------------------------------------

    def lookup(self, k: int, prefix_rank: np.ndarray, words: np.ndarray) -> np.ndarray:
        """Rank of the order-k n-gram (context rank, word) in its table, −1 if absent."""
        words = np.asarray(words, dtype=np.int64)
        if k == 1:
            return words.copy()
        prefix_rank = np.asarray(prefix_rank, dtype=np.int64)
        table = self.keys[k - 1]
        out = np.full(len(words), -1, dtype=np.int64)
        # Only n-grams whose prefix is stored can be stored (prefix closure): search just those.
        live = np.flatnonzero(prefix_rank >= 0)
        if len(table) == 0 or live.size == 0:
            return out
        wanted = prefix_rank[live] * self.vocab_size + words[live]
        # numpy's binary search is several times faster on sorted needles (cache locality,
        # and it narrows each search with the previous result), which pays for the sort.
        perm = np.argsort(wanted, kind="stable")
        idx = np.empty_like(perm)
        idx[perm] = np.searchsorted(table, wanted[perm])
        idx = np.minimum(idx, len(table) - 1)
        found = table[idx] == wanted
        out[live[found]] = idx[found]
        return out

    def context_ranks(self, context: list[int]) -> list[int]:
        """Ranks of the context's suffixes of length 1..len (−1 once one is missing)."""
        ranks: list[int] = []
        rank = -1
        for j in range(1, len(context) + 1):
            # the suffix of length j = context[-j] followed by the suffix of length j-1
            words = context[-j:]
            rank = words[0]
            for m in range(2, j + 1):
                rank = int(self.lookup(m, np.array([rank]), np.array([words[m - 1]]))[0])
                if rank < 0:
                    break
            ranks.append(rank)
        return ranks

    # -- scoring ---------------------------------------------------------------------------

    def score_ids(self, ids: np.ndarray, *, first_nan: bool = True) -> np.ndarray:
        """Natural-log P(w_t | history) for every position of an ``</s>``-terminated stream.

        A sentence starts at position 0 and after every ``</s>``; its history begins with
        ``<s>``. With ``first_nan`` position 0 is NaN, as the evaluator's contract asks of
        every model (neural LMs have no history there).
        """
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return np.zeros(0)
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError("token id outside the model's vocabulary")
        ext = with_sentence_starts(ids, self.eos_id, self.bos_id)
        target = ext != self.bos_id
        n = len(ext)
        log10p = np.full(n, -np.inf)
        hit = np.zeros(n, dtype=np.int64)
        ranks = [ext]  # ranks[k-1][p]: rank of the k-gram ending at p, -1 if not stored
        prev = ext
        for k in range(1, self.order + 1):
            if k == 1:
                cur = ext
            else:
                shifted = np.concatenate(([-1], prev[:-1]))
                cur = self.lookup(k, shifted, ext)
                ranks.append(cur)
            ok = cur >= 0
            log10p[ok] = self.log10_prob[k - 1][cur[ok]]
            hit[ok] = k
            prev = cur
        # Back off from every stored context longer than the one that matched.
        for j in range(1, self.order):
            ctx = np.concatenate(([-1], ranks[j - 1][:-1]))
            use = (ctx >= 0) & (j >= hit)
            log10p[use] += self.log10_backoff[j - 1][ctx[use]]
        out = log10p[target] * LN10
        if first_nan:
            out[0] = np.nan
        return out

    def distribution(self, history: list[int]) -> np.ndarray:
        """The full next-word distribution P(· | history) as a dense float64 vector.

        ``history`` is the list of ids since the sentence began (without ``<s>``); it is
        cut at the last ``</s>`` and only its last N−1 words (with ``<s>``) matter.
        """
        hist = list(history)
        if self.eos_id in hist:
            hist = hist[len(hist) - hist[::-1].index(self.eos_id) :]
        context = [self.bos_id, *hist][-(self.order - 1) :] if self.order > 1 else []
        log10p = self.log10_prob[0].copy()
        ranks = self.context_ranks(context)
        v = self.vocab_size
        for j, rank in enumerate(ranks, start=1):
            if rank < 0:
                break
            log10p += self.log10_backoff[j - 1][rank]
            table = self.keys[j]
            lo, hi = np.searchsorted(table, [rank * v, (rank + 1) * v])
            log10p[table[lo:hi] % v] = self.log10_prob[j][lo:hi]
        probs = np.power(10.0, log10p)
        probs[self.bos_id] = 0.0
        return probs

    # -- vocabulary --------------------------------------------------------------------------

    def encode(self, tokens: list[str]) -> np.ndarray:
        unk = self.unk_id
        return np.fromiter((self.stoi.get(t, unk) for t in tokens), np.int64, len(tokens))

    def map_vocabulary(self, itos: list[str], eos_token: str = "<eos>") -> np.ndarray:
        """An array mapping another vocabulary's ids to this model's (``eos_token`` → ``</s>``)."""
        names = [EOS if t == eos_token else t for t in itos]
        return self.encode(names)

    # -- persistence ---------------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write ``model.npz`` (arrays) and ``model.json`` (vocabulary, meta) atomically."""
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(directory)  # what a killed save left
        tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=temporary_prefix(directory)))
        try:
            arrays: dict[str, np.ndarray] = {}
            for k in range(1, self.order + 1):
                arrays[f"keys_{k}"] = self.keys[k - 1]
                arrays[f"log10_prob_{k}"] = self.log10_prob[k - 1]
                if k < self.order:
                    arrays[f"log10_backoff_{k}"] = self.log10_backoff[k - 1]
            np.savez(tmp / "model.npz", **arrays)
            info = {
                "format": FORMAT,
                "order": self.order,
                "itos": self.itos,
                "bos_id": self.bos_id,
                "eos_id": self.eos_id,
                "unk_id": self.unk_id,
                "meta": self.meta,
            }
            (tmp / "model.json").write_text(json.dumps(info))
            if directory.exists():
                if not (directory / "model.json").is_file():
                    raise NslmError(f"{directory} exists and is not an n-gram model directory")
                shutil.rmtree(directory)
            os.rename(tmp, directory)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> NgramModel:
        directory = Path(directory)
        info_path = directory / "model.json"
        if not info_path.is_file():
            raise NslmError(f"{directory}: not an n-gram model (no model.json)")
        try:
            info = json.loads(info_path.read_text())
            if info.get("format") != FORMAT:
                raise NslmError(f"{info_path}: unknown format {info.get('format')!r}")
            order = int(info["order"])
            with np.load(directory / "model.npz", allow_pickle=False) as arrays:
                keys = [arrays[f"keys_{k}"] for k in range(1, order + 1)]
                probs = [arrays[f"log10_prob_{k}"] for k in range(1, order + 1)]
                backoffs = [arrays[f"log10_backoff_{k}"] for k in range(1, order)]
            return cls(
                itos=list(info["itos"]),
                bos_id=int(info["bos_id"]),
                eos_id=int(info["eos_id"]),
                unk_id=int(info["unk_id"]),
                keys=keys,
                log10_prob=probs,
                log10_backoff=backoffs,
                meta=dict(info.get("meta", {})),
            )
        except (KeyError, ValueError, OSError) as exc:
            raise NslmError(f"{directory}: damaged n-gram model ({exc})") from None
