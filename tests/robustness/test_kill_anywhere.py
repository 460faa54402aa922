"""Kill anywhere (robustness.kill): SIGKILL at seeded random moments and in the middle of a
write, rerun or resume, and the outputs equal an uninterrupted run's. Two random moments a
command here (one for two training processes, whose start-up alone takes seconds);
benchmarks/house/robustness.py tries more."""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from robustness.kill import TARGETS, KillTarget, kill_point_problems, kill_points, reference
from robustness.world import World

POINTS = {"train (2 processes)": 1}


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target.name)
def test_killed_anywhere_a_rerun_ends_as_an_uninterrupted_run(
    target: KillTarget, world: World, tmp_path: Path
) -> None:
    expected, seconds = reference(target, world, tmp_path / "uninterrupted")
    moments = kill_points(zlib.crc32(target.name.encode()), POINTS.get(target.name, 2), seconds)
    cut_short = 0
    for i, moment in enumerate(moments):
        killed, problems = kill_point_problems(
            target, world, tmp_path / f"kill-{i}", moment, expected
        )
        assert problems == [], "killed " + ("while writing" if moment is None else f"at {moment} s")
        cut_short += killed
    # the reference's time includes a cold start that later runs skip, so a late moment can
    # come after a warm run's end: then earlier ones, halving, until one cuts a run short
    moment = min(m for m in moments if m is not None) if any(moments) else seconds
    tried = list(moments)
    while not cut_short and moment > 0.05:
        moment = round(moment / 2, 2)
        tried.append(moment)
        killed, problems = kill_point_problems(
            target, world, tmp_path / "kill-early", moment, expected
        )
        assert problems == [], f"killed at {moment} s"
        cut_short += killed
    assert cut_short, f"every kill came after the end ({tried} s of {seconds:.1f} s)"
