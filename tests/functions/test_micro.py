"""Functions inside the LSTM NSLM (``nslm.functions.micro``): class c's micro-model with the
functions mixed in sums to one over V_c by enumeration, equals the base model where no
function fires, and moves mass to the computed value where one does."""

from __future__ import annotations

import numpy as np
import pytest

from nslm.functions.micro import FunctionMicroModel, split_documents, with_functions
from nslm.functions.model import FunctionModel
from nslm.runs.open import open_run


@pytest.fixture(scope="module")
def opened(tiny_nslm_run):
    return open_run(tiny_nslm_run, micro="plain")


@pytest.fixture(scope="module")
def functions(opened) -> FunctionModel:
    """Functions fitted on the tiny run's own training split, as the model reads it."""
    corpus = opened.loaded.corpus
    train, _ = split_documents(corpus.train, corpus.vocab.itos)
    valid, _ = split_documents(corpus.valid, corpus.vocab.itos)
    return FunctionModel(["convert", "season"]).fit(train, valid)


def test_a_function_micro_model_sums_to_one_over_its_class(opened, functions) -> None:
    corpus = opened.loaded.corpus
    base = opened.micro["convert"]
    wrapped = FunctionMicroModel(base, functions, corpus.vocab.itos)
    members = list(base.cls.candidates.strings)
    rng = np.random.default_rng(0)
    row = np.log(rng.dirichlet(np.ones(len(members))))  # a base distribution over V_c
    tokens, i = ["It", "is", "5", "miles", "(", "8"], 5  # 5 mi = 8.05 km
    weight, probs = wrapped.weight_and_probs(tokens, i)
    assert weight > 0 and "8" in probs  # "8" is a member of V_convert
    assert sum(probs.values()) == pytest.approx(1.0) and set(probs) <= set(members)
    mixed = wrapped.log_prob_row(tokens, i, row)
    assert np.exp(mixed).sum() == pytest.approx(1.0, abs=1e-12)  # enumerated over V_c
    assert mixed[members.index("8")] > row[members.index("8")]
    quiet = wrapped.log_prob_row(["It", "is", "here", "8"], 3, row)
    np.testing.assert_array_equal(quiet, row)  # no function fires: the base model


def test_scores_change_only_where_a_function_fires(opened, functions) -> None:
    corpus = opened.loaded.corpus
    micro = with_functions(opened.micro, functions, corpus.vocab.itos, list(opened.micro))
    split = corpus.valid
    documents, offsets = split_documents(split, corpus.vocab.itos)
    index = np.repeat(np.arange(len(documents)), [len(d) for d in documents])
    changed = 0
    for name, model in micro.items():
        base = opened.micro[name].log_prob_targets(split)
        mixed = model.log_prob_targets(split)
        np.testing.assert_array_equal(np.isnan(base), np.isnan(mixed))
        for t in np.flatnonzero(np.isfinite(base) & (base != mixed)):
            assert functions.firings(documents[index[t]], int(offsets[t]))
            changed += 1
    assert changed > 10  # WikiText-2 valid's conversions
