"""``nslm check`` and ``nslm.check``: numbers that disagree with what a function computes,
on the functions fitted on WikiText-2 (a fresh cache: the first use fits them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import assert_one_line_error, run_cli
from nslm.functions.check import consistent, corrupt

TEXT = (
    "The river is 120 miles (150 km) long.\n"
    "The trail runs 14.5 miles (23.3 km) along it.\n"
    "\fIn the 1995 – 96 season he scored 12 goals.\n"
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> dict[str, str]:
    return {"NSLM_CACHE_DIR": str(tmp_path_factory.mktemp("cache")), "NSLM_DATA_DIR": str(data_dir)}


def test_a_wrong_conversion_is_flagged_with_what_was_expected(cache: dict, tmp_path: Path) -> None:
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    result = run_cli("check", str(path), "--json", env=cache)
    assert result.returncode == 1, result.stderr  # something was flagged
    out = json.loads(result.stdout)
    assert out["checked"] == 3 and out["flagged"] == 1
    (flag,) = out["flags"]
    # 120 has two significant figures: Wikipedia writes 190 km (the learnt convention)
    assert (flag["written"], flag["expected"], flag["function"]) == ("150", "190", "convert")
    assert flag["ratio"] >= out["threshold"] and "120 mi = 193" in flag["detail"]
    assert (tmp_path / "text.txt").read_text(encoding="utf-8") == TEXT  # nothing written


def test_a_right_text_passes_and_stdin_is_read(cache: dict) -> None:
    import subprocess
    import sys

    right = TEXT.replace("(150 km)", "(193 km)")
    result = subprocess.run(
        [sys.executable, "-m", "nslm", "check", "-"],
        input=right,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **cache},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip()
        == "0 flagged of 3 numbers a function computes (threshold "
        + (result.stdout.strip().split("threshold ")[1])
    )


def test_the_python_api_gives_the_same_flags(cache: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    import nslm

    for key, value in cache.items():
        monkeypatch.setenv(key, value)
    result = nslm.check(TEXT)
    assert [(f.document, f.written, f.expected) for f in result.flags] == [(0, "150", "190")]
    assert "1 flagged of 3" in result.summary()
    loose = nslm.check(TEXT.replace("96", "98"), threshold=1e-6)
    assert {f.written for f in loose.flags} == {"150", "98"}  # the season, now wrong too


def test_a_conversion_far_off_is_flagged_when_its_unit_says_so(
    cache: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nslm

    for key, value in cache.items():
        monkeypatch.setenv(key, value)
    gross = nslm.check("The tower stands 2,340 feet (150 m) tall.\n")  # 713 m: a gross error
    assert [(f.written, f.expected) for f in gross.flags] == [("150", "710")]
    # a number far from the conversion with no unit of its dimension after it is no
    # conversion ("of which 3,462 t ( 79 % )"), and a name's number starts no range
    other = nslm.check(
        "Exports reached 3,462 t (79 %) that year.\n"
        "The line ran past Hill 94 and 300 yards (270 m) on.\n"
    )
    assert other.flags == [] and other.checked == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [(("/no/such/file.txt",), "not found"), (("/",), "directory")],
)
def test_bad_input_is_one_line(cache: dict, args: tuple[str, ...], needle: str) -> None:
    assert_one_line_error(run_cli("check", *args, env=cache), needle)


def test_corruptions_are_plausible_and_disagree() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    for gold, function in [
        ("193", "convert"),
        ("96", "season"),
        ("65", "age"),
        ("23.3", "convert"),
    ]:
        for _ in range(20):
            wrong = corrupt(gold, function, rng)
            assert not consistent(wrong, [float(gold)])
            assert len(wrong.partition(".")[2]) == len(gold.partition(".")[2])  # same precision
    assert consistent("190", [193.12], 0.02) and not consistent("150", [193.12], 0.02)
    assert consistent("23.3", [23.335]) and not consistent("30.2", [28.19], 0.02)
