"""The learning-rate schedules: warm-up, cosine over steps or over the wall-time budget, and
the rate halving of Gill (2017) on a scripted sequence of validation figures."""

from __future__ import annotations

import json
import math

import pytest

from nslm.config import load_config
from nslm.training.optim import RateHalving, scheduled_lr


def test_cosine_follows_the_time_budget_and_ends_at_zero() -> None:
    cfg = load_config(None, ["lr_schedule='cosine'", "max_minutes=10.0"])
    assert scheduled_lr(cfg, 1.0, 0, 10**9, 0.0) == pytest.approx(1.0)
    assert scheduled_lr(cfg, 1.0, 0, 10**9, 300.0) == pytest.approx(0.5)
    assert scheduled_lr(cfg, 1.0, 0, 10**9, 600.0) == pytest.approx(0.0, abs=1e-12)
    # Whichever runs out first, steps or time, drives the schedule.
    assert scheduled_lr(cfg, 1.0, 50, 100, 1.0) == pytest.approx(0.5)


def test_warmup_then_constant() -> None:
    cfg = load_config(None, ["lr_schedule='constant'", "warmup_steps=4"])
    assert [scheduled_lr(cfg, 2.0, s, 100, 0.0) for s in range(6)] == [
        0.5,
        1.0,
        1.5,
        2.0,
        2.0,
        2.0,
    ]


# -- the rate-halving schedule (Gill 2017, Figure 2) ---------------------------------------


def test_rate_halving_halves_exactly_when_the_gain_drops_below_epsilon() -> None:
    rule = RateHalving(lr=0.8, epsilon=0.01, max_halvings=10)
    # relative gains: first (none), 10%, exactly 1% (not below ε), 0.5%, worse, 50%
    figures = [100.0, 90.0, 89.1, 88.6545, 95.0, 47.5]
    lrs = [rule.update(f) for f in figures]
    assert lrs == [0.8, 0.8, 0.8, 0.4, 0.2, 0.2]
    assert rule.halvings == 2 and not rule.done and rule.prev == 47.5


def test_the_first_validation_never_halves_and_max_halvings_stops() -> None:
    rule = RateHalving(lr=1.0, epsilon=0.5, max_halvings=3)
    assert rule.update(10.0) == 1.0 and rule.halvings == 0  # nothing to compare with
    for expected in (0.5, 0.25):
        assert rule.update(10.0) == expected and not rule.done
    assert rule.update(10.0) == 0.125 and rule.done and rule.halvings == 3


def test_a_non_finite_figure_halves_and_is_not_compared_with() -> None:
    rule = RateHalving(lr=1.0, epsilon=0.1, max_halvings=10)
    rule.update(10.0)
    assert rule.update(math.nan) == 0.5  # a diverged validation is no gain
    assert rule.update(8.0) == 0.5 and rule.prev == 8.0  # 20% better than 10, the last finite


def test_rate_halving_state_round_trips_through_json() -> None:
    rule = RateHalving(lr=1.0, epsilon=0.1, max_halvings=4)
    for figure in (10.0, 9.95, 9.9):
        rule.update(figure)
    saved = json.loads(json.dumps(rule.state_dict()))
    again = RateHalving(lr=1.0, epsilon=0.1, max_halvings=4)
    again.load_state_dict(saved)
    assert again.state_dict() == rule.state_dict()
    assert again.update(9.0) == rule.update(9.0) and again.halvings == rule.halvings
