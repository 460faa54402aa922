"""The battery's text cases (robustness.text_cases): odd text through every path that reads
text, on the session's tiny WikiText-form run: sane output or one clean error, never a
traceback or a 500."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustness.text_cases import (
    TEST_BIG_LINE_BYTES,
    TextCase,
    all_text_cases,
    text_case_problems,
)


def _param(case: TextCase):
    bug = case.known_bug()
    marks = [pytest.mark.xfail(reason=bug, strict=True)] if bug else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in all_text_cases()])
def test_odd_text_gets_sane_output_or_one_line(
    case: TextCase, tiny_nslm_run: Path, tmp_path: Path
) -> None:
    assert text_case_problems(case, tiny_nslm_run, tmp_path, TEST_BIG_LINE_BYTES) == []
