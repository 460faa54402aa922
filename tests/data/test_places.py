"""Place chunking, classes and coordinates: gazetteer rules and the real WikiText-2."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import classes_at
from nslm.data import PreparedCorpus
from nslm.data.places import _weighted_centroid, chunk_token, load_gazetteer, name_tokens
from nslm.data.tagging import alternate_names_of, tag_lines

PREPARED_NOW = {"alternate_place_names": True}
EUROPE = {"lat": (35.0, 61.0), "lon": (-11.0, 30.0)}


def coords_of(corpus: PreparedCorpus, name: str) -> tuple[float, float]:
    return tuple(corpus.type_coords()[corpus.vocab.stoi[name]])


@pytest.mark.parametrize("city", ["Paris", "Rome", "London"])
def test_european_capitals_are_cities_in_europe(wt2_places: PreparedCorpus, city: str) -> None:
    cid = wt2_places.vocab.stoi[city]
    assert cid in wt2_places.class_vocab("city")
    s = wt2_places.train
    assert set(s.class_ids[s.token_ids == cid]) == {wt2_places.class_id("city")}
    lat, lon = coords_of(wt2_places, city)
    assert EUROPE["lat"][0] < lat < EUROPE["lat"][1]
    assert EUROPE["lon"][0] < lon < EUROPE["lon"][1]


def test_country_centroid_of_france_lies_in_france(wt2_places: PreparedCorpus) -> None:
    assert wt2_places.vocab.stoi["France"] in wt2_places.class_vocab("country")
    lat, lon = coords_of(wt2_places, "France")
    # metropolitan France's bounding box
    assert 42.3 < lat < 51.1 and -4.8 < lon < 8.2


def test_state_centroid_of_texas_lies_in_texas(wt2_places: PreparedCorpus) -> None:
    lat, lon = coords_of(wt2_places, "Texas")
    assert 25.8 < lat < 36.5 and -106.7 < lon < -93.5


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("both located in New York City .", [("New_York_City", "city")]),
        ("of the Second United States Artillery", [("United_States", "country")]),
        ("were procured from Richard in Paris .", [("Paris", "city")]),
        ("one run to Savannah , Georgia .", [("Georgia", "state")]),
        ("offshore of <unk> Inlet , New Jersey ,", [("New_Jersey", "state")]),
        ("move to Washington , D.C. , to be", [("Washington,_D.C.", "city")]),
    ],
)
def test_places_on_real_sentences(wt2_places: PreparedCorpus, text: str, expected) -> None:
    tagged = tag_lines([f" {text} "], "places")
    got = [(t, c) for t, c in zip(tagged.tokens, tagged.classes, strict=True) if c != "word"]
    assert got == expected
    # and the prepared corpus holds the chunked token with that class
    prepared_text = " ".join(tagged.tokens[:-1])
    assert classes_at(wt2_places, "train", prepared_text) == expected


def test_longest_match_and_hyphenated_names() -> None:
    gazetteer = load_gazetteer()
    assert name_tokens("Port-au-Prince") == ("Port", "@-@", "au", "@-@", "Prince")
    tagged = tag_lines([" from Port @-@ au @-@ Prince to New Jersey and Jersey "], "places")
    places = [(t, c) for t, c in zip(tagged.tokens, tagged.classes, strict=True) if c != "word"]
    assert places == [("Port-au-Prince", "city"), ("New_Jersey", "state"), ("Jersey", "country")]
    assert gazetteer.ambiguous["Georgia"] == ("state", "country")


def test_ambiguity_report_counts_every_resolution(wt2_places: PreparedCorpus) -> None:
    report = wt2_places.meta["ambiguous_places"]
    assert report["Georgia"]["resolved_to"] == "state"
    assert report["Washington"]["candidates"] == ["state", "city"]
    s = wt2_places.train
    georgia = wt2_places.vocab.stoi["Georgia"]
    assert report["Georgia"]["tokens"]["train"] == int((s.token_ids == georgia).sum())


def test_place_counts_near_spec(wt2_places: PreparedCorpus) -> None:
    """Rough longest-match counts over the gazetteer's main names (docs/data.md): about 5.0k
    city (195 types), 7.1k country (166) and 3.8k state (50) tokens; the cities' alternate
    names add a few hundred tokens more."""
    s = wt2_places.train
    alternates = {chunk_token(p.name) for p in load_gazetteer().alternates.values()}
    is_alternate = np.array([t in alternates for t in wt2_places.vocab.itos])[s.token_ids]
    spec = {"city": (5_000, 195), "country": (7_100, 166), "state": (3_800, 50)}
    for name, (tokens, types) in spec.items():
        mask = s.rule_class_ids == wt2_places.class_id(name)
        main = mask & ~is_alternate
        assert abs(main.sum() - tokens) <= 0.10 * tokens, name
        assert abs(len(np.unique(s.token_ids[main])) - types) <= 0.10 * types, name
    assert 100 < (is_alternate & (s.rule_class_ids > 0)).sum() < 500


def test_places_have_coordinates_and_nothing_else_does(wt2_places: PreparedCorpus) -> None:
    for split in wt2_places.splits.values():
        is_place = split.rule_class_ids > 0
        assert not np.isnan(split.coords[is_place]).any()
        assert np.isnan(split.coords[~is_place]).all()
        assert np.abs(split.coords[is_place, 0]).max() <= 90


def test_weighted_centroid_handles_the_antimeridian() -> None:
    lat, lon = _weighted_centroid([0.0, 0.0], [179.0, -179.0], [1.0, 1.0])
    assert abs(lat) < 1e-9 and abs(abs(lon) - 180.0) < 1e-6


@pytest.mark.parametrize(
    ("name", "city"),
    [
        ("Cologne", "Köln"),
        ("Kiev", "Kyiv"),
        ("Bombay", "Mumbai"),
        ("Madras", "Chennai"),
        ("Peking", "Beijing"),
        ("Saigon", "Ho Chi Minh City"),
        ("Calcutta", "Kolkata"),
    ],
)
def test_a_city_under_its_former_or_foreign_name_is_that_city(name: str, city: str) -> None:
    gazetteer = load_gazetteer()
    tagged = tag_lines([f" Trade between {name} and Lisbon grew . "], "places")
    assert (name, "city") in zip(tagged.tokens, tagged.classes, strict=True)
    place, length = gazetteer.match_at(["to", name, "in"], 1)
    main = next(p for p in gazetteer.by_tokens.values() if p.name == city)
    assert (place.known_as, length, place.lat, place.lon) == (city, 1, main.lat, main.lon)


@pytest.mark.parametrize(
    "text",
    [
        " Hitler and Stalin shared the goal . ",  # a name of Donetsk once, a person here
        " played by Alyssa Milano in 1998 . ",  # Milan's Italian name, an English surname
        " a statue of Franklin stands there . ",  # a US town's name (and Columbus's alias)
        " the Gold Rush began . ",
    ],
)
def test_an_alternate_name_with_another_usual_reading_is_not_a_city(text: str) -> None:
    tagged = tag_lines([text], "places")
    assert set(tagged.classes) == {"word"}


def test_an_alternate_name_is_a_city_wherever_it_stands() -> None:
    # a place type belongs to one class, whatever its neighbours (as a main name does)
    for text in (" In Bombay , the rains came . ", " the Saigon River flows south . "):
        tagged = tag_lines([text], "places")
        assert [c for c in tagged.classes if c != "word"] == ["city"]


def test_wikitext2_holds_cities_under_their_former_names(wt2_places: PreparedCorpus) -> None:
    # "major ports at Bombay and Madras" (train), "Petrograd", "Leningrad", "Constantinople"
    city = wt2_places.class_vocab("city")
    for name in ("Bombay", "Madras", "Petrograd", "Leningrad", "Constantinople"):
        assert wt2_places.vocab.stoi[name] in city
    lat, lon = coords_of(wt2_places, "Bombay")
    assert 18.5 < lat < 19.5 and 72.5 < lon < 73.2


def test_a_corpus_prepared_before_the_alternate_names_tags_text_as_it_did() -> None:
    # a run keeps its corpus's metadata: one without the key was tagged by main names only,
    # and its vocabulary holds "Bombay" as a word, so a text scored with it must agree
    line = [" from Bombay to Mumbai . "]
    old = tag_lines(line, "places", alternate_names=alternate_names_of({}))
    new = tag_lines(line, "places", alternate_names=alternate_names_of(PREPARED_NOW))
    assert [c for c in old.classes if c != "word"] == ["city"]
    assert [c for c in new.classes if c != "word"] == ["city", "city"]


def test_a_corpus_prepared_now_records_its_naming(wt2_places: PreparedCorpus) -> None:
    assert alternate_names_of(wt2_places.meta)
