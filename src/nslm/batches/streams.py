"""Stateful TBPTT batches: the token stream cut into parallel streams at article boundaries.

A split is cut into ``n_streams`` contiguous pieces of near-equal length. A cut is moved to
an article start when one lies within 2% of a stream length, so many streams begin with a
whole article; otherwise the stream starts mid-article with a fresh state. Either way a
stream's hidden state only ever comes from the text that precedes it in the corpus.

Each stream after the first also gets the token just before its cut as an input-only first
entry, so every position of the split except 0 is a target exactly once: training sees all
the data and evaluation scores every position once.

Streams are padded to a common length; padded entries have position −1 and are masked out
of the loss. Token and class ids keep their dtype (a byte corpus's uint8 ids stay one byte
each: 97 MB of IMDB reviews would be 770 MB as int64); consumers widen a window at a time.

Under DistributedDataParallel, ``batch`` streams are built and each of the ``world`` ranks
takes its own ``batch / world`` of them, so ranks read disjoint parts of the
corpus in lock step and N processes train on the same streams as one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np


@dataclass
class Streams:
    """(L, S) arrays: token ids, class ids and the split position of every entry (−1 = pad)."""

    tokens: np.ndarray
    classes: np.ndarray
    positions: np.ndarray

    @property
    def n_streams(self) -> int:
        return self.tokens.shape[1]

    def take(self, start: int, count: int) -> Streams:
        """Streams ``start .. start+count-1`` (one DDP rank's share)."""
        sl = slice(start, start + count)
        return Streams(self.tokens[:, sl], self.classes[:, sl], self.positions[:, sl])

    def n_batches(self, bptt: int) -> int:
        return max(0, -(-(self.tokens.shape[0] - 1) // bptt))

    def batch(self, index: int, bptt: int) -> tuple[np.ndarray, ...]:
        """(x, y, classes of y, positions of y) for TBPTT window ``index``."""
        i = index * bptt
        j = min(i + bptt, self.tokens.shape[0] - 1)
        return (
            self.tokens[i:j],
            self.tokens[i + 1 : j + 1],
            self.classes[i + 1 : j + 1],
            self.positions[i + 1 : j + 1],
        )

    def batches(self, bptt: int, start: int = 0) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
        for index in range(start, self.n_batches(bptt)):
            yield index, self.batch(index, bptt)


def cut_points(article_ids: np.ndarray, n_streams: int) -> np.ndarray:
    """Stream starts: 0, then the article start nearest each equal-length cut."""
    n = len(article_ids)
    starts = np.flatnonzero(np.diff(article_ids) != 0) + 1
    ideal = (np.arange(1, n_streams) * n) // n_streams
    cuts = ideal.copy()
    if len(starts):
        near = np.clip(np.searchsorted(starts, ideal), 1, len(starts)) - 1
        right = np.minimum(near + 1, len(starts) - 1)
        pick = np.where(
            np.abs(starts[right] - ideal) < np.abs(starts[near] - ideal),
            starts[right],
            starts[near],
        )
        # Use the article start only if it is within 2% of a stream of the ideal cut: every
        # stream is padded to the longest, so uneven cuts waste compute (a tolerance of half
        # a stream padded WikiText-2 by 30% at 80 streams; 2% keeps it to a few per cent).
        cuts = np.where(np.abs(pick - ideal) <= max(1, n // (50 * n_streams)), pick, ideal)
    cuts = np.concatenate([[0], cuts])
    # Keep cuts strictly increasing and inside the split (degenerate tiny inputs).
    for k in range(1, len(cuts)):
        cuts[k] = min(max(cuts[k], cuts[k - 1] + 1), n - 1)
    return cuts


def make_streams(
    token_ids: np.ndarray, class_ids: np.ndarray, article_ids: np.ndarray, n_streams: int
) -> Streams:
    n = len(token_ids)
    if n < 2 * n_streams:
        raise ValueError(f"{n} tokens are too few for {n_streams} streams")
    cuts = cut_points(article_ids, n_streams)
    ends = np.concatenate([cuts[1:], [n]])
    # Stream b covers targets cuts[b] .. ends[b]-1; its first entry is the token before.
    firsts = np.maximum(cuts - 1, 0)
    length = int((ends - firsts).max())
    tokens = np.zeros((length, n_streams), dtype=token_ids.dtype)
    classes = np.zeros((length, n_streams), dtype=class_ids.dtype)
    positions = np.full((length, n_streams), -1, dtype=np.int64)
    for b in range(n_streams):
        span = np.arange(firsts[b], ends[b])
        tokens[: len(span), b] = token_ids[span]
        classes[: len(span), b] = class_ids[span]
        positions[: len(span), b] = span
        # The first entry is input only, never a target.
        positions[0, b] = -1
    return Streams(tokens, classes, positions)
