"""Number re-joining and the seven number-class rules, on synthetic lines (edge cases)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nslm.data.numbers import (
    can_be,
    is_number,
    is_round_shaped,
    number_value,
    rejoin_numbers,
    tag_number,
)
from nslm.data.units import convert_value


@pytest.mark.parametrize(
    ("raw", "joined"),
    [
        ("1 @,@ 000", "1,000"),
        ("3 @.@ 5", "3.5"),
        ("1 @,@ 000 @,@ 000", "1,000,000"),
        ("2 @,@ 500 @.@ 75 m", "2,500.75 m"),
        ("well @-@ known", "well @-@ known"),
        ("1990 @-@ 91 season", "1990 @-@ 91 season"),
        ("in 1066 , and", "in 1066 , and"),
    ],
)
def test_rejoin_numbers(raw: str, joined: str) -> None:
    assert rejoin_numbers(raw) == joined


@given(st.integers(min_value=0, max_value=10**12))
def test_rejoined_comma_numbers_keep_their_value(n: int) -> None:
    wikitext = f"{n:,}".replace(",", " @,@ ")
    token = rejoin_numbers(wikitext)
    assert is_number(token)
    assert number_value(token) == n


@pytest.mark.parametrize("token", ["1st", "1960s", "one", "5.5.0", "1,0000", "−3", "12a"])
def test_only_digit_strings_are_numbers(token: str) -> None:
    assert not is_number(token)


def _classes(line: str) -> list[tuple[str, str]]:
    tokens = rejoin_numbers(line).split()
    return [(t, tag_number(tokens, i).cls) for i, t in enumerate(tokens) if is_number(t)]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("about 5 miles ( 8 km ) upstream", [("5", "other"), ("8", "convert")]),
        ("90 ° F ( 32 ° C )", [("90", "round"), ("32", "convert")]),
        (
            "45 knots ( 85 km / h ; 50 mph )",
            [("45", "other"), ("85", "convert"), ("50", "convert")],
        ),
        ("from 1942 to 1997 .", [("1942", "year"), ("1997", "range")]),
        ("pages 12 – 15", [("12", "other"), ("15", "range")]),
        ("scores of 3 @.@ 5 and 2,000", [("3.5", "decimal"), ("2,000", "round")]),
        ("on March 1 , 1991 .", [("1", "day"), ("1991", "year")]),
        ("born 28 June 1895", [("28", "day"), ("1895", "year")]),
        ("1 @,@ 066 men and 2100 horses", [("1,066", "other"), ("2100", "round")]),
        (
            "12 , 150 , 2 @,@ 500 , 30 @,@ 000 , 151",
            [
                ("12", "other"),
                ("150", "round"),
                ("2,500", "round"),
                ("30,000", "round"),
                ("151", "other"),
            ],
        ),
        ("5 miles ( 8 kg )", [("5", "other"), ("8", "other")]),  # units of other dimensions
    ],
)
def test_number_class_rules(line: str, expected: list[tuple[str, str]]) -> None:
    assert _classes(line) == expected


def test_conversion_records_quantity_and_units() -> None:
    tokens = ["about", "5", "miles", "(", "8", "km", ")", "upstream"]
    tag = tag_number(tokens, 4)
    assert tag.cls == "convert" and tag.conversion is not None
    assert tag.conversion.quantity == 5
    assert (tag.conversion.source_unit.name, tag.conversion.target_unit.name) == ("mi", "km")
    assert convert_value(5, tag.conversion.source_unit, tag.conversion.target_unit) == (
        pytest.approx(5 * 1.609344)
    )
    fahrenheit = ["90", "°", "F", "(", "32", "°", "C", ")"]
    f = tag_number(fahrenheit, 4).conversion
    assert convert_value(f.quantity, f.source_unit, f.target_unit) == pytest.approx(
        (90 - 32) * 5 / 9
    )
    assert tag_number(tokens, 1).conversion is None


@given(st.integers(min_value=0, max_value=10**9))
def test_every_number_can_carry_the_class_the_rules_give_it(n: int) -> None:
    """V_c is defined by can_be(); a tagged token must always lie in its class's V_c."""
    token = f"{n:,}" if n % 7 else str(n)
    for context in (["in", token, "."], ["March", token], [token, "miles", "(", token, "km", ")"]):
        i = context.index(token) if context[0] != token else len(context) - 3
        tag = tag_number(context, i)
        assert can_be(tag.cls, token), (context, tag.cls)


def test_round_shape() -> None:
    assert [is_round_shaped(t) for t in ["10", "150", "2,500", "30,000", "9", "151", "1.0"]] == [
        True,
        True,
        True,
        True,
        False,
        False,
        False,
    ]
