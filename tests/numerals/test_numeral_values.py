"""The modes of the word-level models (numerals/values.py) over a given candidate
set: Table 4's one set for every row."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from nslm.data.numbers import number_positions, number_value
from nslm.numerals.value_metrics import candidate_strings
from nslm.numerals.values import candidate_types, predicted_values
from nslm.runs.load import load_run
from nslm.runs.micro import load_run_micro
from nslm.scores.passes import head_of


def test_candidates_outside_the_vocabulary_are_refused() -> None:
    assert candidate_types(["the", "1", "2,000"], ["2,000", "1"]).tolist() == [2, 1]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        candidate_types(["the", "1"], ["1", "7"])


def test_every_mode_is_a_given_candidate(tiny_nslm_run: Path) -> None:
    """NNLM, NSLM and NSLM-pure choose among the given strings only, and the NNLM's mode is
    the argmax of its softmax restricted to them."""
    loaded = load_run(tiny_nslm_run)
    corpus = loaded.corpus
    split = head_of(corpus.test, 6000)
    positions = number_positions(split, corpus.class_names)[:60]
    assert len(positions)
    candidates = candidate_strings(corpus)[::3]  # a subset, so the default would differ
    micro = load_run_micro(loaded)
    models = {"NSLM": (micro, 0.5, None), "NSLM-pure": (micro, 0.0, None)}
    scorer = loaded.scorer()
    itos, names = corpus.vocab.itos, corpus.class_names
    got = predicted_values(scorer, split, positions, itos, names, models, candidates=candidates)
    allowed = {number_value(c) for c in candidates}
    for values in got.values():
        assert set(values.tolist()) <= allowed
    ids = candidate_types(itos, candidates)
    h = scorer.features_at(split, positions)
    with torch.no_grad():
        best = loaded.model.heads["nnlm"].log_dist(h).double().numpy()[:, ids].argmax(1)
    values = np.array([number_value(c) for c in candidates])
    np.testing.assert_array_equal(got["NNLM"], values[best])
