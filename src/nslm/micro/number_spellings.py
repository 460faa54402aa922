"""How a number is written: its value, the step it was rounded to, and its comma style.

The open micro-model of an unbounded number class (``<round>``, ``<decimal>``, ``<range>``,
``<convert>``, ``<other>``) reads a number as Spithourakis & Riedel (2018) do, a value
written at a precision, and scores a spelling w as the sum over the precisions that write it:

    P(w | c) = Σ_{e ∈ E(w)} P(e | c) · P_value([x − ½·10^e, x + ½·10^e)) · S(w) / Z_c

S(w) the style's probability, P(comma | c) or P(plain | c), for a value from 1,000 on (else
1); x the value; e the exponent of the rounding step: −d for a spelling with d decimals
(``12.50``: −2, the decimals say it), 0 … z for an integer with z trailing zeros (``207,000``
may be 207,000 to the unit or 207 thousands rounded: e = 0 … 3). The story: draw e, draw a
value, round it to a multiple of 10^e, write it, grouped by commas or not from 1,000 on. For
each e the intervals of the multiples of 10^e tile [0, CAP), so without a class rule the
total over every string is Σ_e P(e | c) = 1. A class's rule keeps some spellings only
(docs/data.md, "Numbers"); Z_c is the mass of those it keeps, in closed form: all (range,
convert), e < 0 (decimal), the enumerated round-shaped ones (round), or every integer but
those and the years (other). Only canonical spellings are in the support: no leading zeros,
commas every three digits, at most MAX_DECIMALS decimals, values below CAP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.data.numbers import NUMBER_PATTERN, is_round_shaped, is_year_shaped

MAX_DECIMALS = 8
CAP = 1e15  # values at or above it are outside the support
DIGITS = 15  # integer digits below CAP


EXPONENTS = np.arange(-MAX_DECIMALS, DIGITS)  # the rounding steps 10^e a number is written at


@dataclass(frozen=True)
class Spelling:
    value: float
    decimals: int
    comma: bool  # grouped by commas (only ever true for an integer part ≥ 1000)
    zeros: int = 0  # trailing zeros of an integer (0 for a decimal; "0" has them all)

    @property
    def exponents(self) -> range:
        """E(w): the rounding steps 10^e that write this spelling."""
        return range(-self.decimals, -self.decimals + 1) if self.decimals else range(self.zeros + 1)

    @property
    def styled(self) -> bool:
        """Whether the comma style is a choice (an integer part of four or more digits)."""
        return self.value >= 1000


def spell(value: float, decimals: int, comma: bool) -> str:
    """The canonical spelling of ``value`` at ``decimals`` places, grouped or not."""
    return f"{value:,.{decimals}f}" if comma else f"{value:.{decimals}f}"


def parse(token: str) -> Spelling | None:
    """The spelling of a canonical number string, or None (not a number, not canonical:
    leading zeros, a comma on a number below 1,000, too many decimals, beyond CAP)."""
    if NUMBER_PATTERN.fullmatch(token) is None:
        return None
    whole, _, frac = token.partition(".")
    comma = "," in whole
    decimals = len(frac)
    value = float(token.replace(",", ""))
    if decimals > MAX_DECIMALS or value >= CAP:
        return None
    digits = whole.replace(",", "")
    # "0" is what any rounding step writes for a value below half of it
    zeros = DIGITS - 1 if value == 0 and not decimals else len(digits) - len(digits.rstrip("0"))
    zeros = 0 if decimals else zeros
    sp = Spelling(value, decimals, comma, zeros)
    return sp if spell(value, decimals, comma) == token else None


def derivations(spellings: list[Spelling]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (spelling, e) pair, flattened: (owner index, e, lo, hi), owners ascending."""
    owner, exps = [], []
    for i, sp in enumerate(spellings):
        for e in sp.exponents:
            owner.append(i)
            exps.append(e)
    owner_a = np.array(owner, dtype=np.int64)
    e_a = np.array(exps, dtype=np.int64)
    x = np.array([spellings[i].value for i in owner], dtype=float)
    half = 0.5 * 10.0 ** e_a.astype(float)
    return owner_a, e_a, x - half, x + half


def round_strings() -> list[str]:
    """Every canonical round-shaped spelling below CAP (data/numbers.py is_round_shaped):
    X0…0 and XY0…0, grouped and not from 1,000 on."""
    out = []
    for n in range(2, DIGITS + 1):
        values = [x * 10 ** (n - 1) for x in range(1, 10)]
        if n >= 3:
            values += [xy * 10 ** (n - 2) for xy in range(11, 100) if xy % 10]
        for value in values:
            out.append(str(value))
            if value >= 1000:
                out.append(f"{value:,}")
    return sorted(set(out), key=lambda s: (float(s.replace(",", "")), s))


def year_strings() -> list[str]:
    """The spellings the year rule takes first: 1000 … 2099, no comma."""
    return [str(y) for y in range(1000, 2100)]


@dataclass
class Precision:
    """P(e | c), the rounding step, and P(comma | c), the style of numbers from 1,000 on."""

    log_exponent: np.ndarray  # over EXPONENTS
    log_comma: np.ndarray  # log P(plain), log P(comma)

    @classmethod
    def fit(cls, tokens: list[str], alpha: float = 0.5, log_mass=None) -> Precision:
        """Add-α counts of the class's training tokens. e is hidden for an integer with
        trailing zeros: its share goes to each e ∈ E(w) by EM (Dempster et al. 1977) when
        ``log_mass(spellings, e, lo, hi) -> (M,)`` (a value density's interval masses) is
        given, else evenly."""
        spellings = [s for s in map(parse, tokens) if s is not None]
        styles = np.full(2, alpha)
        for sp in spellings:
            if sp.styled:
                styles[int(sp.comma)] += 1
        log_comma = np.log(styles / styles.sum())
        owner, e, lo, hi = derivations(spellings)
        column = e + MAX_DECIMALS
        mass = np.zeros(len(e)) if log_mass is None else log_mass(lo, hi)
        log_p = np.full(len(EXPONENTS), -np.log(len(EXPONENTS)))
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if len(owner) else owner
        for _ in range(20 if log_mass is not None else 1):
            joint = log_p[column] + mass
            share = np.exp(
                joint
                - np.repeat(
                    np.logaddexp.reduceat(joint, starts), np.diff(np.r_[starts, len(joint)])
                )
            )
            counts = np.bincount(column, weights=share, minlength=len(EXPONENTS)) + alpha
            log_p = np.log(counts / counts.sum())
        return cls(log_p, log_comma)

    def log_style(self, spellings: list[Spelling]) -> np.ndarray:
        """log P(comma | c) where the style is a choice, 0 elsewhere, per spelling."""
        styled = np.array([sp.styled for sp in spellings], dtype=bool)
        comma = np.array([int(sp.comma) for sp in spellings], dtype=np.int64)
        return np.where(styled, self.log_comma[comma], 0.0)

    def log_decimal_share(self) -> float:
        """log P(e < 0 | c): the mass of the spellings with decimals."""
        return float(logsumexp_1d(self.log_exponent[EXPONENTS < 0]))

    def get_params(self) -> dict[str, Any]:
        return {"log_exponent": self.log_exponent.tolist(), "log_comma": self.log_comma.tolist()}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> Precision:
        return cls(np.asarray(params["log_exponent"]), np.asarray(params["log_comma"]))


def logsumexp_1d(x: np.ndarray) -> float:
    top = float(np.max(x))
    return top + float(np.log(np.sum(np.exp(x - top))))


def class_rule(cls: str) -> tuple[str, list[str]]:
    """How class ``cls`` restricts the spellings: ("all" | "decimals" | "only" | "except",
    the enumerated strings "only" keeps or "except" removes from the integers)."""
    if cls in ("range", "convert"):
        return "all", []
    if cls == "decimal":
        return "decimals", []
    rounds = [s for s in round_strings() if not is_year_shaped(s)]
    if cls == "round":
        return "only", rounds
    if cls == "other":
        return "except", sorted(set(rounds) | set(year_strings()))
    raise KeyError(f"<{cls}> is not an unbounded number class")


def accepts(cls: str, sp: Spelling, token: str) -> bool:
    """Whether class ``cls``'s rule keeps the canonical spelling ``sp`` of ``token``."""
    if cls in ("range", "convert"):
        return True
    if cls == "decimal":
        return sp.decimals > 0
    if sp.decimals:
        return False
    if cls == "round":
        return is_round_shaped(token) and not is_year_shaped(token)
    if cls == "other":
        return not is_round_shaped(token) and not is_year_shaped(token)
    raise KeyError(cls)
