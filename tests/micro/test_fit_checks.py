"""Fits report their convergence and the bounds they reach (micro/fit_checks.py)."""

from __future__ import annotations

import numpy as np

from nslm.micro.fit_checks import BOUND, Parameter, fit_lbfgs, not_fitted
from nslm.micro.logspace import sigmoid


def test_an_interior_optimum_converges_and_is_not_at_a_bound():
    # a Bernoulli likelihood of 30 heads in 100 through a sigmoid: θ̂ = logit(0.3)
    def loss(theta):
        p = sigmoid(theta[0])
        return -(0.3 * np.log(p) + 0.7 * np.log1p(-p)) + (theta[1] - 2.0) ** 2

    theta, best, report = fit_lbfgs(loss, [0.0, 0.0], [Parameter("p", "weight"), Parameter("x")])
    assert abs(report["p"]["value"] - 0.3) < 1e-4
    assert abs(report["x"]["value"] - 2.0) < 1e-4
    assert all(r["converged"] and not r["at_bound"] for r in report.values())
    assert report["p"]["iterations"] >= 1
    assert np.isclose(best, loss(theta))


def test_a_weight_whose_likelihood_rises_to_one_is_reported_at_its_bound():
    # every observation is a head: the likelihood rises monotonically toward p = 1
    def loss(theta):
        return -float(np.log(sigmoid(theta[0])))

    _, _, report = fit_lbfgs(loss, [0.0], [Parameter("p", "weight")])
    entry = report["p"]
    assert entry["at_bound"] and 1 - entry["value"] < BOUND
    assert entry["converged"]  # the bound is the optimum: the loss is higher inside
    assert "falls toward the bound" in entry["why"]


def test_a_saturated_start_that_scipy_calls_converged_is_restarted_inside():
    # the optimum is p = 0.5, but at θ = 20 the sigmoid is saturated in floating point, so
    # the finite-difference gradient is zero and L-BFGS-B stops at once: the check sees a
    # lower loss inside the bound and restarts there
    def loss(theta):
        p = sigmoid(theta[0])
        return -(0.5 * np.log(p) + 0.5 * np.log1p(-p))

    _, _, report = fit_lbfgs(loss, [20.0], [Parameter("p", "weight")])
    assert abs(report["p"]["value"] - 0.5) < 1e-4
    assert report["p"]["converged"] and not report["p"]["at_bound"]


def test_a_fit_that_ends_short_of_its_optimum_at_a_bound_is_not_converged(monkeypatch):
    from nslm.micro import fit_checks

    def loss(theta):
        p = sigmoid(theta[0])
        return -(0.5 * np.log(p) + 0.5 * np.log1p(-p))

    monkeypatch.setattr(fit_checks, "RESTARTS", 0)
    _, _, report = fit_lbfgs(loss, [20.0], [Parameter("p", "weight")])
    assert report["p"]["at_bound"] and not report["p"]["converged"]
    assert "stopped short" in report["p"]["why"]


def test_parameters_left_at_their_defaults_say_why():
    report = not_fitted(("alpha", "beta"), "no rows")
    assert set(report) == {"alpha", "beta"}
    assert all(r["why"] == "no rows" and r["value"] is None for r in report.values())
