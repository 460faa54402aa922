"""N-gram counting over an id stream with sorted numpy arrays (no Python object per n-gram).

The training text is one int array in which every sentence is ``<s> w1 … wn </s>``, with a
single ``<s>`` (as KenLM's ``lmplz`` does after collapsing its padding: an n-gram never holds
``<s>`` anywhere but in its first position, so no n-gram crosses a sentence boundary).

Each n-gram of order k is one int64 *key*: ``rank_{k-1}(prefix) · V + last_word``, where
``rank_{k-1}`` is the index of the (k−1)-gram prefix in the sorted table of order k−1 and V is
the vocabulary size (``<s>`` included). Unigram ranks are the word ids themselves (the unigram
table is dense). Because ranks follow lexicographic order, each order's sorted key array is in
lexicographic order too, so all n-grams sharing a context are contiguous, and a lookup is one
``np.searchsorted``. Keys stay far below 2**63: rank < #n-grams and V < 2**31.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nslm.errors import NslmError

MAX_ORDER = 9


def check_order(order: int) -> None:
    if not 1 <= int(order) <= MAX_ORDER:
        raise NslmError(f"n-gram order must be between 1 and {MAX_ORDER}, got {order}")


@dataclass
class OrderCounts:
    """The distinct n-grams of one order k, in key (lexicographic) order.

    ``count``: raw occurrence count. ``suffix``: rank of the (k−1)-gram obtained by dropping
    the first word (k ≥ 2; the lower order this n-gram interpolates with). ``starts_bos``:
    whether the first word is ``<s>``. The context rank and the last word are not stored:
    they are ``keys // V`` and ``keys % V``.
    """

    keys: np.ndarray  # int64, sorted, unique
    count: np.ndarray  # int64
    suffix: np.ndarray  # int64 (k ≥ 2), empty for k = 1
    starts_bos: np.ndarray  # bool
    vocab_size: int

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def prefix(self) -> np.ndarray:
        """Rank of each n-gram's (k−1)-gram context (all 0 for unigrams: the empty context)."""
        if len(self.suffix) == 0:
            return np.zeros(len(self.keys), dtype=np.int64)
        return self.keys // self.vocab_size


@dataclass
class NgramCounts:
    """Raw counts of every order 1..N and the continuation (left-extension) counts.

    The order N, the vocabulary size V and the number of training tokens are not stored: the
    list of orders and its dense unigram table hold them.
    """

    orders: list[OrderCounts]  # orders[k-1] holds order k
    continuation: list[np.ndarray]  # continuation[k-1]: distinct left words, orders 1..N-1
    bos_id: int
    eos_id: int

    @property
    def order(self) -> int:
        return len(self.orders)

    @property
    def vocab_size(self) -> int:
        """V, ``<s>`` included: the unigram table has a row per word."""
        return self.orders[0].vocab_size

    @property
    def n_tokens(self) -> int:
        """Predicted tokens in the training stream: all but ``<s>``, whose unigram count is 0."""
        return int(self.orders[0].count.sum())

    def top_level(self, k: int) -> np.ndarray:
        """Mask of the order-k n-grams whose context is a complete history.

        That is every n-gram of the highest order, and, below it, those that start with
        ``<s>`` (the history cannot be extended further left). These take raw counts in
        modified Kneser-Ney (as in lmplz) and are the MLE / add-k events.
        """
        oc = self.orders[k - 1]
        if k == self.order:
            return np.ones(len(oc), dtype=bool)
        return oc.starts_bos


def with_sentence_starts(ids: np.ndarray, eos_id: int, bos_id: int) -> np.ndarray:
    """Insert one ``<s>`` before every sentence of an ``<eos>``-terminated id stream.

    A sentence starts at position 0 and after each ``eos_id``. A trailing ``<eos>`` does not
    open an empty sentence at the very end.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return np.full(0, bos_id, dtype=np.int64)
    starts = np.flatnonzero(ids[:-1] == eos_id) + 1
    starts = np.concatenate(([0], starts))
    return np.insert(ids, starts, bos_id)


def _next_bos(stream: np.ndarray, bos_id: int) -> np.ndarray:
    """For each position i, the index of the first ``<s>`` strictly after i (len if none)."""
    n = len(stream)
    pos = np.flatnonzero(stream == bos_id)
    # searchsorted(side="right") finds the first <s> index greater than i.
    idx = np.searchsorted(pos, np.arange(n), side="right")
    padded = np.concatenate((pos, [n]))
    return padded[idx]


def count_ngrams(
    stream: np.ndarray, order: int, vocab_size: int, bos_id: int, eos_id: int
) -> NgramCounts:
    """Count all n-grams of orders 1..``order`` in a ``<s>``-delimited id stream."""
    check_order(order)
    stream = np.asarray(stream, dtype=np.int64)
    n = len(stream)
    if np.all(stream == bos_id):  # nothing to predict (<s> alone, or nothing at all)
        raise NslmError("cannot count n-grams: the training corpus has no tokens")
    if stream.min() < 0 or stream.max() >= vocab_size:
        raise ValueError("token id outside the vocabulary")
    v = np.int64(vocab_size)
    next_bos = _next_bos(stream, bos_id)
    positions = np.arange(n, dtype=np.int64)

    # Order 1: a dense table over the whole vocabulary; <s> is never predicted, so count 0.
    uni_count = np.bincount(stream, minlength=vocab_size).astype(np.int64)
    uni_count[bos_id] = 0
    all_ids = np.arange(vocab_size, dtype=np.int64)
    orders = [
        OrderCounts(
            keys=all_ids,
            count=uni_count,
            suffix=np.zeros(0, dtype=np.int64),
            starts_bos=all_ids == bos_id,
            vocab_size=vocab_size,
        )
    ]
    # rank[i]: rank of the (k-1)-gram starting at position i, -1 where there is none.
    rank = stream.copy()
    continuation: list[np.ndarray] = []
    for k in range(2, order + 1):
        # A k-gram starting at i is valid if it fits and has no <s> after its first word.
        valid = positions + (k - 1) < next_bos
        valid[n - k + 1 :] = False
        starts = np.flatnonzero(valid)
        keys = rank[starts] * v + stream[starts + k - 1]
        uniq, first_idx, inverse, counts = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        first_pos = starts[first_idx]
        suffix = rank[first_pos + 1]
        lower = orders[k - 2]
        # Distinct left extensions of each (k-1)-gram = how many k-grams have it as suffix.
        continuation.append(np.bincount(suffix, minlength=len(lower)).astype(np.int64))
        orders.append(
            OrderCounts(
                keys=uniq,
                count=counts.astype(np.int64),
                suffix=suffix,
                starts_bos=stream[first_pos] == bos_id,
                vocab_size=vocab_size,
            )
        )
        rank = np.full(n, -1, dtype=np.int64)
        rank[starts] = inverse.reshape(-1)
    return NgramCounts(orders, continuation, bos_id=bos_id, eos_id=eos_id)
