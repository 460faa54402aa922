"""What a ``<convert>`` number may be, knowing only what comes before it.

In ``5 miles ( 8 km )`` the model predicts ``8`` after ``5 miles (``; the unit ``km`` comes
later, so it must not be used. Instead, the training split teaches which units each unit is
converted to (miles → km, feet → m, °F → °C, …), and every ``<convert>`` position gets the
preceding quantity converted to each of those units, most frequent first. The ``convert``
micro-model counts a candidate as correct if it matches any of them at its own precision.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from nslm.data.numbers import Conversion, quantity_before
from nslm.data.units import Unit, convert_value, unit_named

MAX_TARGET_UNITS = 3


def learn_unit_map(conversions: list[Conversion | None]) -> dict[Unit, Counter]:
    """Source unit → how often the training split converts it to each target unit."""
    unit_map: dict[Unit, Counter] = defaultdict(Counter)
    for c in conversions:
        if c is not None:
            unit_map[c.source_unit][c.target_unit] += 1
    return dict(unit_map)


def target_units(
    unit: Unit, unit_map: dict[Unit, Counter], limit: int = MAX_TARGET_UNITS
) -> list[Unit]:
    """The units the training text converts ``unit`` to, most often first (at most
    ``limit``); for a unit it never converts, those its dimension is converted to."""
    seen = unit_map.get(unit)
    if not seen:
        # a unit never converted in training: the units its dimension is converted to
        seen = Counter()
        for source, targets in unit_map.items():
            if source.dimension == unit.dimension:
                seen.update({t: n for t, n in targets.items() if t != unit})
    return [t for t, _ in seen.most_common(limit)]


def _in_units(quantity: float, unit: Unit, unit_map: dict[Unit, Counter], row: np.ndarray) -> None:
    for k, target in enumerate(target_units(unit, unit_map)):
        row[k] = convert_value(quantity, unit, target)


def plausible_conversions(
    conversions: list[Conversion | None], unit_map: dict[Unit, Counter]
) -> np.ndarray:
    """(N, MAX_TARGET_UNITS): the quantity in each plausible target unit; NaN-padded."""
    out = np.full((len(conversions), MAX_TARGET_UNITS), np.nan)
    for i, c in enumerate(conversions):
        if c is not None:
            _in_units(c.quantity, c.source_unit, unit_map, out[i])
    return out


def pending_conversion(tokens: list[str], unit_map: dict[Unit, Counter]) -> np.ndarray:
    """(MAX_TARGET_UNITS,): what a number right after ``tokens`` would be if it converted
    the quantity before an open parenthesis (``… 5 miles (`` → 8.05 km, …); NaN if none.

    Used where the text ends before the number (``predict``, generation), so the number's
    own unit cannot be seen, exactly as at a ``<convert>`` position of the corpus.
    """
    out = np.full(MAX_TARGET_UNITS, np.nan)
    source = quantity_before(tokens, len(tokens))
    if source is not None:
        _in_units(source[0], source[1], unit_map, out)
    return out


def unit_map_json(unit_map: dict[Unit, Counter]) -> list[list]:
    """The map as JSON, ``[[source, [[target, count], …]], …]`` in the order it was learnt.

    ``most_common`` breaks ties between target units by that order, so a map read back must
    keep it to convert as the corpus did (a run's ``predict`` and ``eval --text`` read the
    map from JSON); lists keep it where JSON objects may be re-sorted (``sort_keys``).
    """
    return [[s.name, [[t.name, n] for t, n in targets.items()]] for s, targets in unit_map.items()]


def unit_map_from_json(data: list | dict) -> dict[Unit, Counter]:
    """The inverse of :func:`unit_map_json`; also reads the older ``{source: {target: n}}``
    form (names the unit table no longer knows are skipped)."""
    pairs = data.items() if isinstance(data, dict) else data
    out: dict[Unit, Counter] = {}
    for source, targets in pairs:
        unit = unit_named(source)
        if unit is None:
            continue
        items = targets.items() if isinstance(targets, dict) else targets
        out[unit] = Counter({unit_named(t): n for t, n in items if unit_named(t) is not None})
    return out
