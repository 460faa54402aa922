"""The bad-input battery: every row of robustness.table × its kinds (robustness.cases)."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustness.cases import Case, all_cases, case_problems, reference
from robustness.world import World


def _param(case: Case):
    bug = case.known_bug()
    marks = [pytest.mark.xfail(reason=bug, strict=True)] if bug else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in all_cases()])
def test_a_bad_input_gets_one_line_and_leaves_nothing_half_written(
    case: Case, world: World, tmp_path: Path
) -> None:
    ref = reference(case.slot, world, tmp_path / "clean") if case.expected() == "same" else None
    assert case_problems(case, world, tmp_path / "case", ref) == []
