"""The n-gram model on prepared WikiText-2: the evaluator's per-class table and the
class-tagged stream an n-gram NSLM needs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nslm.evaluation.class_perplexity import class_perplexities
from nslm.ngram.build import build_model, prepared_stream, score_split

pytestmark = [pytest.mark.realdata, pytest.mark.slow]


@pytest.fixture(scope="module")
def plain_and_tagged(wt2_numbers):
    plain = build_model(prepared_stream(wt2_numbers, "train"), 3)
    tagged = build_model(prepared_stream(wt2_numbers, "train", tagged=True), 3)
    return plain, tagged


def test_scores_plug_into_the_per_class_table(wt2_numbers, plain_and_tagged) -> None:
    plain, _ = plain_and_tagged
    split = wt2_numbers.test
    log_probs = score_split(plain, wt2_numbers, "test")
    assert log_probs.shape == split.token_ids.shape and log_probs.dtype == np.float64
    assert np.isnan(log_probs[0]) and np.isfinite(log_probs[1:]).all()
    table = class_perplexities(log_probs, split, wt2_numbers)
    assert table["Global"]["tokens"] == len(split) - 1
    # a 3-gram KN model on prepared WikiText-2: global perplexity in the usual range
    assert 150 < table["Global"]["ppl"] < 350
    # numbers are the hard tokens for an n-gram (the paper's motivation)
    assert table["Numbers"]["ppl"] > 5 * table["Global"]["ppl"]


def test_tagged_stream_scores_class_probabilities(wt2_numbers, plain_and_tagged) -> None:
    plain, tagged = plain_and_tagged
    split = wt2_numbers.test
    stream = prepared_stream(wt2_numbers, "test", tagged=True)
    year = wt2_numbers.class_id("year")
    year_tag = tagged.stoi["<year>"]
    assert (stream.ids[split.class_ids == year] == year_tag).all()
    log_p_class = tagged.score_ids(stream.ids)
    np.testing.assert_array_equal(
        log_p_class, score_split(tagged, wt2_numbers, "test", tagged=True)
    )
    # at a year position the score is log P(<year> | history with classes as tags)
    t = int(np.flatnonzero(split.class_ids == year)[3])
    dist = tagged.distribution([int(i) for i in stream.ids[max(0, t - 5) : t]])
    assert abs(dist.sum() - 1) < 1e-6
    assert math.log(dist[year_tag]) == pytest.approx(log_p_class[t], rel=1e-9)
    # predicting the class is far easier than predicting the exact number
    numbers = np.isin(split.class_ids, [c for c in range(1, len(wt2_numbers.class_names))])
    log_p_word = plain.score_ids(prepared_stream(wt2_numbers, "test").ids)
    assert np.mean(log_p_class[numbers]) > np.mean(log_p_word[numbers]) + 2.0
