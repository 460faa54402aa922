"""Pieces of ``nslm predict`` that need no run: the top-k selection."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.generation.predict import top_indices


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.integers(-5, 5), min_size=1, max_size=60), k=st.integers(1, 70))
def test_top_indices_is_the_stable_sort_prefix(values: list[int], k: int) -> None:
    scores = np.asarray(values, dtype=float)
    want = np.argsort(-scores, kind="stable")[:k]
    np.testing.assert_array_equal(top_indices(scores, k), want)
