"""The gated mixture of micro-models (nslm.micro.gated): a distribution for every h, exactly
one component when pinned, an exact gradient, and a gate that learns a planted context."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import check_grad
from scipy.special import log_softmax

from nslm.errors import NslmError
from nslm.micro.gated import GatedMixture


def random_components(rng: np.random.Generator, n: int, k: int, v: int) -> np.ndarray:
    """(n, k, v) log-probabilities: every (row, component) a distribution over v words."""
    return log_softmax(rng.normal(scale=3.0, size=(n, k, v)), axis=2)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 5), v=st.integers(1, 30), d=st.integers(1, 8), seed=st.integers(0, 999))
def test_the_mixture_is_a_distribution_over_vc_for_any_h(k: int, v: int, d: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    gate = GatedMixture(k, d)
    gate.W, gate.b = rng.normal(scale=2.0, size=(k, d)), rng.normal(size=k)
    H = rng.normal(scale=5.0, size=(6, d))
    mixed = gate.log_prob(H, random_components(rng, 6, k, v))
    assert mixed.shape == (6, v)
    np.testing.assert_allclose(np.exp(mixed).sum(axis=1), 1.0, atol=1e-9)


def test_a_pinned_gate_is_that_component_exactly() -> None:
    rng = np.random.default_rng(0)
    comps = random_components(rng, 5, 3, 12)
    gate = GatedMixture.pinned(3, 4, component=1)
    got = gate.log_prob(rng.normal(size=(5, 4)), comps)
    np.testing.assert_array_equal(got, comps[:, 1])


def test_the_gradient_is_exact() -> None:
    rng = np.random.default_rng(1)
    gate = GatedMixture(3, 4)
    H, L = rng.normal(size=(20, 4)), random_components(rng, 20, 3, 1)[:, :, 0]
    theta = rng.normal(size=3 * 5)

    def loss(t):
        return gate._objective(t, H, L, 0.01)[0]

    def grad(t):
        return gate._objective(t, H, L, 0.01)[1]

    assert check_grad(loss, grad, theta) < 1e-5


def planted(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """h[0] > 0 means component 0 is right (it gives the target 0.9), else component 1."""
    rng = np.random.default_rng(seed)
    H = rng.normal(size=(n, 3))
    first = H[:, 0] > 0
    p0 = np.where(first, 0.9, 0.05)
    p1 = np.where(first, 0.05, 0.9)
    return H, np.log(np.stack([p0, p1], axis=1))


def test_the_gate_learns_a_planted_context() -> None:
    H, L = planted(2000, 0)
    Hv, Lv = planted(500, 1)
    gate = GatedMixture(2, 3).fit(H, L, Hv, Lv)
    fixed = GatedMixture(2, 3)  # the best context-free mixture is 50/50 here
    assert -gate.log_prob(Hv, Lv).mean() < 0.5 * -fixed.log_prob(Hv, Lv).mean()
    assert gate.W[0, 0] - gate.W[1, 0] > 1.0  # it reads h[0], the planted cue
    assert set(gate.valid_nll_by_l2) == set(gate.l2_grid)
    again = GatedMixture.from_saved(gate.get_params(), gate.tensors())
    np.testing.assert_allclose(again.log_prob(Hv, Lv), gate.log_prob(Hv, Lv), atol=1e-5)


def test_shapes_are_checked() -> None:
    with pytest.raises(NslmError, match="expected H"):
        GatedMixture(2, 3).fit(
            np.zeros((4, 2)), np.zeros((4, 2)), np.zeros((4, 3)), np.zeros((4, 2))
        )


@pytest.mark.realdata
def test_a_restricted_year_model_keeps_only_later_years(wt2_numbers) -> None:
    from nslm.micro.classdata import builtin_class
    from nslm.micro.gated import Restricted
    from nslm.micro.history import Context
    from nslm.micro.model import MicroModel

    year = builtin_class(wt2_numbers, "year")
    model = MicroModel(year, "diff", "multinomial", bins=256).fit(wt2_numbers.train)
    ctx = Context.from_values(prev_value=np.array([1066.0, 1944.0, np.nan]))
    values = year.candidates.values
    for keep, test in [
        ("after", values > 1066),
        ("before", values < 1066),
        ("other", values != 1066),
    ]:
        part = Restricted(model, keep).log_prob(ctx)
        np.testing.assert_allclose(np.exp(part).sum(axis=1), 1.0, atol=1e-9)
        assert np.all(np.isneginf(part[0, ~test])) and np.all(np.isfinite(part[0, test]))
        np.testing.assert_array_equal(part[2], model.log_prob(ctx)[2])  # no context: plain
    with pytest.raises(NslmError, match="against the context"):
        Restricted(MicroModel(year, "value", "multinomial"), "after")
