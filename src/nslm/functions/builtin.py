"""The functions nslm ships, each a value a text follows from what it already said.

Ordered by how many WikiText-2 training positions they apply to (docs/functions.md,
"Coverage"):

- ``convert``: ``Q unit (`` → Q in each unit the training text converts that unit to, at
  the input's significant figures and either side (``120 miles (`` → 193 km);
- ``season``: ``YYYY –`` → the next year, as two digits or four (``1995 – 96``);
- ``age``: after "at the age of" / "aged", the years between a birth year and the latest
  year of the document (a lifespan ``( 1820 – 1885 )`` or "born … 1820");
- ``years_later``: after "N years later / after" (N a number or a number word), the year N
  after the document's last year ("before" / "earlier": N before);
- ``percent``: after "a of (the) b … (", the share a / b as a percentage;
- ``later_year``: after "until", "till", or "in" / "by" after a verb in the past, with a
  year earlier in the sentence, a year 0 to 30 after it ("began in 2029 and ended in" →
  2030, 2031, …), however new the year: the open vocabulary's years over any backbone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar

from nslm.data.conversions import learn_unit_map, target_units, unit_map_from_json, unit_map_json
from nslm.data.numbers import (
    conversion_at,
    is_number,
    is_year_shaped,
    number_value,
    quantity_index_before,
)
from nslm.data.units import MAX_UNIT_TOKENS, Unit, convert_value, unit_ending_at, unit_named
from nslm.functions.base import Function, Option, Reference, register_function
from nslm.functions.writing import (
    at_significant,
    significant_figures,
    significant_options,
    template_decimals,
    written,
)

SENTENCE_ENDS = frozenset({".", "<eos>", "!", "?", '"'})
DASHES = frozenset({"–", "@-@"})
MINUS_SIGNS = frozenset({"−", "-"})
CONVERT_AFTER = frozenset({"(", ";", "or"})  # where a conversion's number starts
SMALLER_UNIT = {"ft": "in", "feet": "in", "foot": "in", "lb": "oz", "st": "lb"}
RANGE_WORDS = frozenset({"–", "to", "and", "by", "or", "@-@"})  # "( 11 – 13 lb )": the second end
NUMBER_WORDS = {
    w: n
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}
NUMBER_WORDS |= {"thirty": 30, "forty": 40, "fifty": 50, "hundred": 100}
# a conversion rounded further than this from its value is none (chosen on valid)
MAX_ROUNDING = 0.05
TARGET_UNITS = 6  # the units a quantity may be converted into, most often first
YEAR_WINDOW = 80  # tokens back in which a function looks for the year it counts from


@register_function
class Convert(Function):
    name = "convert"
    description = "a quantity converted into the units the training text converts its unit to"
    tolerance = 0.02

    def __init__(self) -> None:
        self.unit_map: dict[Unit, Counter] = {}

    def fit(self, documents: Sequence[Sequence[str]]) -> None:
        conversions = []
        for tokens in documents:
            listed = list(tokens)
            conversions += [conversion_at(listed, i) for i, t in enumerate(listed) if is_number(t)]
        self.unit_map = learn_unit_map(conversions)

    def params(self) -> dict[str, Any]:
        return {"unit_map": unit_map_json(self.unit_map)}

    def form(self, text: str, ref: Reference, following: Sequence[str] = ()) -> str:
        """Its decimals, and whether it lies within a factor of 2 of a result: a conversion's
        digits follow its value, and "3,462 t ( 79 %" is no conversion at all; a number
        followed by a unit of the quantity's dimension is one however far it lies
        ("2,340 feet ( 150 m": a wrong conversion, not another number)."""
        if not is_number(text):
            return "word"
        decimals = len(text.partition(".")[2])
        if _unit_follows(following, ref):
            return f"{decimals}.unit"
        value = number_value(text)
        results = [number_value(o.text) for o in ref.options]
        near = any(0.5 * r <= value <= 2 * r for r in results)
        return f"{decimals}.{'near' if near else 'far'}"

    def load(self, params: dict[str, Any]) -> None:
        self.unit_map = unit_map_from_json(params["unit_map"])

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        negative = i >= 2 and tokens[i - 1] in MINUS_SIGNS
        before = tokens[i - 1 - negative]
        second = before in RANGE_WORDS and i >= 3 and is_number(tokens[i - 2 - negative])
        if before not in CONVERT_AFTER and not second:
            return None
        found = quantity_index_before(tokens, i - negative)
        if found is None:
            return None
        q, source = found
        if q >= 1 and tokens[q - 1] == "@,@":  # "<unk> @,@ 000 m": the quantity is not known
            return None
        # "5 – 6 kg ( 11 – 13 lb )": the number right after "(" converts the range's start
        opening = before in ("(", ";")
        if opening and q >= 2 and tokens[q - 1] in RANGE_WORDS and _range_start(tokens, q):
            found = (q - 2, source)
        quantity, figures, first = _quantity(tokens, *found)
        said_number = tokens[found[0]] if first == found[0] else f"{abs(quantity):g}"
        options, exact, named = [], [], []
        targets = [u for u in target_units(source, self.unit_map, TARGET_UNITS + 1) if u != source]
        either = before == "or" and q >= 2 and tokens[q - 1] == "or" and _range_start(tokens, q)
        if before in ("or", ";") and not either:  # "( 0.93 km / h ; 0.58 mph )": the next unit
            # ("6 or 8 metres ( 19 ft 8 in or 26 ft 3 in )": the second end, in the same unit)
            written_units = _units_written_since_parenthesis(tokens, i)
            targets = [u for u in targets if u not in written_units]
        for rank, unit in enumerate(targets[:TARGET_UNITS]):
            value = convert_value(quantity, source, unit)
            if (value < 0) != negative:  # "( −" is followed by a negative result only
                continue
            exact.append(abs(value))
            named.append(f"{at_significant(abs(value), figures + 1) or value} {unit.name}")
            # the {{convert}} template's own rounding, then the input's figures ± offsets
            temperature = source.offset or unit.offset
            kelvin = abs(quantity * source.factor + source.offset) if temperature else None
            decimals = template_decimals(said_number, quantity, value, kelvin)
            key = f"u{rank}{_band(abs(value))}:"
            options.append(Option(f"{key}template", written(abs(value), decimals)))
            options += [
                Option(k, t)
                for k, t in significant_options(abs(value), figures, key)
                if abs(number_value(t) - abs(value)) <= MAX_ROUNDING * abs(value)
            ]
            if unit.name in SMALLER_UNIT and abs(value) >= 1:  # "( 5 ft 8.4 in )": whole feet
                options.append(Option(f"{key}whole", written(_whole(abs(value), unit))))
        if not options:
            return None
        said = " ".join(tokens[first : found[0] + 1])
        detail = f"{said} {source.name} = " + " = ".join(named)
        precision = f"sig{min(figures, 3)}"
        magnitude = math.floor(math.log10(abs(quantity))) if quantity else 0
        conditions = (
            precision,
            f"{precision}|{source.name}",
            f"{precision}|{source.name}|{magnitude}",
        )
        read = (first, found[0])
        return Reference(
            self.name,
            tuple(options),
            exact[0],
            read,
            conditions,
            detail=detail,
            exact=tuple(exact),  # every unit's result agrees: "550 metres ( 600 yd )"
            style=conditions[1],
        )


def _unit_follows(following: Sequence[str], ref: Reference) -> bool:
    """Whether ``following`` starts with a unit of the dimension ``ref`` converts (its
    style names the quantity's unit: ``sig2|mi``)."""
    source = unit_named(ref.style.rpartition("|")[2]) if ref.style else None
    if source is None:
        return False
    head = list(following[:MAX_UNIT_TOKENS])
    for length in range(len(head), 0, -1):
        found = unit_ending_at(head, length)
        if found is not None and found[1] == length:
            return found[0].dimension == source.dimension
    return False


def _band(value: float) -> str:
    """Where a result lies among the magnitudes a reader takes in at a glance (below 1, 1 to
    1,000, above): an editor picks the unit that writes 6 feet as 1.83 m rather than
    1,830 mm, so a key says its result's band and the writing PDF counts each band apart."""
    return "<1" if value < 1 else ">k" if value >= 1000 else ""


def _range_start(tokens: Sequence[str], q: int) -> bool:
    """Whether the number two before ``q`` starts a range that ends at ``q`` ("0 – 150 m",
    "from 203 to 102 mm", "100 by 80 metres"): its ends lie within a factor of 20 of each
    other ("rose in 1914 to 38.6 ° C" is no range), or it starts at 0, and the first is no
    name's number ("Hill 94 and 300 yards")."""
    if not is_number(tokens[q - 2]):
        return False
    if q >= 4 and tokens[q - 3].istitle() and tokens[q - 4] not in SENTENCE_ENDS:
        return False  # "Hill 94 and 300 yards": a name's number starts no range
    low, high = sorted((number_value(tokens[q - 2]), number_value(tokens[q])))
    return low == 0 or high <= 20 * low


def _whole(value: float, unit: Unit) -> int:
    """The whole larger units of ``value`` once rounded to the smaller unit, as the template
    writes feet and inches: 93.996 ft is 94 ft 0 in, not 93 ft 12 in."""
    smaller = unit_named(SMALLER_UNIT[unit.name])
    if smaller is None:
        return math.floor(value)
    per = convert_value(1.0, unit, smaller)
    return math.floor(round(value * per) / per)


def _units_written_since_parenthesis(tokens: Sequence[str], i: int) -> set[Unit]:
    """The units of the numbers written between the last "(" before ``i`` and ``i``."""
    start = i - 1
    while start > 0 and tokens[start] != "(" and i - start <= 12:
        start -= 1
    found = set()
    for end in range(start + 2, i):
        unit = unit_ending_at(tokens, end)
        if unit is not None and is_number(tokens[end - unit[1] - 1]):
            found.add(unit[0])
    return found


def _quantity(tokens: Sequence[str], q: int, unit: Unit) -> tuple[float, int, int]:
    """(the quantity in ``unit``, its significant figures, its first token's position) of
    the number at ``q``: ``425 feet 3 inches`` is 5,103 inches (4 figures), ``1 1 ⁄ 4
    inches`` is 1.25 inches (3 figures), a number after a minus sign is negative."""
    value, figures, first = number_value(tokens[q]), significant_figures(tokens[q]), q
    if q >= 3 and tokens[q - 1] == "⁄" and is_number(tokens[q - 2]) and is_number(tokens[q - 3]):
        whole, numerator = number_value(tokens[q - 3]), number_value(tokens[q - 2])
        if value > 0:
            value = whole + numerator / value
            figures, first = len(f"{value:g}".replace(".", "").lstrip("0")), q - 3
    elif q >= 2:
        larger = unit_ending_at(list(tokens[:q]), q)
        if larger is not None and larger[0].dimension == unit.dimension:
            at = q - larger[1] - 1
            if at >= 0 and is_number(tokens[at]):
                total = convert_value(number_value(tokens[at]), larger[0], unit) + value
                places = len(tokens[q].partition(".")[2])  # 5 feet 8.5 inches: 68.5 inches
                if abs(total - round(total, places)) < 1e-9:  # 4 feet 7 inches: 55 inches
                    total = round(total, places)
                    digits = f"{total:.{places}f}".replace(".", "").lstrip("0")
                    value, figures, first = total, len(digits), at
    if first >= 1 and tokens[first - 1] in MINUS_SIGNS:
        value, first = -value, first - 1
    return value, figures, first


@register_function
class Remainder(Function):
    name = "remainder"
    description = "what is left in inches (ounces) after a conversion's whole feet (pounds)"

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        """``8.93 metres ( 29 ft`` → the 4 inches left over after the 29 feet."""
        if i < 4 or tokens[i - 1] not in SMALLER_UNIT or not is_number(tokens[i - 2]):
            return None
        larger, smaller = unit_named(tokens[i - 1]), unit_named(SMALLER_UNIT[tokens[i - 1]])
        found = quantity_index_before(tokens, i - 2)
        if found is None or larger is None or smaller is None:
            return None
        if found[1].dimension != larger.dimension:
            return None
        quantity, _, first = _quantity(tokens, *found)
        whole = number_value(tokens[i - 2])
        left = convert_value(convert_value(quantity, found[1], larger) - whole, larger, smaller)
        if not -0.5 < left < convert_value(1, larger, smaller):
            return None
        left = max(left, 0.0)
        options = [Option(f"d{d}", written(left, d)) for d in (0, 1)]
        said = f"{tokens[first]} {found[1].name}"
        detail = f"{said} = {tokens[i - 2]} {larger.name} {left:.2f} {smaller.name}"
        read = (first, i - 2)
        return Reference(self.name, tuple(options), left, read, detail=detail, exact=(left,))


def _years_before(tokens: Sequence[str], i: int, window: int = YEAR_WINDOW) -> list[int]:
    """Positions of year-shaped tokens in the ``window`` tokens before ``i``, latest first."""
    start = max(0, i - window)
    return [j for j in range(i - 1, start - 1, -1) if is_year_shaped(tokens[j])]


@register_function
class Season(Function):
    name = "season"
    description = "the year after a year and a dash: a season such as 1995 – 96"

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        if i < 2 or tokens[i - 1] not in DASHES or not is_year_shaped(tokens[i - 2]):
            return None
        year = int(tokens[i - 2])
        following = year + 1
        options = (Option("short", f"{following % 100:02d}"), Option("full", str(following)))
        before = [t.lower() for t in tokens[max(0, i - 15) : i]]
        seasons = sum(t in ("season", "seasons") for t in tokens[:i])
        earlier = _earlier_pairs(tokens, i - 2)
        features = {
            "in_parentheses": float(i >= 3 and tokens[i - 3] == "("),
            "seasons_in_document": math.log1p(seasons),
            "war_nearby": float("war" in before),
            "earlier_seasons": math.log1p(earlier[0]),
            "earlier_spans": math.log1p(earlier[1]),
        }
        detail = f"the season after {year}: {year} – {following % 100:02d}"
        return Reference(self.name, options, following, (i - 2,), features=features, detail=detail)


def _earlier_pairs(tokens: Sequence[str], end: int) -> tuple[int, int]:
    """How many ``YYYY – X`` pairs before ``end`` wrote the next year (a season) and how many
    another number (a span): a document of seasons writes more of them."""
    seasons = spans = 0
    for j in range(max(0, end - 3000), end - 2):
        if tokens[j + 1] in DASHES and is_year_shaped(tokens[j]) and is_number(tokens[j + 2]):
            following = int(tokens[j]) + 1
            if tokens[j + 2] in (f"{following % 100:02d}", str(following)):
                seasons += 1
            else:
                spans += 1
    return seasons, spans


def _birth_year(tokens: Sequence[str], before: int) -> tuple[int, int] | None:
    """(year, position) of the document's first lifespan ``( Y1 – Y2 )`` or "born … Y"
    before ``before``; None if it has neither."""
    for j in range(0, before - 1):
        token = tokens[j]
        lifespan = token == "(" and j + 3 < before and is_year_shaped(tokens[j + 1])
        if lifespan and tokens[j + 2] in DASHES and is_year_shaped(tokens[j + 3]):
            return int(tokens[j + 1]), j + 1
        if token == "born":
            for k in range(j + 1, min(j + 9, before)):
                if is_year_shaped(tokens[k]):
                    return int(tokens[k]), k
    return None


@register_function
class Age(Function):
    name = "age"
    description = "an age: the years from a birth year to the document's latest year"

    TRIGGERS: ClassVar[tuple[tuple[str, ...], ...]] = (
        ("at", "the", "age", "of"),
        ("aged",),
        ("age", "of"),
    )

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        if not any(tuple(tokens[max(0, i - len(t)) : i]) == t for t in self.TRIGGERS):
            return None
        birth = _birth_year(tokens, i)
        if birth is None:
            return None
        latest = [j for j in _years_before(tokens, i) if j != birth[1]]
        if not latest:
            return None
        event = int(tokens[latest[0]])
        years = event - birth[0]
        if not 0 < years < 120:
            return None
        options = (Option("before_birthday", str(years - 1)), Option("after_birthday", str(years)))
        features = {"event_distance": min(i - latest[0], 80) / 80}
        detail = f"{event} − {birth[0]} = {years} (or {years - 1} before the birthday)"
        read = (birth[1], latest[0])
        return Reference(self.name, options, years, read, features=features, detail=detail)


@register_function
class YearsLater(Function):
    name = "years_later"
    description = "the year N years after (or before) the document's last year"

    DIRECTIONS: ClassVar[dict[str, int]] = {"later": 1, "after": 1, "before": -1, "earlier": -1}

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        if tokens[i - 1] not in ("in", "by", "until"):  # "N years later , in ___"
            return None
        for end in range(i - 1, max(2, i - 6), -1):  # "N years later , in" reaches back
            if tokens[end - 1] in self.DIRECTIONS and tokens[end - 2] == "years":
                break
        else:
            return None
        count = tokens[end - 3] if end >= 3 else ""
        n = NUMBER_WORDS.get(count.lower()) if not is_number(count) else number_value(count)
        if n is None or n != int(n) or not 0 < n <= 100:
            return None
        previous = _years_before(tokens, end - 3)
        if not previous:
            return None
        year = int(tokens[previous[0]])
        value = year + self.DIRECTIONS[tokens[end - 1]] * int(n)
        if not 1000 <= value <= 2099:
            return None
        detail = f"{year} {'+' if value > year else '−'} {int(n)} = {value}"
        features = {"gap": (i - end) / 6}
        read = (previous[0], end - 3)
        return Reference(
            self.name, (Option("year", str(value)),), value, read, features=features, detail=detail
        )


@register_function
class Percent(Function):
    name = "percent"
    description = "the share a / b of 'a of (the) b', as a percentage"

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        if i < 1 or tokens[i - 1] != "(":
            return None
        for j in range(i - 2, max(0, i - 30), -1):
            if tokens[j] not in ("of", "out"):
                continue
            k = j + 1 + (tokens[j] == "out") + (tokens[j + 1 : j + 2] == ["the"])
            if k >= i or not is_number(tokens[j - 1]) or not is_number(tokens[k]):
                continue
            part, whole = number_value(tokens[j - 1]), number_value(tokens[k])
            if not 0 < part < whole:
                continue
            share = 100 * part / whole
            options = [Option(f"d{d}", f"{share:.{d}f}") for d in (0, 1, 2)]
            detail = f"{tokens[j - 1]} / {tokens[k]} = {share:.2f} %"
            return Reference(self.name, tuple(options), share, (j - 1, k), detail=detail)
        return None


@register_function
class LaterYear(Function):
    name = "later_year"
    description = "a year up to 30 after the year the sentence names: 'began in 2029 … ended in'"

    checked = False  # a spread of likely years: nslm check does not judge a year by it
    WINDOW: ClassVar[int] = 40  # tokens back in which the year it counts from is looked for
    SPAN: ClassVar[int] = 30  # the years after it that it offers

    def reference(self, tokens: Sequence[str], i: int) -> Reference | None:
        if i < 2 or not self.triggered(tokens, i):
            return None
        previous = _years_before(tokens, i - 1, self.WINDOW)
        if not previous or "." in tokens[previous[0] + 1 : i - 1]:  # the same sentence
            return None
        j = previous[0]
        year = int(tokens[j])
        if year + self.SPAN > 2999:
            return None
        options = tuple(Option(f"+{d}", str(year + d)) for d in range(self.SPAN + 1))
        features = {
            "distance": (i - j) / self.WINDOW,
            "years_between": math.log1p(len(previous) - 1),
        }
        word = tokens[i - 2].lower()
        detail = f"a year after {year}: {year + 1}, {year + 2}, …"
        return Reference(
            self.name,
            options,
            year + 1,
            (j,),
            conditions=(f"trigger={tokens[i - 1].lower()}", f"verb={word}"),
            features=features,
            detail=detail,
        )

    def triggered(self, tokens: Sequence[str], i: int) -> bool:
        """ "until" / "till", or "in" / "by" after a verb in the past ("ended in",
        "demolished in", "died in", "completed by")."""
        trigger = tokens[i - 1].lower()
        if trigger in ("until", "till"):
            return True
        return trigger in ("in", "by") and tokens[i - 2].lower().endswith("ed")
