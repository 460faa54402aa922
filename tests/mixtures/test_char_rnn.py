"""The CRNN baseline: a per-class character LSTM normalised over V_c (real WikiText-2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from nslm.data import PreparedCorpus
from nslm.errors import NslmError
from nslm.mixtures.char_rnn import CharRNNClassModel, CharRNNConfig


@pytest.fixture(scope="module")
def day_crnn(wt2_numbers: PreparedCorpus) -> CharRNNClassModel:
    torch.manual_seed(0)
    return CharRNNClassModel(CharRNNConfig(epochs=2)).fit(wt2_numbers, "day")


def test_distribution_over_the_class_vocabulary_sums_to_one(day_crnn) -> None:
    matrix = day_crnn.log_prob_matrix(["", "12"])
    assert matrix.shape == (2, len(day_crnn.candidates))
    np.testing.assert_allclose(np.exp(matrix).sum(axis=1), 1.0, atol=1e-9)
    assert np.isfinite(matrix).all()


def test_it_learns_the_class_unigram(day_crnn, wt2_numbers: PreparedCorpus) -> None:
    probs = np.exp(day_crnn.log_prob_matrix([""])[0])
    counts = wt2_numbers.vocab.counts[day_crnn.candidates]
    seen = counts > 0
    assert spearmanr(probs[seen], counts[seen]).statistic > 0.5


def test_targets_are_scored_only_at_class_positions(day_crnn, wt2_numbers) -> None:
    split = wt2_numbers.valid
    scores = day_crnn.log_prob_targets(wt2_numbers, split)
    day = split.class_ids == wt2_numbers.class_id("day")
    assert np.isfinite(scores[day]).all() and np.isnan(scores[~day]).all()
    # better than a uniform distribution over V_<day>
    assert -scores[day].mean() < np.log(len(day_crnn.candidates))


def test_previous_context_follows_the_previous_year(wt2_numbers: PreparedCorpus) -> None:
    model = CharRNNClassModel(CharRNNConfig(context="previous", epochs=1, hidden=64)).fit(
        wt2_numbers, "year"
    )
    index = {wt2_numbers.vocab.itos[i]: k for k, i in enumerate(model.candidates)}
    after_1990 = model.log_prob_matrix(["1990"])[0]
    assert after_1990[index["1991"]] > after_1990[index["1500"]]


def test_save_and_load_give_identical_scores(day_crnn, tmp_path: Path) -> None:
    day_crnn.save(tmp_path)
    again = CharRNNClassModel.load(tmp_path, "day")
    np.testing.assert_array_equal(
        again.log_prob_matrix(["", "3"]), day_crnn.log_prob_matrix(["", "3"])
    )


def test_bad_context_option_is_a_user_error() -> None:
    with pytest.raises(NslmError, match="context"):
        CharRNNClassModel(CharRNNConfig(context="sideways"))
