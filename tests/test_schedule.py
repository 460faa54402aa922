"""The learning-rate schedule: warm-up, cosine over steps or over the wall-time budget."""

from __future__ import annotations

import pytest

from nslm.config import load_config
from nslm.training.optim import scheduled_lr


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
