"""Fits that say whether they worked: L-BFGS with its convergence and the bounds it reached.

The open micro-models' deleted estimations (:mod:`nslm.micro.open_set`) minimise a held-out
loss over a few parameters, each either a real number (γ's a and b, a cache's α and β, a
population prior's τ) or a weight in (0, 1) read through a sigmoid (η, λ, ε). scipy's
L-BFGS-B stops when the projected gradient or the loss's relative fall is below its
tolerance (``success``) or when it runs out of iterations; :func:`fit_lbfgs` records which,
per parameter, with the iterations it took. A weight that ends within :data:`BOUND` of 0 or 1
is *at a bound*: the sigmoid has saturated, and the estimate is the bound itself. Whether that
bound is the optimum is then checked, not assumed: the loss is evaluated with the weight moved
inside (to 0.99 or 0.01, the others as fitted), and ``why`` states both losses. Where the
loss inside is the lower one, the fit restarts from there (a saturated sigmoid has a zero
finite-difference gradient, so L-BFGS stops where it is); if it still ends so, ``converged``
is false.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nslm.micro.logspace import logit, sigmoid

MAX_ITERATIONS = 1_000  # far above what a fit of a few parameters takes (its report says)
BOUND = 1e-4  # a weight within this of 0 or 1 is at a bound
INSIDE = 0.01  # how far inside a bound the check moves a weight
RESTARTS = 3  # fits restarted from inside a bound where the loss is lower there


@dataclass(frozen=True)
class Parameter:
    """One coordinate of a fit: its name and ``kind``, "real" or "weight" (σ(θ) in (0, 1))."""

    name: str
    kind: str = "real"

    def value(self, theta: float) -> float:
        return float(sigmoid(theta)) if self.kind == "weight" else float(theta)


def fit_lbfgs(
    loss: Callable[[np.ndarray], float],
    start: Sequence[float],
    parameters: Sequence[Parameter],
) -> tuple[np.ndarray, float, dict[str, dict[str, Any]]]:
    """Minimise ``loss`` from ``start`` by L-BFGS-B; returns (θ, the loss there, the report
    keyed by parameter name: ``value``, ``converged``, ``iterations``, ``at_bound`` and, where
    at a bound, ``why``). A weight that stopped at a bound with a lower loss inside (a
    saturated sigmoid's finite-difference gradient is zero) restarts the fit from inside, up
    to :data:`RESTARTS` times."""
    if len(start) != len(parameters):
        raise ValueError(f"{len(start)} starting values for {len(parameters)} parameters")
    theta, iterations = np.asarray(start, float), 0
    for _ in range(RESTARTS + 1):
        result = minimize(loss, theta, method="L-BFGS-B", options={"maxiter": MAX_ITERATIONS})
        theta, best = np.asarray(result.x, float), float(result.fun)
        iterations += int(result.nit)
        bounds = _bound_checks(loss, theta, best, parameters)
        short = [i for i, (_, inside, _) in bounds.items() if inside < best]
        if not short:
            break
        for i in short:
            theta[i] = bounds[i][2]
    report: dict[str, dict[str, Any]] = {}
    for i, parameter in enumerate(parameters):
        value = parameter.value(theta[i])
        entry: dict[str, Any] = {
            "value": value,
            "converged": bool(result.success),
            "iterations": iterations,
            "at_bound": i in bounds,
        }
        if i in bounds:
            moved_to, loss_inside, _ = bounds[i]
            holds = loss_inside >= best
            entry["converged"] = entry["converged"] and holds
            entry["why"] = (
                f"the held-out loss is {best:.6f} nats a token at {value:.7f} and "
                f"{loss_inside:.6f} at {moved_to}: "
                + (
                    "it still falls toward the bound, which is the estimate"
                    if holds
                    else "lower inside, so the fit stopped short"
                )
            )
        report[parameter.name] = entry
    return theta, best, report


def _bound_checks(
    loss: Callable[[np.ndarray], float],
    theta: np.ndarray,
    best: float,
    parameters: Sequence[Parameter],
) -> dict[int, tuple[float, float, float]]:
    """Per weight at a bound: (the value moved inside, the loss there, its θ)."""
    out = {}
    for i, parameter in enumerate(parameters):
        value = parameter.value(theta[i])
        if parameter.kind == "weight" and min(value, 1.0 - value) < BOUND:
            inside = 1.0 - INSIDE if value > 0.5 else INSIDE
            moved = theta.copy()
            moved[i] = logit(inside)
            out[i] = (inside, float(loss(moved)), float(moved[i]))
    return out


def not_fitted(names: Sequence[str], why: str) -> dict[str, dict[str, Any]]:
    """The report of parameters a fit left at their defaults, with why (nothing to converge)."""
    entry = {"value": None, "converged": True, "iterations": 0, "at_bound": False, "why": why}
    return {name: dict(entry) for name in names}
