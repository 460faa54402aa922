"""Numbers outside V_c: a spelling model over every string a number class's rule accepts.

A number class is an unbounded set of strings (``\\d+(,\\d{3})*(\\.\\d+)?``, with the class's
shape rule on top: docs/data.md, "Numbers"). Its members outside the training vocabulary
are given a proper distribution by their *shape* (leading digit group, number of
three-digit groups after commas, digits after the point), then uniformly within the shape:

    q_c(w) = P(shape(w) | c) / N_c(shape(w))

where N_c(s) counts the strings of shape s that class c's rule accepts and that are not in
V_c, counted in closed form below, so Σ_w q_c(w) = Σ_s P(s | c) = 1 exactly without
enumerating the strings. P(s | c) is fitted on the class's training hapaxes, add-α over the
shapes of a finite grid: by Good & Turing (1953) what has not been seen yet looks like what
was seen once. This is the "digit model" route for an open numeral vocabulary of
Spithourakis & Riedel (2018), at its simplest: digits uniform within a shape.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from nslm.data.numbers import NUMBER_PATTERN

# The grid of shapes: (leading group length, comma groups, decimals). WikiText-2's numbers
# stay well inside it (its longest: 3-digit lead and 4 groups, 7 decimals).
MAX_LEAD, MAX_GROUPS, MAX_DECIMALS = 12, 5, 8
YEARS = 1100  # "1000" … "2099": data/numbers.py is_year_shaped
ROUND_YEARS = 11  # of them round-shaped: 1000, 1100, …, 1900, 2000


def shape_of(token: str) -> tuple[int, int, int] | None:
    """(leading group length, comma groups, decimals) of a number string; None if the string
    is not a number or its shape is outside the grid."""
    if NUMBER_PATTERN.fullmatch(token) is None:
        return None
    whole, _, decimals = token.partition(".")
    groups = whole.split(",")
    shape = (len(groups[0]), len(groups) - 1, len(decimals))
    lead, k, d = shape
    if lead > MAX_LEAD or k > MAX_GROUPS or d > MAX_DECIMALS or (k and lead > 3):
        return None  # a comma-grouped number has a 1-3 digit lead (1,000; not 1000,000)
    return shape


def _round_shaped(n: int) -> int:
    """n-digit strings (leading zeros allowed) that are round-shaped: ≥ 10, ending in 0, at
    most two digits before the trailing zeros (data/numbers.py is_round_shaped): "X0…0"
    (9, from n = 2) and "XY0…0" with Y ≠ 0 (90, from n = 3)."""
    return 0 if n < 2 else 9 if n == 2 else 99


def accepted(cls: str, lead: int, groups: int, decimals: int) -> int:
    """How many strings of the shape the rule of number class ``cls`` accepts
    (data/numbers.py can_be), in closed form."""
    n = lead + 3 * groups
    total = 10 ** (n + decimals)
    year_shape = groups == 0 and lead == 4 and decimals == 0
    if cls in ("range", "convert"):
        return total
    if cls == "decimal":
        return total if decimals else 0
    if decimals:
        return 0
    if cls == "year":
        return YEARS if year_shape else 0
    if cls == "day":  # 1 … 31, as written with any leading zeros, no commas
        return 0 if groups else 9 if n == 1 else 31
    rounds = _round_shaped(n) - (ROUND_YEARS if year_shape else 0)
    if cls == "round":
        return rounds
    if cls == "other":  # neither round nor year: inclusion-exclusion over the two shapes
        return total - _round_shaped(n) - (YEARS - ROUND_YEARS if year_shape else 0)
    raise KeyError(cls)


def all_shapes() -> list[tuple[int, int, int]]:
    return [
        (lead, k, d)
        for lead in range(1, MAX_LEAD + 1)
        for k in range(MAX_GROUPS + 1)
        for d in range(MAX_DECIMALS + 1)
        if not (k and lead > 3)
    ]


class NumberShapes:
    """q_c over the members of a number class outside V_c (module docstring): fit, then
    ``log_prob(strings)``; parameters as JSON."""

    def __init__(self, cls: str, alpha: float = 0.5) -> None:
        self.cls = cls
        self.alpha = float(alpha)
        self.shapes: list[tuple[int, int, int]] = []
        self.log_shape = np.empty(0)  # log P(shape | c)
        self.free = np.empty(0)  # N_c(shape): the shape's strings outside V_c

    def fit(self, hapaxes: Iterable[str], in_vocab: Sequence[str]) -> NumberShapes:
        """P(shape | c) from the class's training hapaxes, add-α over the shapes that still
        have a string outside V_c (``in_vocab``) that the class's rule accepts."""
        seen = Counter(s for s in map(shape_of, hapaxes) if s is not None)
        taken = Counter(s for s in map(shape_of, in_vocab) if s is not None)
        shapes, free = [], []
        for shape in all_shapes():
            n_free = accepted(self.cls, *shape) - taken[shape]
            if n_free > 0:
                shapes.append(shape)
                free.append(float(n_free))
        weights = np.array([seen[s] + self.alpha for s in shapes])
        self.shapes = shapes
        self.log_shape = np.log(weights / weights.sum())
        self.free = np.array(free)
        return self

    @property
    def log_p(self) -> np.ndarray:
        """log q_c of one string of each shape: log P(shape | c) − log N_c(shape)."""
        return self.log_shape - np.log(self.free)

    def log_prob(self, strings: Sequence[str]) -> np.ndarray:
        """log q_c(w) of each string (−inf for a string outside the grid or V_c's shapes
        exhausted); the caller keeps V_c's own members away from it."""
        where = {shape: i for i, shape in enumerate(self.shapes)}
        out = np.full(len(strings), -np.inf)
        for i, token in enumerate(strings):
            j = where.get(shape_of(token))
            if j is not None:
                out[i] = self.log_p[j]
        return out

    def _shape_logs(self, j: int, n_match: int, p_match: float) -> tuple[float, float]:
        """(log q of a matching string, of any other) in shape j with ``n_match`` matches."""
        if n_match == 0 or n_match == self.free[j]:
            return float(self.log_p[j]), float(self.log_p[j])
        return (
            self.log_shape[j] + np.log(p_match) - np.log(n_match),
            self.log_shape[j] + np.log1p(-p_match) - np.log(self.free[j] - n_match),
        )

    def log_prob_matching(
        self, strings: Sequence[str], matches: Sequence[set[str]], p_match: float
    ) -> np.ndarray:
        """log q_c(w | ctx) when a binary micro-model marks, in each row, some strings outside
        V_c as matching the context (``matches[i]``, e.g. the conversions of the preceding
        quantity): within each shape, the matching strings share ``p_match`` and the others
        1 − p_match, as :class:`nslm.micro.pdfs.BinaryPdf` shares its bins within V_c; a
        shape without a match keeps uniform digits. Each shape's total stays P(shape | c)."""
        where = {shape: i for i, shape in enumerate(self.shapes)}
        out = np.full(len(strings), -np.inf)
        for i, (token, matched) in enumerate(zip(strings, matches, strict=True)):
            shape = shape_of(token)
            j = where.get(shape)
            if j is not None:
                n_match = sum(shape_of(m) == shape for m in matched)
                match, other = self._shape_logs(j, n_match, p_match)
                out[i] = match if token in matched else other
        return out

    def matching_mass(self, matched: set[str], p_match: float) -> float:
        """Σ_w q_c(w | ctx) of :meth:`log_prob_matching` for one row, shape by shape."""
        total = 0.0
        for j, shape in enumerate(self.shapes):
            n_match = sum(shape_of(m) == shape for m in matched)
            match, other = self._shape_logs(j, n_match, p_match)
            total += n_match * np.exp(match) + (self.free[j] - n_match) * np.exp(other)
        return float(total)

    def total_mass(self, in_vocab: Sequence[str]) -> float:
        """Σ_w q_c(w) over every accepted string outside ``in_vocab``, summed shape by shape
        in closed form: the proper-distribution check (1 up to rounding)."""
        taken = Counter(s for s in map(shape_of, in_vocab) if s is not None)
        free = np.array([accepted(self.cls, *s) - taken[s] for s in self.shapes], dtype=float)
        return float(np.sum(np.exp(self.log_p) * free))

    def get_params(self) -> dict[str, Any]:
        return {
            "class": self.cls,
            "alpha": self.alpha,
            "shapes": [list(s) for s in self.shapes],
            "log_shape": self.log_shape.tolist(),
            "free": self.free.tolist(),
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> NumberShapes:
        model = cls(params["class"], params["alpha"])
        model.shapes = [tuple(s) for s in params["shapes"]]
        model.log_shape = np.asarray(params["log_shape"], dtype=float)
        model.free = np.asarray(params["free"], dtype=float)
        return model


def rounded_spellings(target: float) -> set[str]:
    """Every way to write ``target`` rounded: to 1–MAX_DECIMALS decimals or to a power of ten
    up to 10¹², with and without comma groups (the candidates a conversion can be written
    as; the caller keeps those its metric accepts)."""
    if not np.isfinite(target) or target < 0:
        return set()
    out = set()
    for d in range(1, MAX_DECIMALS + 1):
        v = round(target, d)
        out |= {f"{v:.{d}f}", f"{v:,.{d}f}"}
    for j in range(13):
        v = round(target / 10**j) * 10**j
        out |= {str(v), f"{v:,}"}
    return out
