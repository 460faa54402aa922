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

from nslm.data.numbers import Conversion
from nslm.data.units import Unit, convert_value

MAX_TARGET_UNITS = 3


def learn_unit_map(conversions: list[Conversion | None]) -> dict[Unit, Counter]:
    """Source unit → how often the training split converts it to each target unit."""
    unit_map: dict[Unit, Counter] = defaultdict(Counter)
    for c in conversions:
        if c is not None:
            unit_map[c.source_unit][c.target_unit] += 1
    return dict(unit_map)


def _targets_for(unit: Unit, unit_map: dict[Unit, Counter]) -> list[Unit]:
    seen = unit_map.get(unit)
    if not seen:
        # a unit never converted in training: the units its dimension is converted to
        seen = Counter()
        for source, targets in unit_map.items():
            if source.dimension == unit.dimension:
                seen.update({t: n for t, n in targets.items() if t != unit})
    return [t for t, _ in seen.most_common(MAX_TARGET_UNITS)]


def plausible_conversions(
    conversions: list[Conversion | None], unit_map: dict[Unit, Counter]
) -> np.ndarray:
    """(N, MAX_TARGET_UNITS): the quantity in each plausible target unit; NaN-padded."""
    out = np.full((len(conversions), MAX_TARGET_UNITS), np.nan)
    for i, c in enumerate(conversions):
        if c is None:
            continue
        for k, target in enumerate(_targets_for(c.source_unit, unit_map)):
            out[i, k] = convert_value(c.quantity, c.source_unit, target)
    return out


def unit_map_json(unit_map: dict[Unit, Counter]) -> dict[str, dict[str, int]]:
    return {
        s.name: {t.name: n for t, n in targets.most_common()}
        for s, targets in sorted(unit_map.items(), key=lambda kv: -sum(kv[1].values()))
    }
