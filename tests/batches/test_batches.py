"""TBPTT streams: every position but 0 is a target exactly once, inputs precede targets,
and streams start at article boundaries when one is near."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.batches.streams import cut_points, make_streams


@st.composite
def corpora(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    lengths = draw(st.lists(st.integers(1, 60), min_size=1, max_size=30))
    article_ids = np.repeat(np.arange(len(lengths)), lengths).astype(np.int32)
    tokens = np.arange(len(article_ids), dtype=np.int32) * 7 % 101
    return tokens, article_ids


@settings(max_examples=60, deadline=None)
@given(corpus=corpora(), n_streams=st.integers(1, 9), bptt=st.integers(1, 12))
def test_every_position_is_a_target_once(
    corpus: tuple[np.ndarray, np.ndarray], n_streams: int, bptt: int
) -> None:
    tokens, articles = corpus
    if len(tokens) < 2 * n_streams:
        return
    streams = make_streams(tokens, np.zeros_like(tokens), articles, n_streams)
    seen = []
    for _, (x, y, _c, pos) in streams.batches(bptt):
        keep = pos >= 0
        seen.append(pos[keep])
        # y is the token at its position; x is the token just before it.
        assert np.array_equal(y[keep], tokens[pos[keep]])
        assert np.array_equal(x[keep], tokens[pos[keep] - 1])
    seen = np.sort(np.concatenate(seen))
    assert np.array_equal(seen, np.arange(1, len(tokens)))


def test_cuts_land_on_article_starts() -> None:
    article_ids = np.repeat(np.arange(40), 100)
    cuts = cut_points(article_ids, 8)
    assert cuts[0] == 0
    assert np.all(cuts % 100 == 0)
    assert np.all(np.diff(cuts) > 0)


def test_ranks_take_disjoint_streams() -> None:
    tokens = np.arange(1000, dtype=np.int32)
    articles = np.repeat(np.arange(10), 100)
    streams = make_streams(tokens, np.zeros_like(tokens), articles, 4)
    a, b = streams.take(0, 2), streams.take(2, 2)
    pa, pb = a.positions[a.positions >= 0], b.positions[b.positions >= 0]
    assert not set(pa.tolist()) & set(pb.tolist())
    assert a.tokens.shape[0] == b.tokens.shape[0]  # ranks step in lock step
