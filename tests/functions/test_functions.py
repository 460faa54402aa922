"""Functions that compute (``nslm.functions``): each built-in function on hand-written
cases, the writing PDF's normalisation by enumeration, the JSON round trip, a user plug-in,
and on WikiText-2 the conversion of the issue's example."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data.tagging import tag_lines
from nslm.data.text import corpus_lines
from nslm.errors import NslmError
from nslm.functions import (
    Function,
    FunctionModel,
    Option,
    Reference,
    get_function,
    register_function,
    significant_figures,
)
from nslm.functions.documents import corpus_file_documents, documents_of
from nslm.functions.writing import at_significant, significant_options

# A small training text in WikiText's tokens: conversions km ↔ mi, seasons, a lifespan.
TRAIN = [
    " = Road = ",
    " The road is 120 miles ( 193 km ) long and 14 @.@ 5 miles ( 23 @.@ 3 km ) wide . ",
    " It rises 50 km ( 31 mi ) and 1 @,@ 200 km ( 750 mi ) . ",
    " The 1995 – 96 season and the 2003 – 04 season ; the 1914 – 18 war . ",
    " = Person = ",
    " Smith ( 1820 – 1885 ) died in 1885 at the age of 65 . ",
]


def documents(lines: list[str]) -> list[list[str]]:
    return documents_of(tag_lines(lines, "none"))


def tokens_of(text: str) -> list[str]:
    """A prompt's corpus tokens (its line's <eos> left off: the text goes on)."""
    return documents(corpus_lines(text, "wikitext"))[0][:-1]


@pytest.fixture(scope="module")
def model() -> FunctionModel:
    return FunctionModel().fit(documents(TRAIN), documents(TRAIN[:3]))


@pytest.mark.parametrize(
    ("token", "figures"),
    [("120", 2), ("14.5", 3), ("0.91", 2), ("1,200", 2), ("50", 1), ("100.0", 4), ("7", 1)],
)
def test_significant_figures(token: str, figures: int) -> None:
    assert significant_figures(token) == figures


def test_results_are_written_at_each_precision() -> None:
    options = dict(significant_options(23.335488, 3))
    assert options["+0"] == "23.3" and options["-1"] == "23" and options["+1"] == "23.34"
    assert dict(significant_options(64.37, 1))["+0h"] == "65"  # to the nearest 5
    assert at_significant(1234567.0, 2) == "1,200,000"
    assert at_significant(-3.0, 2) is None and at_significant(math.nan, 2) is None


@pytest.mark.parametrize(
    ("said", "value", "target", "kelvin", "want"),
    [
        ("14.5", 14.5, 23.335488, None, "23.3"),  # 14.5 miles (23.3 km)
        ("1,200", 1200.0, 745.645430, None, "750"),  # 1,200 km (750 mi)
        ("15", 15.0, 9.320568, None, "9.3"),  # 15 kilometres (9.3 mi)
        ("50", 50.0, 110231.131, None, "110,000"),  # 50 tonnes (110,000 lb)
        ("120", 120.0, 193.121, None, "190"),  # 120 miles (190 km)
        ("0.5", 0.5, 0.926, None, "0.93"),  # two significant figures at least
        ("40", 40.0, 104.0, 313.15, "104"),  # 40 °C (104 °F): three figures in kelvin
    ],
)
def test_the_convert_templates_default_rounding(said, value, target, kelvin, want) -> None:
    from nslm.functions.writing import template_decimals, written

    assert written(target, template_decimals(said, value, target, kelvin)) == want


def test_convert_computes_the_conversion(model: FunctionModel) -> None:
    tokens = tokens_of("The trail runs 14.5 miles (")
    firings = model.firings(tokens, len(tokens))
    assert [f.reference.function for f in firings] == ["convert"]
    probs = firings[0].probs
    assert max(probs, key=probs.get) == "23.3"  # 14.5 mi = 23.335 km, as Wikipedia writes it
    assert "14.5 mi" in firings[0].reference.detail


def test_convert_reads_compound_quantities_ranges_and_signs(model: FunctionModel) -> None:
    feet = tokens_of("The wall is 4 feet 7 inches (")
    ref = model.functions["convert"].reference(feet, len(feet))
    assert ref is not None and ref.detail.startswith("4 feet 7 in =")  # read as 55 inches
    assert ref.value == pytest.approx(55 * 0.0254 / 1000, rel=1e-9)  # in km: this text's unit
    span = tokens_of("It runs 5 – 6 km (")
    first = model.functions["convert"].reference(span, len(span))
    assert first is not None and first.value == pytest.approx(3.107, rel=1e-3)  # 5 km in mi
    second = tokens_of("It runs 5 – 6 km ( 3.1 –")
    ref = model.functions["convert"].reference(second, len(second))
    assert ref is not None and ref.value == pytest.approx(3.728, rel=1e-3)  # 6 km
    assert model.functions["convert"].reference(tokens_of("In 1914 ("), 3) is None
    half = tokens_of("He cleared 5 feet 8.5 inches (")  # a half inch: 68.5 inches, 3 figures
    ref = model.functions["convert"].reference(half, len(half))
    assert ref is not None and ref.detail.startswith("5 feet 8.5 in =")
    assert ref.value == pytest.approx(68.5 * 0.0254 / 1000, rel=1e-9)


@pytest.mark.parametrize(
    ("text", "quantity"),
    [
        ("It runs 5 – 6 km (", 5),  # a range's start
        ("It runs 0 – 150 km (", 0.0),  # a range from 0
        ("The plate thins from 203 to 102 km (", 203),  # a range that falls
        ("The field is 100 by 80 km (", 100),  # a size: its first side
        ("It rose in 1914 to 38 km (", 38),  # a year and a quantity: no range
        ("It passed Hill 94 and 300 km (", 300),  # a name's number starts no range
        ("It runs 6 or 8 km ( 3.7 mi or", 8),  # "or" inside: the range's second end
    ],
)
def test_a_conversion_reads_a_range_only_where_it_is_one(
    model: FunctionModel, text: str, quantity: float
) -> None:
    tokens = tokens_of(text)
    ref = model.functions["convert"].reference(tokens, len(tokens))
    assert ref is not None and ref.detail.startswith(f"{quantity:g} km =")
    if text.endswith("or"):  # the same unit as the first end's, not the next one
        assert "mi" in ref.detail.split(" = ")[1]


def test_a_conversion_of_an_unread_quantity_fires_nothing(model: FunctionModel) -> None:
    tokens = tokens_of("It holds <unk> @,@ 000 km (")  # a thousands group cut by <unk>
    assert tokens[-4:-2] == ["@,@", "000"]
    assert model.functions["convert"].reference(tokens, len(tokens)) is None


@pytest.mark.parametrize("quantity", ["0.5", "14.5", "5,000"])
def test_a_conversions_key_says_its_results_band(model: FunctionModel, quantity: str) -> None:
    tokens = tokens_of(f"The road runs {quantity} km (")  # 0.31, 9.0, 3,100 mi
    ref = model.functions["convert"].reference(tokens, len(tokens))
    assert ref is not None and ref.options
    for option in ref.options:
        value, unit = float(option.text.replace(",", "")), option.key.split(":")[0]
        band = "<1" if value < 1 else ">k" if value >= 1000 else ""
        assert unit == f"u{unit[1:].rstrip('<1>k')}{band}", (option, value)


def test_a_conversion_offers_no_rounding_far_from_its_value(model: FunctionModel) -> None:
    tokens = tokens_of("Winds reached 230 km (")  # 142.9 mi: one figure fewer would be 100
    ref = model.functions["convert"].reference(tokens, len(tokens))
    assert ref is not None and "143" in ref.texts() and "100" not in ref.texts()
    for text in ref.texts():
        assert any(abs(float(text.replace(",", "")) - v) <= 0.05 * v for v in ref.exact)


def test_season_age_years_later_and_percent(model: FunctionModel) -> None:
    season = tokens_of("the 2031 –")
    ref = get_function("season")().reference(season, len(season))
    assert ref is not None and ref.texts() == {"32", "2032"}
    age = tokens_of("Jones ( 1931 – 2004 ) retired in 1990 at the age of")
    ref = get_function("age")().reference(age, len(age))
    assert ref is not None and ref.texts() == {"58", "59"}
    later = tokens_of("It opened in 1990 . Five years later , in")
    ref = get_function("years_later")().reference(later, len(later))
    assert ref is not None and ref.texts() == {"1995"}
    share = tokens_of("12 of the 40 members voted yes (")
    ref = get_function("percent")().reference(share, len(share))
    assert ref is not None and "30" in ref.texts()
    assert get_function("season")().reference(tokens_of("the 31 –"), 3) is None


def test_later_year_counts_on_from_the_sentences_year_however_new() -> None:
    later_year = get_function("later_year")()
    text = tokens_of("The tower was finished in 2029 and demolished in")
    ref = later_year.reference(text, len(text))
    assert ref is not None and ref.texts() == {str(y) for y in range(2029, 2060)}
    assert ref.conditions == ("trigger=in", "verb=demolished")
    until = tokens_of("The festival ran from 1962 until")
    assert later_year.reference(until, len(until)).value == 1963
    # not after a verb in the present, nor from a year of another sentence
    assert later_year.reference(tokens_of("It began in 1990 and is in"), 7) is None
    other = tokens_of("It began in 1990 . It ended in")
    assert later_year.reference(other, len(other)) is None
    assert not later_year.checked  # nslm check does not judge a year by a spread of years


def test_functions_read_only_the_tokens_before_the_position(model: FunctionModel) -> None:
    text = tokens_of("The road is 120 miles ( 193 km ) long")
    i = text.index("193")
    before = model.firings(text, i)
    changed = [*text[:i], "999", *text[i + 1 :]]
    after = model.firings(changed, i)
    assert [f.probs for f in before] == [f.probs for f in after]


@settings(max_examples=60, deadline=None)
@given(quantity=st.floats(0.01, 1e6), unit=st.sampled_from(["miles", "km", "feet", "kg", "acres"]))
def test_the_writing_pdf_sums_to_one_by_enumeration(quantity: float, unit: str) -> None:
    model = _FITTED
    text = f"{quantity:.3g}".replace("e+", "e")
    if "e" in text:
        return
    tokens = tokens_of(f"It is {text} {unit} (")
    for firing in model.firings(tokens, len(tokens)):
        enumerated = sum(firing.probs.values())
        assert enumerated == pytest.approx(1.0, abs=1e-12)
        assert all(p > 0 for p in firing.probs.values())
        assert 0.0 <= firing.confidence <= 1.0
    weight, mixed = model.mixture(model.firings(tokens, len(tokens)))
    if mixed:
        assert sum(mixed.values()) == pytest.approx(1.0, abs=1e-12) and 0 < weight <= 1


_FITTED = FunctionModel().fit(documents(TRAIN), documents(TRAIN[:3]))


def test_a_model_survives_json_and_refuses_a_broken_file(
    model: FunctionModel, tmp_path: Path
) -> None:
    data = json.loads(json.dumps(model.to_json()))
    again = FunctionModel.from_json(data)
    tokens = tokens_of("The river is 120 miles (")
    assert [f.probs for f in again.firings(tokens, len(tokens))] == [
        f.probs for f in model.firings(tokens, len(tokens))
    ]
    data["functions"]["convert"]["writing"] = []
    with pytest.raises(NslmError, match="malformed functions file"):
        FunctionModel.from_json(data, "x.json")
    with pytest.raises(NslmError, match="not a functions file"):
        FunctionModel.from_json({"version": 0})


def test_a_user_function_joins_as_a_plug_in(monkeypatch) -> None:
    from nslm.functions import base

    # the registry as it was once the test ends: a fitted model of every function written
    # later in this process (a run's functions.json) must not name one only this test knows
    monkeypatch.setattr(base, "_FUNCTIONS", dict(base._FUNCTIONS))

    @register_function
    class Doubled(Function):
        name = "doubled_test"
        description = "twice the number before 'doubled to'"

        def reference(self, tokens, i):
            if i >= 3 and list(tokens[i - 2 : i]) == ["doubled", "to"]:
                value = 2 * float(tokens[i - 3])
                return Reference(self.name, (Option("exact", f"{value:g}"),), value, (i - 3,))
            return None

    train = documents([" It had 4 doubled to 8 . Then 10 doubled to 20 . "])
    fitted = FunctionModel(["doubled_test"]).fit(train, train)
    tokens = tokens_of("Sales were 21 doubled to")
    (firing,) = fitted.firings(tokens, len(tokens))
    assert firing.probs == {"42": 1.0}
    with pytest.raises(NslmError, match="give it a name"):
        register_function(type("Nameless", (Function,), {}))
    # a fit kept in a cache is keyed by the functions' code: the plug-in's module counts
    from nslm.functions.model import code_fingerprint

    builtin = sorted(set(base.function_names()) - {"doubled_test"})
    assert code_fingerprint() != code_fingerprint(builtin)
    assert code_fingerprint(builtin) == code_fingerprint(list(reversed(builtin)))


@pytest.mark.realdata
def test_on_wikitext_2_conversions_are_mostly_computed_right(data_dir: Path) -> None:
    root = data_dir / "wikitext-2"
    train = corpus_file_documents(root / "train.txt.xz", "none")
    valid = corpus_file_documents(root / "valid.txt", "none")
    model = FunctionModel(["convert", "season"]).fit(train, valid)
    right = top = fired = 0
    for tokens in valid:
        for i in range(1, len(tokens)):
            for firing in model.firings(tokens, i):
                if firing.reference.function == "convert":
                    fired += 1
                    right += tokens[i] in firing.probs
                    top += max(firing.probs, key=firing.probs.get) == tokens[i]
    assert fired > 250 and right / fired > 0.8
    assert top / fired > 0.78  # 0.80; 0.77 when a key did not say its result's band
    tokens = tokens_of("The trail runs 14.5 miles (")
    (firing,) = model.firings(tokens, len(tokens))
    assert max(firing.probs, key=firing.probs.get) == "23.3" and firing.probs["23.3"] > 0.5
    assert firing.confidence > 0.8  # right after "(" a conversion is what WikiText writes
    # after ";" the next unit: the one already written inside the parentheses is not offered
    tokens = tokens_of("The speed rose by 0.5 knots ( 0.93 km / h ;")
    (firing,) = model.firings(tokens, len(tokens))
    assert "0.93" not in firing.probs and max(firing.probs, key=firing.probs.get) == "0.58"
    # an article keeps its way of writing a conversion: β_doc is chosen on valid, and on
    # test the strings written where the article wrote that style before get likelier
    assert model.document_prior["convert"] is not None
    assert model.document_selection["convert"]["valid_positions"] >= 100
    with_doc = without = 0.0
    for ref, earlier, text in model._document_cases(
        corpus_file_documents(root / "test.txt", "none")
    )["convert"]:
        with_doc += math.log(model.writing_probs(ref, earlier)[text])
        without += math.log(model.writing_probs(ref)[text])
    assert with_doc > without + 20  # nats, over the ~300 test positions


def test_a_document_keeps_its_way_of_writing_a_conversion(model: FunctionModel) -> None:
    text = "The road ran 12.5 miles ( 20.1 km ) north . The trail ran 14.5 miles ("
    tokens = tokens_of(text)
    (ref,) = [r for r in model.references(tokens, len(tokens)) if r.function == "convert"]
    earlier = model.earlier_keys(tokens, len(tokens), ref)
    assert earlier and set(earlier) <= {o.key for o in ref.options}  # the keys writing 20.1
    written_before = {o.text for o in ref.options if o.key in earlier}
    plain = model.writing_probs(ref)
    kept = model.writing_probs(ref, earlier, beta_doc=1.0)
    assert sum(kept.values()) == pytest.approx(1.0, abs=1e-12)
    assert sum(kept[t] for t in written_before) > sum(plain[t] for t in written_before) + 0.15
    before, after = model.key_probs(ref), model.key_probs(ref, earlier, beta_doc=1.0)
    seen = sum(earlier.values())
    for key, p in before.items():  # P_doc(k) = (d(k) + β_doc P_L(k)) / (d + β_doc)
        assert after[key] == pytest.approx((earlier.get(key, 0.0) + p) / (seen + 1.0), rel=1e-12)
    other = tokens_of("The road ran 12.5 miles ( 20.1 km ) north . The beam was 28.65 metres (")
    (far,) = [r for r in model.references(other, len(other)) if r.function == "convert"]
    assert not model.earlier_keys(other, len(other), far)  # another unit: another style
