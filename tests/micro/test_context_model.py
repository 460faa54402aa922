"""The context-aware micro-model of a class (nslm.micro.context_model) on WikiText-2 years:
a pinned gate is the plain micro-model, and a gate given the sign of the true year
difference learns to pick the "later" or "earlier" part."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.micro.classdata import builtin_class
from nslm.micro.context_model import ContextMicroModel
from nslm.micro.gated import GatedMixture, Restricted
from nslm.micro.model import MicroModel


@pytest.fixture(scope="module")
def years(wt2_numbers):
    year = builtin_class(wt2_numbers, "year")
    plain = MicroModel(year, "diff", "multinomial", bins=256, epsilon=0.05).fit(wt2_numbers.train)
    components = [plain, Restricted(plain, "after"), Restricted(plain, "before")]
    return wt2_numbers, year, plain, components


def sign_features(corpus, year, split) -> np.ndarray:
    """(N, 2) per year position: the sign of (target − previous year) and a bias-like 1;
    0 where there is no previous year. A stand-in for what an LM's h would need to know."""
    positions, index = year.positions(split)
    ctx = year.context(split, positions, "class")
    diff = year.candidates.values[index] - ctx.prev_value
    sign = np.where(np.isfinite(diff), np.sign(diff), 0.0)
    return np.stack([sign, np.ones_like(sign)], axis=1)


def split_features(corpus, year, split) -> np.ndarray:
    """The sign features as the scoring pass keeps states: one row per split position."""
    out = np.zeros((len(split), 2))
    out[year.positions(split)[0]] = sign_features(corpus, year, split)
    return out


def test_a_pinned_gate_is_the_plain_micro_model(years) -> None:
    corpus, year, plain, components = years
    model = ContextMicroModel(year, components, dim=2)
    model.gate = GatedMixture.pinned(3, 2, component=0)
    split = corpus.valid
    got = model.log_prob_targets(split, split_features(corpus, year, split))
    np.testing.assert_allclose(
        got, plain.log_prob_targets(split), rtol=0, atol=1e-12, equal_nan=True
    )


def test_the_gate_learns_to_pick_later_or_earlier_years(years) -> None:
    corpus, year, plain, components = years
    model = ContextMicroModel(year, components, dim=2)
    train, valid = corpus.train, corpus.valid
    model.fit(train, sign_features(corpus, year, train), valid, sign_features(corpus, year, valid))
    mixed = model.log_prob_targets(valid, split_features(corpus, year, valid))
    base = plain.log_prob_targets(valid)
    in_class = np.isfinite(base)
    # knowing the sign halves the candidates: about log 2 nats per year, minus the smoothing
    assert np.mean(base[in_class] - mixed[in_class]) < -0.3
    # and every row stays a distribution over V_c
    positions, _ = year.positions(valid)
    H = sign_features(corpus, year, valid)[:50]
    rows = model.log_prob(year.context(valid, positions[:50], model.context), H)
    np.testing.assert_allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-9)


def test_json_and_tensors_round_trip(years) -> None:
    corpus, year, _, components = years
    model = ContextMicroModel(year, components, dim=2)
    rng = np.random.default_rng(0)
    model.gate.W, model.gate.b = rng.normal(size=(3, 2)), rng.normal(size=3)
    again = ContextMicroModel.from_json(model.to_json(), year, model.gate.tensors())
    assert again.names == model.names
    H = split_features(corpus, year, corpus.valid)
    np.testing.assert_allclose(
        again.log_prob_targets(corpus.valid, H),
        model.log_prob_targets(corpus.valid, H),
        atol=1e-5,
        equal_nan=True,
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.1, 100.0))
def test_a_fitted_gate_gives_a_distribution_over_vc_for_any_h(years, seed, scale) -> None:
    corpus, year, _, components = years
    model = ContextMicroModel(year, components, dim=2)
    rng = np.random.default_rng(seed)
    model.gate.W, model.gate.b = rng.normal(size=(3, 2)) * scale, rng.normal(size=3)
    positions, _ = year.positions(corpus.valid)
    rows = model.log_prob(
        year.context(corpus.valid, positions[:40], model.context), rng.normal(size=(40, 2)) * scale
    )
    np.testing.assert_allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-9)
