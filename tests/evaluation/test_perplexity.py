"""The per-class perplexity table that every model is scored with (paper Tables 2 and 3;
docs/nslm.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nslm.data import PreparedCorpus
from nslm.evaluation import class_perplexities, perplexity


@given(st.lists(st.floats(min_value=1e-6, max_value=1.0), min_size=1, max_size=50))
def test_perplexity_is_inverse_geometric_mean(probs: list[float]) -> None:
    expected = math.prod(p ** (-1 / len(probs)) for p in probs)
    assert perplexity(np.log(probs)) == pytest.approx(expected, rel=1e-9)


def test_zero_probability_gives_infinite_perplexity() -> None:
    assert perplexity(np.array([-1.0, -np.inf])) == math.inf
    assert math.isnan(perplexity(np.array([])))


def test_uniform_model_scores_vocabulary_size(wt2_all: PreparedCorpus) -> None:
    split = wt2_all.valid
    log_probs = np.full(len(split), -math.log(len(wt2_all.vocab)))
    log_probs[0] = np.nan
    table = class_perplexities(log_probs, split, wt2_all)
    for row in ("year", "Numbers", "Locations", "Global", "city"):
        assert table[row]["ppl"] == pytest.approx(len(wt2_all.vocab))
    assert table["Global"]["tokens"] == len(split) - 1
    year = wt2_all.class_id("year")
    assert table["year"]["tokens"] == int((split.class_ids == year).sum())
    numbers = sum(
        table[c]["tokens"] for c in ("year", "day", "round", "decimal", "range", "convert", "other")
    )
    assert table["Numbers"]["tokens"] == numbers


def test_class_rows_use_only_their_positions(wt2_numbers: PreparedCorpus) -> None:
    split = wt2_numbers.valid
    log_probs = np.full(len(split), math.log(0.5))
    log_probs[split.class_ids == wt2_numbers.class_id("year")] = math.log(0.25)
    table = class_perplexities(log_probs, split, wt2_numbers)
    assert table["year"]["ppl"] == pytest.approx(4.0)
    assert table["day"]["ppl"] == pytest.approx(2.0)
    assert "Locations" not in table


def test_shape_mismatch_is_an_error(wt2_numbers: PreparedCorpus) -> None:
    with pytest.raises(ValueError, match="shape"):
        class_perplexities(np.zeros(3), wt2_numbers.valid, wt2_numbers)
