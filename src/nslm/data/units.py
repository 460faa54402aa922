"""Units of measure for the ``<convert>`` class: which unit a token run names, and its factor.

Each unit maps to (dimension, factor, offset): ``value_in_base = value * factor + offset``.
The base units are SI (m, m², kg, m³, m/s, K-like Celsius, W, Pa). Spellings follow what
WikiText's ``{{convert}}`` output actually contains, e.g. ``km / h`` and ``° F`` as token runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    name: str  # the canonical spelling (the first one listed below)
    dimension: str
    factor: float
    offset: float = 0.0


_MILE = 1609.344
_FOOT = 0.3048
_INCH = 0.0254
_YARD = 0.9144
_POUND = 0.45359237

_TABLE: dict[str, Unit] = {}


def _add(dimension: str, factor: float, *spellings: str, offset: float = 0.0) -> None:
    unit = Unit(spellings[0], dimension, factor, offset)
    for spelling in spellings:
        _TABLE[spelling] = unit


# length (metre)
_add("length", 1.0, "m", "metre", "metres", "meter", "meters")
_add("length", 1000.0, "km", "kilometre", "kilometres", "kilometer", "kilometers")
_add("length", 0.01, "cm", "centimetre", "centimetres", "centimeter", "centimeters")
_add("length", 0.001, "mm", "millimetre", "millimetres", "millimeter", "millimeters")
_add("length", _MILE, "mi", "mile", "miles")
_add("length", 1852.0, "nmi", "nautical mile", "nautical miles")
_add("length", _FOOT, "ft", "foot", "feet")
_add("length", _INCH, "in", "inch", "inches")
_add("length", _YARD, "yd", "yard", "yards")
# area (square metre)
_add("area", 1e6, "km2", "km ²", "sq km", "square kilometre", "square kilometres")
_add("area", 1e6, "square kilometer", "square kilometers")
_add("area", 1.0, "m2", "m ²", "sq m", "square metre", "square metres", "square meter")
_add("area", 1.0, "square meters")
_add("area", _MILE**2, "sq mi", "square mile", "square miles")
_add("area", _FOOT**2, "sq ft", "square foot", "square feet")
_add("area", 4046.8564224, "acre", "acres")
_add("area", 1e4, "ha", "hectare", "hectares")
# mass (kilogram)
_add("mass", 1.0, "kg", "kilogram", "kilograms")
_add("mass", 0.001, "g", "gram", "grams")
_add("mass", _POUND, "lb", "lbs", "pound", "pounds")
_add("mass", _POUND / 16, "oz", "ounce", "ounces")
_add("mass", 1000.0, "t", "tonne", "tonnes", "metric ton", "metric tons")
_add("mass", 1016.0469088, "long ton", "long tons")
_add("mass", 907.18474, "short ton", "short tons")
_add("mass", 50.80234544, "long cwt")
# volume (cubic metre)
_add("volume", 1.0, "m3", "m ³", "cubic metre", "cubic metres", "cubic meter", "cubic meters")
_add("volume", _FOOT**3, "cu ft", "cubic foot", "cubic feet")
_add("volume", _YARD**3, "cu yd", "cubic yard", "cubic yards")
_add("volume", 0.001, "L", "l", "litre", "litres", "liter", "liters")
_add("volume", 1e6, "gigalitre", "gigalitres", "GL")
_add("volume", 0.003785411784, "US gal", "gallon", "gallons")
_add("volume", 0.00454609, "imp gal", "imperial gallon", "imperial gallons")
# speed (metre per second)
_add("speed", _MILE / 3600, "mph", "miles per hour", "mile per hour")
_add("speed", 1000 / 3600, "km / h", "km/h", "kilometres per hour", "kilometers per hour")
_add("speed", 1852 / 3600, "knots", "knot", "kn", "kt")
_add("speed", 1.0, "m / s", "m/s")
# temperature (degree Celsius); °F has an offset
_add("temperature", 1.0, "° C", "°C")
_add("temperature", 5 / 9, "° F", "°F", offset=-32 * 5 / 9)
# power (watt) and pressure (pascal), which WikiText's ship and storm articles convert often
_add("power", 745.69987158, "hp", "horsepower", "shp", "shaft horsepower", "ihp")
_add("power", 745.69987158, "indicated horsepower", "bhp", "brake horsepower")
_add("power", 1000.0, "kW", "kilowatt", "kilowatts")
_add("power", 1e6, "MW", "megawatt", "megawatts")
_add("pressure", 100.0, "mbar", "mb", "millibar", "millibars", "hPa")
_add("pressure", 3386.389, "inHg", "inches of mercury")

MAX_UNIT_TOKENS = max(len(s.split()) for s in _TABLE)


def unit_at(tokens: list[str], start: int) -> tuple[Unit, int] | None:
    """The longest unit spelled by ``tokens[start:]``, with the number of tokens it spans."""
    for length in range(MAX_UNIT_TOKENS, 0, -1):
        if start + length > len(tokens):
            continue
        unit = _TABLE.get(" ".join(tokens[start : start + length]))
        if unit is not None:
            return unit, length
    return None


def unit_ending_at(tokens: list[str], end: int) -> tuple[Unit, int] | None:
    """The longest unit whose last token is ``tokens[end - 1]``, with its token count."""
    for length in range(MAX_UNIT_TOKENS, 0, -1):
        if end - length < 0:
            continue
        unit = _TABLE.get(" ".join(tokens[end - length : end]))
        if unit is not None:
            return unit, length
    return None


def unit_named(name: str) -> Unit | None:
    """The unit a spelling names (canonical names included), or None."""
    return _TABLE.get(name)


def convert_value(value: float, source: Unit, target: Unit) -> float:
    """``value`` in ``source`` units expressed in ``target`` units (same dimension)."""
    base = value * source.factor + source.offset
    return (base - target.offset) / target.factor
