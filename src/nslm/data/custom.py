"""User-defined classes: a name and a regular expression over tokens (paper Table 1, step 2).

A token that the built-in rules leave as a plain word and that the regex matches in full
gets the class. Its numeric value is kept when the token reads as a number, so ``diff`` and
``value`` micro-models work on numeric user classes too. V_c is every in-vocabulary type the
regex matches that no built-in class claims.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.errors import NslmError

_NAME = re.compile(r"[a-z][a-z0-9_]*")
RESERVED = {"word", *NUMBER_CLASSES, *PLACE_CLASSES}


@dataclass(frozen=True)
class ClassRule:
    name: str
    pattern: str

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise NslmError(
                f"class name {self.name!r} must be lower case letters, digits and _ "
                "(starting with a letter)"
            )
        if self.name in RESERVED:
            raise NslmError(f"class name {self.name!r} is built in; choose another")
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise NslmError(f"class {self.name}: bad regular expression ({exc})") from None

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def matches(self, token: str) -> bool:
        return self.regex.fullmatch(token) is not None

    def to_json(self) -> dict:
        return {"name": self.name, "pattern": self.pattern}


def parse_class_rule(text: str) -> ClassRule:
    """``"verb=(mix|bake|cool)(ed|ing)?"`` → ClassRule (the CLI's ``--class-rule``)."""
    name, sep, pattern = text.partition("=")
    if not sep or not pattern:
        raise NslmError(f"--class-rule takes NAME=REGEX, got {text!r}")
    return ClassRule(name.strip(), pattern)


def token_value(token: str) -> float:
    """The token's value if it reads as a number (commas allowed), else NaN."""
    try:
        return float(token.replace(",", ""))
    except ValueError:
        return float("nan")
