"""Turn raw WikiText lines into tagged tokens: numbers re-joined, places chunked, classes set.

This is the rule-applying step of ``nslm data prepare``; it knows nothing of vocabularies,
ids or caches (see :mod:`nslm.data.prepare`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nslm.data.custom import ClassRule, token_value
from nslm.data.numbers import NUMBER_CLASSES, Conversion, is_number, rejoin_numbers, tag_number
from nslm.data.places import PLACE_CLASSES, Gazetteer, Place, chunk_token, load_gazetteer
from nslm.data.text import DOCUMENT_BREAK
from nslm.data.vocab import EOS
from nslm.errors import NslmError

CLASS_FAMILIES = {"numbers": NUMBER_CLASSES, "places": PLACE_CLASSES}
CLASS_CHOICES = ("numbers", "places", "all", "none")
NAN = float("nan")


def class_names_for(classes: str, rules: tuple[ClassRule, ...] = ()) -> tuple[str, ...]:
    """``("word", <class>, …)`` for ``--classes numbers|places|all|none`` and user rules.

    Id 0 is a plain word; user-defined classes come after the built-in ones.
    """
    if classes not in CLASS_CHOICES:
        raise NslmError(f"unknown --classes {classes!r}; choose one of {', '.join(CLASS_CHOICES)}")
    builtin = {
        "all": (*NUMBER_CLASSES, *PLACE_CLASSES),
        "none": (),
        **CLASS_FAMILIES,
    }[classes]
    names = [rule.name for rule in rules]
    if len(set(names)) != len(names):
        raise NslmError(f"a user class is defined twice: {', '.join(names)}")
    return ("word", *builtin, *names)


def is_article_heading(line: str) -> bool:
    """A top-level heading `` = Title = `` starts an article; `` = = Section = = `` does not."""
    s = line.strip()
    return s.startswith("= ") and s.endswith(" =") and not s.startswith("= =") and len(s) > 4


@dataclass
class TaggedText:
    """Parallel per-token lists for one split."""

    tokens: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)  # "word" or a class name
    values: list[float] = field(default_factory=list)  # number value, else NaN
    lats: list[float] = field(default_factory=list)
    lons: list[float] = field(default_factory=list)
    conversions: list[Conversion | None] = field(default_factory=list)
    articles: list[int] = field(default_factory=list)
    # ambiguous place name → how many tokens took it
    ambiguous_hits: Counter = field(default_factory=Counter)


def alternate_names_of(meta: Mapping[str, Any]) -> bool:
    """Whether a prepared corpus (or a run, from its corpus's metadata) tagged cities under
    their alternate names: a text scored with a run is tagged as its corpus was."""
    return bool(meta.get("alternate_place_names", False))


def tag_lines(
    lines: list[str],
    classes: str,
    rules: tuple[ClassRule, ...] = (),
    *,
    alternate_names: bool = True,
) -> TaggedText:
    """Apply docs/data.md's rules, then the user's class rules, to every line (each ends in
    <eos>). A new article starts at a top-level heading and after a :data:`DOCUMENT_BREAK`
    line (which adds no token). ``alternate_names``: cities under their alternate names too
    (:mod:`nslm.data.places`)."""
    names = class_names_for(classes, rules)
    want_numbers = "year" in names
    gazetteer = load_gazetteer(alternate_names) if "city" in names else None
    out = TaggedText()
    article, seen_text = 0, False
    for line in lines:
        if line == DOCUMENT_BREAK:
            article, seen_text = article + seen_text, False
            continue
        if is_article_heading(line) and seen_text:
            # the empty lines before a corpus's first heading belong to its first article
            article += 1
        seen_text = seen_text or bool(line.strip())
        tokens, places = _chunk_places(rejoin_numbers(line).split(), gazetteer, out)
        for j, token in enumerate(tokens):
            place = places.get(j)
            if place is not None:
                _append(out, token, place.cls, article, lat=place.lat, lon=place.lon)
            elif want_numbers and token[0].isdigit() and is_number(token):
                tag = tag_number(tokens, j)
                _append(out, token, tag.cls, article, tag.value, conversion=tag.conversion)
            else:
                rule = next((r for r in rules if r.matches(token)), None)
                if rule is None:
                    _append(out, token, "word", article)
                else:
                    _append(out, token, rule.name, article, token_value(token))
        _append(out, EOS, "word", article)
    return out


def _append(
    out: TaggedText,
    token: str,
    cls: str,
    article: int,
    value: float = NAN,
    lat: float = NAN,
    lon: float = NAN,
    conversion: Conversion | None = None,
) -> None:
    out.tokens.append(token)
    out.classes.append(cls)
    out.values.append(value)
    out.lats.append(lat)
    out.lons.append(lon)
    out.conversions.append(conversion)
    out.articles.append(article)


def _chunk_places(
    tokens: list[str], gazetteer: Gazetteer | None, out: TaggedText
) -> tuple[list[str], dict[int, Place]]:
    """Replace each longest gazetteer match by one token; return where the places are.

    Chunking comes before the number rules, so that they see the line as the model will.
    """
    if gazetteer is None:
        return tokens, {}
    chunked: list[str] = []
    places: dict[int, Place] = {}
    i = 0
    while i < len(tokens):
        hit = gazetteer.match_at(tokens, i)
        if hit is None:
            chunked.append(tokens[i])
            i += 1
            continue
        place, length = hit
        places[len(chunked)] = place
        chunked.append(chunk_token(place.name))
        if place.name in gazetteer.ambiguous:
            out.ambiguous_hits[place.name] += 1
        i += length
    return chunked, places
