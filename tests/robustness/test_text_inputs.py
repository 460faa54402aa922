"""The battery's text cases (robustness.text_cases): odd text through every path that reads
text, on the session's tiny WikiText-form run: sane output or one clean error, never a
traceback or a 500; and the text boundary's fuzz target (robustness.text_fuzz) under
hypothesis."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robustness.text_cases import (
    TEST_BIG_LINE_BYTES,
    TEXT_KNOWN_BUGS,
    TEXTS,
    TextCase,
    all_text_cases,
    text_case_problems,
)
from robustness.text_fuzz import SEEDS, TEXT_BYTES, decode, text_target


def _param(case: TextCase):
    bug = case.known_bug()
    marks = [pytest.mark.xfail(reason=bug, strict=True)] if bug else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_param(case) for case in all_text_cases()])
def test_odd_text_gets_sane_output_or_one_line(
    case: TextCase, tiny_nslm_run: Path, tmp_path: Path
) -> None:
    assert text_case_problems(case, tiny_nslm_run, tmp_path, TEST_BIG_LINE_BYTES) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=512), TEXT_BYTES))
def test_plain_tokens_plain_never_crashes(data: bytes) -> None:
    text_target(data)  # raises on a crash or a broken promise of the boundary


def test_the_fuzz_target_sees_what_the_cases_send() -> None:
    texts = [t for name, t in TEXTS.items() if name != "many_tags"]  # below, its own test
    for seed in [*SEEDS, *texts]:
        for mode in (0, 1, 2):
            encoded = seed.encode("utf-16-le" if mode == 2 else "utf-8", errors="surrogatepass")
            text_target(bytes([mode]) + encoded)
    assert decode(b"\x01in \xff") == "in \udcff"
    assert decode(b"\x02" + "a\udc80".encode("utf-16-le", errors="surrogatepass")) == "a\udc80"


_SPANS_BUG = TEXT_KNOWN_BUGS.get(("eval --text", "many_tags"))  # gone once it is fixed


@pytest.mark.xfail(_SPANS_BUG is not None, reason=str(_SPANS_BUG), strict=True)
def test_a_line_of_many_tags_is_tokenized() -> None:
    text_target(b"\x00" + TEXTS["many_tags"].encode())
