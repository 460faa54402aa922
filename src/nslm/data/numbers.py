"""Numbers in WikiText: re-join what its tokenizer split, and tag the seven number classes.

The rules (docs/data.md, "Numbers") apply in order; the first that matches wins:
``convert``, ``range``, ``decimal``, ``year``, ``day``, ``round``, ``other``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nslm.data.units import Unit, unit_at, unit_ending_at

if TYPE_CHECKING:
    from nslm.data.split import Split

# The order of the paper's Table 2 rows; class ids follow it.
NUMBER_CLASSES: tuple[str, ...] = ("year", "day", "round", "decimal", "range", "convert", "other")

# WikiText writes 1,000 as "1 @,@ 000" and 3.5 as "3 @.@ 5"; " @-@ " is left alone because
# it also joins words ("well @-@ known").
_SPLIT_NUMBER = re.compile(r"(?<=\d) @([,.])@ (?=\d)")
NUMBER_PATTERN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_RANGE_WORDS = frozenset({"–", "-", "@-@", "to"})
MONTHS = frozenset(
    [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ]
)


def rejoin_numbers(line: str) -> str:
    """``"1 @,@ 000 and 3 @.@ 5"`` → ``"1,000 and 3.5"``."""
    return _SPLIT_NUMBER.sub(r"\1", line)


def is_number(token: str) -> bool:
    """Only digit strings are numbers: ``\\d+(,\\d{3})*(\\.\\d+)?``."""
    return NUMBER_PATTERN.fullmatch(token) is not None


def number_value(token: str) -> float:
    return float(token.replace(",", ""))


def is_year_shaped(token: str) -> bool:
    return token.isdigit() and len(token) == 4 and 1000 <= int(token) <= 2099


def is_day_shaped(token: str) -> bool:
    return token.isdigit() and 1 <= int(token) <= 31


def is_round_shaped(token: str) -> bool:
    """An integer ≥ 10 ending in 0 with at most two significant digits (10, 150, 2,500)."""
    if "." in token:
        return False
    digits = token.replace(",", "")
    return int(digits) >= 10 and digits.endswith("0") and len(digits.rstrip("0")) <= 2


@dataclass(frozen=True)
class Conversion:
    """``Q unit ( N unit2 )``: the quantity converted, its unit, and the unit N is written in.

    ``target_unit`` comes after the number, so a model predicting N must not read it; it is
    kept only to learn, on the training split, which units each unit gets converted to.
    """

    quantity: float
    source_unit: Unit
    target_unit: Unit


@dataclass(frozen=True)
class NumberTag:
    """The class of one number token; ``conversion`` is set for ``convert`` only."""

    cls: str
    value: float
    conversion: Conversion | None = None


def quantity_before(tokens: list[str], i: int) -> tuple[float, Unit] | None:
    """The ``Q unit`` whose parenthesis a number at ``tokens[i]`` would sit in.

    ``i`` may be ``len(tokens)``: the slot after a prompt such as ``… 5 miles (``. Only
    tokens before ``i`` are read (walking left to the opening parenthesis, within one
    parenthesised group), so a model predicting the number may use the result.
    """
    found = quantity_index_before(tokens, i)
    return None if found is None else (number_value(tokens[found[0]]), found[1])


def quantity_index_before(tokens: Sequence[str], i: int) -> tuple[int, Unit] | None:
    """:func:`quantity_before` as (the position of Q, its unit)."""
    j = i - 1
    while j >= 0 and tokens[j] not in ("(", ")") and i - j <= 12:
        j -= 1
    if j < 0 or tokens[j] != "(":
        return None
    before = unit_ending_at(tokens, j)
    if before is None:
        return None
    source_unit, span = before
    q = j - span - 1
    if q < 0 or not is_number(tokens[q]):
        return None
    return q, source_unit


def conversion_at(tokens: list[str], i: int) -> Conversion | None:
    """If ``tokens[i]`` is the number of ``Q unit ( N unit2 … )``, the conversion it is.

    Every number in the parentheses that is followed by a unit of the quantity's dimension
    counts, so both numbers of ``5 knots ( 9 km / h ; 6 mph )`` are conversions.
    """
    after = unit_at(tokens, i + 1)
    if after is None:
        return None
    target_unit = after[0]
    source = quantity_before(tokens, i)
    if source is None or source[1].dimension != target_unit.dimension:
        return None
    return Conversion(source[0], source[1], target_unit)


def tag_number(tokens: list[str], i: int) -> NumberTag:
    """Classify the number ``tokens[i]`` by the rules of docs/data.md, "Numbers", in order."""
    token = tokens[i]
    value = number_value(token)
    conversion = conversion_at(tokens, i)
    if conversion is not None:
        return NumberTag("convert", value, conversion)
    if i >= 2 and tokens[i - 1] in _RANGE_WORDS and is_number(tokens[i - 2]):
        return NumberTag("range", value)
    if "." in token:
        return NumberTag("decimal", value)
    if is_year_shaped(token):
        return NumberTag("year", value)
    if is_day_shaped(token) and (
        (i > 0 and tokens[i - 1] in MONTHS) or (i + 1 < len(tokens) and tokens[i + 1] in MONTHS)
    ):
        return NumberTag("day", value)
    if is_round_shaped(token):
        return NumberTag("round", value)
    return NumberTag("other", value)


def can_be(cls: str, token: str) -> bool:
    """Whether a number type may carry class ``cls`` in some context (defines V_c; see
    docs/data.md, "Vocabulary and class vocabularies").

    ``range`` and ``convert`` take any number; the others follow from the rules' shapes.
    """
    if not is_number(token):
        return False
    if cls in ("range", "convert"):
        return True
    if cls == "decimal":
        return "." in token
    if cls == "year":
        return is_year_shaped(token)
    if cls == "day":
        return is_day_shaped(token)
    if cls == "round":
        return is_round_shaped(token) and not is_year_shaped(token)
    if cls == "other":
        return "." not in token and not is_year_shaped(token) and not is_round_shaped(token)
    raise KeyError(cls)


def number_class_mask(split: Split, class_names: Sequence[str]) -> np.ndarray:
    """Whether each token's rule class is a number class: the numerals, by rule."""
    ids = [class_names.index(c) for c in NUMBER_CLASSES if c in class_names]
    return np.isin(split.rule_class_ids, ids)


def number_positions(split: Split, class_names: Sequence[str]) -> np.ndarray:
    """Positions of ``split`` whose rule class is a number class (Table 2's Numbers), less
    position 0, which has no history to be scored from."""
    at = np.flatnonzero(number_class_mask(split, class_names))
    return at[at > 0]
