"""The context-shifted micro-model (nslm.micro.shifted) on WikiText-2 years: zero shifts are
the plain micro-model, every row is a distribution for any state, a state that carries the
sign of the year difference (or the target's era, through the value bins) is learnt, and the
parameters round-trip."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_context_model import sign_features, split_features

from nslm.errors import NslmError
from nslm.micro.classdata import builtin_class
from nslm.micro.context_model import ContextMicroModel
from nslm.micro.gated import Z_LIMIT, GatedMixture, Restricted
from nslm.micro.model import MicroModel
from nslm.micro.shifted import ShiftedMicroModel


@pytest.fixture(scope="module")
def years(wt2_numbers):
    year = builtin_class(wt2_numbers, "year")
    plain = MicroModel(year, "diff", "multinomial", bins=256, epsilon=0.05).fit(wt2_numbers.train)
    return wt2_numbers, year, plain


def test_zero_shifts_are_the_plain_micro_model(years) -> None:
    corpus, year, plain = years
    model = ShiftedMicroModel(plain, dim=2)
    got = model.log_prob_targets(corpus.valid, split_features(corpus, year, corpus.valid))
    np.testing.assert_allclose(
        got, plain.log_prob_targets(corpus.valid), atol=1e-12, equal_nan=True
    )


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), scale=st.floats(0.1, 50.0))
def test_every_row_is_a_distribution_for_any_state(years, seed: int, scale: float) -> None:
    corpus, year, plain = years
    model = ShiftedMicroModel(plain, dim=3)
    rng = np.random.default_rng(seed)
    model.A, model.a = rng.normal(size=model.A.shape) * scale, rng.normal(size=model.a.shape)
    model.value_edges = np.sort(rng.uniform(1000, 2000, size=3))  # 4 value bins
    model.B, model.b = rng.normal(size=(4, 3)) * scale, rng.normal(size=4)
    positions, _ = year.positions(corpus.valid)
    ctx = year.context(corpus.valid, positions[:30], model.context)
    rows = model.log_prob(ctx, rng.normal(size=(30, 3)) * scale)
    np.testing.assert_allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-9)


def test_a_state_with_the_sign_is_learnt_and_round_trips(years) -> None:
    corpus, year, plain = years
    train, valid = corpus.train, corpus.valid
    signs = {s.name: sign_features(corpus, year, s) for s in (train, valid)}
    model = ShiftedMicroModel(plain, dim=2).fit(train, signs["train"], valid, signs["valid"])
    H = split_features(corpus, year, valid)
    shifted, base = model.log_prob_targets(valid, H), plain.log_prob_targets(valid)
    in_class = np.isfinite(base)
    # knowing the sign is worth up to log 2 nats a year with a previous year
    assert np.mean(shifted[in_class] - base[in_class]) > 0.2
    names = model.bin_names()
    assert "diff = 0" in names and len(names) == len(model.a)
    again = ShiftedMicroModel.from_json(model.to_json(), year, model.tensors())
    np.testing.assert_allclose(again.log_prob_targets(valid, H), shifted, atol=1e-4, equal_nan=True)


def era_features(corpus, year, split) -> np.ndarray:
    """(positions, 2): whether the target year is after 1950, and a 1: what the value bins
    can use on every row, a previous year or not; the metric bins cannot."""
    _, index = year.positions(split)
    late = (year.candidates.values[index] > 1950).astype(float)
    return np.stack([late, np.ones_like(late)], axis=1)


def test_a_state_with_the_era_is_learnt_by_the_value_bins_alone(years) -> None:
    corpus, year, plain = years
    train, valid = corpus.train, corpus.valid
    era = {s.name: era_features(corpus, year, s) for s in (train, valid)}
    H = np.zeros((len(valid), 2))
    H[year.positions(valid)[0]] = era["valid"]
    gain = {}
    for value_bins in (0, 8):
        model = ShiftedMicroModel(plain, dim=2, value_bins=value_bins)
        model.fit(train, era["train"], valid, era["valid"])
        shifted, base = model.log_prob_targets(valid, H), plain.log_prob_targets(valid)
        in_class = np.isfinite(base)
        gain[value_bins] = np.mean(shifted[in_class] - base[in_class])
    assert gain[8] > 0.2 and gain[8] > gain[0] + 0.1, gain
    assert len(model.b) == len(model.value_edges) + 1 > 4
    again = ShiftedMicroModel.from_json(model.to_json(), year, model.tensors())
    np.testing.assert_allclose(again.log_prob_targets(valid, H), shifted, atol=1e-4, equal_nan=True)
    assert {row["bin"] for row in again.explain(H[:1])[0]["value_shift"]} == set(
        model.value_bin_names()
    )


def test_a_metric_without_context_cannot_be_shifted(years) -> None:
    corpus, year, _ = years
    value = MicroModel(year, "value", "multinomial").fit(corpus.train)
    with pytest.raises(NslmError, match="continuous metric of the context"):
        ShiftedMicroModel(value, dim=2)


def test_a_gate_over_a_shifted_component_pinned_to_it_is_that_model(years) -> None:
    corpus, year, plain = years
    shifted = ShiftedMicroModel(plain, dim=2)
    rng = np.random.default_rng(3)
    shifted.A, shifted.a = rng.normal(size=shifted.A.shape), rng.normal(size=shifted.a.shape)
    mixture = ContextMicroModel(year, [shifted, Restricted(plain, "after")], dim=2)
    mixture.gate = GatedMixture.pinned(2, 2, component=0)
    H = rng.normal(size=(len(corpus.valid), 2))
    np.testing.assert_allclose(
        mixture.log_prob_targets(corpus.valid, H),
        shifted.log_prob_targets(corpus.valid, H),
        atol=1e-12,
        equal_nan=True,
    )
    again = ContextMicroModel.from_json(mixture.to_json(), year, mixture.tensors())
    assert again.names == mixture.names
    # one micro-model object behind the shift and the restricted part: scored once
    assert again.components[0].model is again.components[1].model
    shown = again.explain(H[:1])[0]
    assert shown["gate"][0]["weight"] == 1.0 and len(shown["shift"]) == len(shifted.a)
    np.testing.assert_allclose(
        again.log_prob_targets(corpus.valid, H),
        mixture.log_prob_targets(corpus.valid, H),
        atol=1e-4,
        equal_nan=True,
    )


def test_a_state_far_outside_the_train_rows_moves_the_shift_a_bounded_amount(years) -> None:
    # a unit that barely moved on the train rows (scale 1e-5) once read a new prompt's
    # state as z = 10^4 and tilted a <range> by e^8000 (an infinite factor in the explorer)
    corpus, year, plain = years
    model = ShiftedMicroModel(plain, dim=2, value_bins=0)
    rng = np.random.default_rng(0)
    model.A, model.a = rng.normal(size=model.A.shape), np.zeros(len(model.a))
    model.mean, model.scale = np.zeros(2), np.array([1e-5, 1.0])
    far = np.array([[0.2, 0.0]])
    assert np.abs(model.shifts(far)).max() <= Z_LIMIT * np.abs(model.A).max() + 1e-9
    factors = [row["factor"] for row in model.explain(far)[0]["shift"]]
    assert np.isfinite(factors).all() and max(factors) > 1.0
    positions, _ = year.positions(corpus.valid)
    ctx = year.context(corpus.valid, positions[:5], model.context)
    rows = model.log_prob(ctx, np.repeat(far, 5, axis=0))
    np.testing.assert_allclose(np.exp(rows).sum(axis=1), 1.0, atol=1e-9)
