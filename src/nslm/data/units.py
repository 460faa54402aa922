"""Units of measure for the ``<convert>`` class and the conversion function: which unit a
token run names, and how its values convert.

What a unit *is* (its dimension, its factor and offset to the base unit) comes from
`pint <https://pint.readthedocs.io>`_. What stays written here is which token runs name a
unit in running text, for two reasons pint cannot serve:

- pint reads many ordinary English words as units (``in`` is an inch, ``a`` a year, ``at``
  a technical atmosphere, ``g`` a gram, ``h`` Planck's constant), so a text's "in 1914"
  would hold a quantity; only the spellings below, those WikiText's ``{{convert}}`` output
  writes, count as units;
- pint has no name for several of those spellings: ``sq mi``, ``km ²``, ``US gal``,
  ``shp`` (shaft horsepower), ``long cwt``, ``° F`` as two tokens.

Each entry maps a pint expression to its spellings, the first being the unit's canonical
name (what a run's unit map stores). ``value_in_base = value * factor + offset``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import pint


@dataclass(frozen=True)
class Unit:
    name: str  # the canonical spelling (the first one listed below)
    dimension: str  # pint's dimensionality, e.g. "[length]"
    factor: float
    offset: float = 0.0
    pint_unit: str = ""  # the pint expression the factor and offset come from


# pint expression → the spellings WikiText writes (its {{convert}} template's output)
SPELLINGS: dict[str, tuple[str, ...]] = {
    # length
    "meter": ("m", "metre", "metres", "meter", "meters"),
    "kilometer": ("km", "kilometre", "kilometres", "kilometer", "kilometers"),
    "centimeter": ("cm", "centimetre", "centimetres", "centimeter", "centimeters"),
    "millimeter": ("mm", "millimetre", "millimetres", "millimeter", "millimeters"),
    "mile": ("mi", "mile", "miles"),
    "nautical_mile": ("nmi", "nautical mile", "nautical miles"),
    "foot": ("ft", "foot", "feet"),
    "inch": ("in", "inch", "inches"),
    "yard": ("yd", "yard", "yards"),
    # area
    "kilometer**2": (
        "km2",
        "km ²",
        "sq km",
        "square kilometre",
        "square kilometres",
        "square kilometer",
        "square kilometers",
    ),
    "meter**2": (
        "m2",
        "m ²",
        "sq m",
        "square metre",
        "square metres",
        "square meter",
        "square meters",
    ),
    "mile**2": ("sq mi", "square mile", "square miles"),
    "foot**2": ("sq ft", "square foot", "square feet"),
    "acre": ("acre", "acres"),
    "hectare": ("ha", "hectare", "hectares"),
    # mass
    "kilogram": ("kg", "kilogram", "kilograms"),
    "gram": ("g", "gram", "grams"),
    "pound": ("lb", "lbs", "pound", "pounds"),
    "ounce": ("oz", "ounce", "ounces"),
    "metric_ton": ("t", "tonne", "tonnes", "metric ton", "metric tons"),
    "long_ton": ("long ton", "long tons"),
    "short_ton": ("short ton", "short tons"),
    "long_hundredweight": ("long cwt",),
    # volume
    "meter**3": ("m3", "m ³", "cubic metre", "cubic metres", "cubic meter", "cubic meters"),
    "foot**3": ("cu ft", "cubic foot", "cubic feet"),
    "yard**3": ("cu yd", "cubic yard", "cubic yards"),
    "liter": ("L", "l", "litre", "litres", "liter", "liters"),
    "gigaliter": ("gigalitre", "gigalitres", "GL"),
    "gallon": ("US gal", "gallon", "gallons"),
    "imperial_gallon": ("imp gal", "imperial gallon", "imperial gallons"),
    # speed
    "mile/hour": ("mph", "miles per hour", "mile per hour"),
    "kilometer/hour": ("km / h", "km/h", "kilometres per hour", "kilometers per hour"),
    "knot": ("knots", "knot", "kn", "kt"),
    "meter/second": ("m / s", "m/s"),
    "foot/second": ("ft / s", "ft/s"),
    # temperature (offsets: pint converts them)
    "degree_Celsius": ("° C", "°C"),
    "degree_Fahrenheit": ("° F", "°F"),
    # power and pressure, which WikiText's ship and storm articles convert often
    "horsepower": (
        "hp",
        "horsepower",
        "shp",
        "shaft horsepower",
        "ihp",
        "indicated horsepower",
        "bhp",
        "brake horsepower",
    ),
    "kilowatt": ("kW", "kilowatt", "kilowatts"),
    "megawatt": ("MW", "megawatt", "megawatts"),
    "millibar": ("mbar", "mb", "millibar", "millibars", "hPa"),
    "inch_Hg": ("inHg", "inches of mercury"),
}
MAX_UNIT_TOKENS = max(len(s.split()) for spellings in SPELLINGS.values() for s in spellings)


@functools.cache
def registry() -> pint.UnitRegistry:
    return pint.UnitRegistry()


@functools.cache
def _table() -> dict[str, Unit]:
    """Every spelling → its :class:`Unit`, the factor and offset read from pint."""
    ureg = registry()
    table: dict[str, Unit] = {}
    for expression, spellings in SPELLINGS.items():
        zero = ureg.Quantity(0.0, expression).to_base_units()
        # a unit with an offset (°F) has its factor from its difference unit, which pint
        # keeps exact (5/9), where (one − zero) would lose digits to the offset
        size = f"delta_{expression}" if zero.magnitude else expression
        one = ureg.Quantity(1.0, size).to_base_units()
        factor = one.magnitude
        dimension = str(one.dimensionality)
        made = Unit(spellings[0], dimension, factor, zero.magnitude, expression)
        for spelling in spellings:
            table[spelling] = made
    return table


def unit_at(tokens: list[str], start: int) -> tuple[Unit, int] | None:
    """The longest unit spelled by ``tokens[start:]``, with the number of tokens it spans."""
    table = _table()
    for length in range(MAX_UNIT_TOKENS, 0, -1):
        if start + length > len(tokens):
            continue
        unit = table.get(" ".join(tokens[start : start + length]))
        if unit is not None:
            return unit, length
    return None


def unit_ending_at(tokens: list[str], end: int) -> tuple[Unit, int] | None:
    """The longest unit whose last token is ``tokens[end - 1]``, with its token count."""
    table = _table()
    for length in range(MAX_UNIT_TOKENS, 0, -1):
        if end - length < 0:
            continue
        unit = table.get(" ".join(tokens[end - length : end]))
        if unit is not None:
            return unit, length
    return None


def unit_named(name: str) -> Unit | None:
    """The unit a spelling names (canonical names included), or None."""
    return _table().get(name)


def convert_value(value: float, source: Unit, target: Unit) -> float:
    """``value`` in ``source`` units expressed in ``target`` units (same dimension)."""
    base = value * source.factor + source.offset
    return (base - target.offset) / target.factor
