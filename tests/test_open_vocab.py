"""Open-vocabulary class members (micro/open_numbers.py, micro/open_vocab.py,
evaluation/open_vocab.py): the closed-form string counts against brute force, every q_c
and the whole NSLM-open summing to one, unseen values scored and serving as context."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.cli import main
from nslm.data.fixed_vocab import prepare_text_file
from nslm.data.numbers import NUMBER_CLASSES, can_be
from nslm.evaluation.numeral_values import numeral_types, predicted_values
from nslm.evaluation.open_vocab import (
    adjusted,
    oov_type_count,
    open_scores,
    open_total_mass,
    tune_escapes,
)
from nslm.generation.open_predict import open_predict_many
from nslm.generation.predict import predict
from nslm.micro.history import Context
from nslm.micro.model import MicroModel
from nslm.micro.open_numbers import NumberShapes, accepted, rounded_spellings, shape_of
from nslm.micro.open_vocab import OpenClass, fit_open

SLICE = 20_000


@pytest.fixture(scope="module")
def run(tiny_nslm_run: Path) -> Path:
    return tiny_nslm_run


def _strings(lead: int, groups: int, decimals: int) -> list[str]:
    """Every string of the shape, leading zeros included."""
    digits = lead + 3 * groups + decimals
    out = []
    for combo in itertools.product("0123456789", repeat=digits):
        s = "".join(combo)
        whole, frac = s[: lead + 3 * groups], s[lead + 3 * groups :]
        parts = [whole[:lead]] + [whole[lead + 3 * i : lead + 3 * i + 3] for i in range(groups)]
        out.append(",".join(parts) + ("." + frac if frac else ""))
    return out


SMALL_SHAPES = [(1, 0, 0), (2, 0, 0), (3, 0, 0), (4, 0, 0), (1, 1, 0), (2, 0, 1), (1, 0, 2)]


@pytest.mark.parametrize("shape", SMALL_SHAPES, ids=str)
@pytest.mark.parametrize("cls", NUMBER_CLASSES)
def test_accepted_counts_equal_brute_force(cls: str, shape: tuple[int, int, int]) -> None:
    strings = _strings(*shape)
    assert all(shape_of(s) == shape for s in strings)
    assert accepted(cls, *shape) == sum(can_be(cls, s) for s in strings)


@pytest.mark.parametrize("cls", ["other", "decimal", "round", "range"])
def test_shape_model_sums_to_one_and_skips_vc(cls: str) -> None:
    in_vocab = [s for s in _strings(2, 0, 0) + _strings(1, 0, 1) if can_be(cls, s)][:40]
    seen, unseen = {
        "decimal": ("12,480.5", "1,234,567.8"),
        "round": ("12,000", "1,200,000"),
    }.get(cls, ("12,480", "1,234,567"))
    assert can_be(cls, seen) and can_be(cls, unseen)
    model = NumberShapes(cls).fit([*in_vocab[:5], seen], in_vocab)
    assert model.total_mass(in_vocab) == pytest.approx(1.0, abs=1e-9)
    # a shape seen among the hapaxes is likelier, string for string, than one never seen
    assert model.log_prob([seen])[0] > model.log_prob([unseen])[0] > -np.inf
    # the parameters survive JSON
    again = NumberShapes.from_params(model.get_params())
    np.testing.assert_array_equal(again.log_prob(["12,345", "7"]), model.log_prob(["12,345", "7"]))


@settings(max_examples=40, deadline=None)
@given(
    cls=st.sampled_from(NUMBER_CLASSES),
    picks=st.lists(st.integers(0, 10**6), max_size=30),
    alpha=st.floats(0.01, 5.0),
)
def test_shape_model_is_proper_for_any_vocabulary(cls: str, picks: list[int], alpha: float) -> None:
    pool = [f"{p:,}" for p in picks] + [str(p) for p in picks] + [f"{p / 100:.2f}" for p in picks]
    in_vocab = sorted({s for s in pool if can_be(cls, s)})
    model = NumberShapes(cls, alpha).fit(in_vocab[::2], in_vocab)
    assert model.total_mass(in_vocab) == pytest.approx(1.0, abs=1e-9)
    assert np.isneginf(model.log_prob(["1" * 40])).all()  # outside the grid: not a member
    # a binary micro-model's matches move mass within their shapes, never out of them
    matched = {s for s in rounded_spellings(picks[0] / 7 if picks else 3.5) if can_be(cls, s)}
    matched -= set(in_vocab)
    assert model.matching_mass(matched, 0.87) == pytest.approx(1.0, abs=1e-9)


def test_open_year_scores_unseen_years_near_the_previous_one(micro) -> None:
    year = OpenClass.fit(micro["year"])
    assert 0 < year.escape < 0.01  # WikiText-2 train has no hapax year: Good-Turing's +1
    assert "2027" in year.enumerated.index and "1990" not in year.enumerated.index
    ctx = Context.from_values(prev_value=np.array([2027.0, np.nan]))
    np.testing.assert_allclose(year.new_mass(ctx), 1.0, atol=1e-9)
    scores = year.log_prob_new(["2028", "2028"], ctx)
    assert scores[0] > scores[1]  # 2027 as w_prev makes 2028 likelier than no context does
    far = year.log_prob_new(["1200"], Context.from_values(prev_value=np.array([2027.0])))
    assert scores[0] > far[0]
    best = year.top_new(Context.from_values(prev_value=np.array([2027.0])), 5)[0]
    assert all(abs(int(s) - 2027) <= 20 for s, _ in best)
    assert np.isneginf(year.log_prob_new(["3000"], ctx.rows(np.array([0]))))


def test_open_places_enumerate_the_gazetteer(micro) -> None:
    city = OpenClass.fit(micro["city"])
    assert city.enumerated is not None and len(city.enumerated.strings) > 100
    assert not set(city.enumerated.strings) & set(micro["city"].cls.candidates.strings)
    ctx = Context.from_values(prev_coords=np.array([[48.85, 2.35], [np.nan, np.nan]]))
    np.testing.assert_allclose(city.new_mass(ctx), 1.0, atol=1e-9)
    again = OpenClass.from_params(city.get_params(), micro["city"])
    assert again.escape == city.escape


def test_adjusted_spreads_unk_over_the_unknown_types() -> None:
    strings = ["a", "zz", "b", "zz", "yy"]
    oov = np.array([False, True, False, True, True])
    assert oov_type_count(strings, oov) == 2
    out = adjusted(np.zeros(5), oov, 2)
    np.testing.assert_allclose(out, [0, -np.log(2), 0, -np.log(2), -np.log(2)])


def test_nslm_open_sums_to_one_over_vocabulary_and_open_members(loaded, micro, test_slice):
    corpus = loaded.corpus
    opened = fit_open(micro)
    assert set(opened) == set(micro)  # year, convert, city: numbers and places
    rng = np.random.default_rng(1)
    positions = np.unique(rng.choice(np.arange(1, len(test_slice)), 60, replace=False))
    full = loaded.scorer().distribution_at(test_slice, positions, micro, corpus.class_names)
    contexts = {
        name: oc.cls.context(test_slice, positions, oc.micro.context) for name, oc in opened.items()
    }
    total = open_total_mass(full, opened, corpus.class_names, contexts)
    np.testing.assert_array_less(np.abs(total - 1.0), 1e-4)


def test_open_scores_score_every_unseen_class_token(loaded, micro, test_slice, data_dir) -> None:
    corpus = loaded.corpus
    text = prepare_text_file(corpus, data_dir / "wikitext-2" / "test.txt", "test", "tokenized")
    np.testing.assert_array_equal(text.split.token_ids[:SLICE], test_slice.token_ids)
    split, strings = test_slice, text.strings[:SLICE]
    opened = fit_open(micro)
    got = open_scores(loaded.scorer(), split, strings, micro, opened, corpus.class_names)
    closed_pure, open_pure = got.pure(open_vocab=False), got.pure()
    modelled = np.isin(split.rule_class_ids, [corpus.class_id(n) for n in opened])
    unseen = split.oov_class_mask & modelled
    assert unseen.sum() > 0 and (got.scored_open == unseen).all()  # all of them, no other
    assert np.isfinite(open_pure[unseen]).all()
    assert (open_pure[unseen] > closed_pure[unseen]).all()  # the class route adds to <unk>'s
    # words are untouched; in-vocabulary class tokens pay log(1 − β_c)
    words = ~modelled & (split.token_ids != split.unk_id)
    words[0] = False
    np.testing.assert_array_equal(open_pure[words], closed_pure[words])
    seen = modelled & ~split.oov_class_mask
    assert (open_pure[seen] < closed_pure[seen]).all()
    assert np.isnan(got.ensemble(0.3)[0])  # position 0 has no history


def test_open_predictions_add_new_members_and_keep_words(loaded, micro) -> None:
    opened = fit_open(micro)
    prompt = "Construction began in 2027 and ended in"
    got = open_predict_many(loaded, micro, opened, [prompt], k=30)[0]
    closed = predict(loaded, micro, prompt, k=30)
    assert "2027" in got["tokens"] and "2027" not in loaded.corpus.vocab.stoi
    probs = [e["p"] for e in got["top"]]
    assert probs == sorted(probs, reverse=True)
    # a plain word keeps the closed NSLM's probability (only class members are rescaled)
    words = {
        e["token"]: e["p"]
        for e in closed["nslm"]
        if [part["as"] for part in e["breakdown"]] == ["word"]
    }
    assert words
    for entry in got["top"]:
        if entry["token"] in words and not entry["new"]:
            assert entry["p"] == pytest.approx(words[entry["token"]], rel=1e-6)
    for entry in got["top"]:
        assert entry["new"] == (entry["token"] not in loaded.corpus.vocab.stoi)
    # each of the likeliest classes ranks its known and new members together, P(w | c)
    assert set(got["classes"]) == set(opened)
    p_class = [per["p_class"] for per in got["classes"].values()]
    assert p_class == sorted(p_class, reverse=True)
    for per in got["classes"].values():
        inside = [e["p"] for e in per["top"]]
        assert inside == sorted(inside, reverse=True) and sum(inside) <= 1 + 1e-9
        assert all(e["new"] == (e["token"] not in loaded.corpus.vocab.stoi) for e in per["top"])


def test_predicted_values_of_a_full_nnlm_ensemble_are_the_nnlm_s(loaded, micro, test_slice):
    names = loaded.corpus.class_names
    numeral_ids = [names.index(c) for c in NUMBER_CLASSES if c in names]
    positions = np.flatnonzero(np.isin(test_slice.rule_class_ids, numeral_ids))[1:40]
    models = {"all-NNLM": (micro, 1.0, None), "NSLM": (micro, 0.0, fit_open(micro))}
    got = predicted_values(
        loaded.scorer(), test_slice, positions, loaded.corpus.vocab.itos, names, models
    )
    np.testing.assert_array_equal(got["all-NNLM"], got["NNLM"])
    _, values = numeral_types(loaded.corpus.vocab.itos)
    assert np.isin(got["NSLM"], values).all() and len(got["NSLM"]) == len(positions)


def test_a_class_whose_open_set_is_all_known_keeps_its_micro_model(micro, monkeypatch) -> None:
    city = micro["city"]
    known = city.cls.candidates
    monkeypatch.setattr(
        "nslm.micro.open_vocab.open_members",
        lambda name: (known.strings, known.values, known.coords),
    )
    closed = OpenClass.fit(city)  # as every US state is in V_<state> on WikiText-2
    assert closed.escape == 0.0 and closed.log_keep == 0.0 and closed.enumerated is None
    ctx = Context.from_values(prev_coords=np.array([[48.85, 2.35]]))
    assert np.isneginf(closed.log_prob_new(["Atlantis"], ctx)).all()
    assert closed.new_mass(ctx)[0] == 0.0


def test_tuned_escapes_are_at_least_as_likely_as_good_turing(loaded, micro, test_slice, data_dir):
    corpus = loaded.corpus
    text = prepare_text_file(corpus, data_dir / "wikitext-2" / "test.txt", "test", "tokenized")
    opened = fit_open(micro)
    got = open_scores(
        loaded.scorer(), test_slice, text.strings[:SLICE], micro, opened, corpus.class_names
    )
    tuned = tune_escapes(got)
    assert set(tuned) <= set(got.escapes) and all(0 < b < 1 for b in tuned.values())
    for cid, beta in tuned.items():
        mine = got.rule == cid
        before = got.pure()[mine]
        after = got.with_escapes({cid: beta}).pure()[mine]
        assert np.nansum(after) >= np.nansum(before) - 1e-9


def test_predict_open_vocab_lists_nslm_open(run, capsys) -> None:
    assert (
        main(
            [
                "predict",
                str(run),
                "Construction began in 2027 and ended in",
                "-k",
                "4",
                "--open-vocab",
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert len(result["open"]["top"]) == 4 and "2027" in result["open"]["tokens"]
    assert main(["predict", str(run), "The trail is 5 miles (", "--open-vocab"]) == 0
    assert "NSLM-open" in capsys.readouterr().out


def test_an_unseen_conversion_is_scored_by_its_value(micro) -> None:
    convert = OpenClass.fit(micro["convert"])
    assert convert.matching and convert.shapes is not None
    # "5 miles ( 8.0467 km )": the quantity 5 in kilometres is a context target
    ctx = Context.from_values(convert_target=np.array([[8.04672, np.nan, np.nan]]))
    matched = convert.matches(ctx)[0]
    assert "8.0467" in matched and "8.0467" not in micro["convert"].cls.candidates.strings
    near, far = convert.log_q(["8.0467", "3.1416"], ctx.rows(np.array([0, 0])))
    assert near > far + 5  # the rounding of the conversion is far likelier than any other
    np.testing.assert_allclose(convert.new_mass(ctx), 1.0, atol=1e-9)
    none = Context.from_values(convert_target=np.full((1, 3), np.nan))
    assert convert.matches(none) == [set()]
    np.testing.assert_allclose(convert.new_mass(none), 1.0, atol=1e-9)


def test_rounded_spellings_cover_every_precision() -> None:
    spelled = rounded_spellings(8046.72)
    assert {"8046.72", "8,046.7", "8,047", "8050", "8,000", "10,000"} <= spelled
    assert rounded_spellings(float("nan")) == set()


def test_escape_stays_below_one_when_every_token_is_a_hapax(micro) -> None:
    convert = micro["convert"]
    ones = np.ones(len(convert.cls.candidates))
    hapax_only = replace(convert.cls, candidates=replace(convert.cls.candidates, counts=ones))
    opened = OpenClass.fit(MicroModel.from_json(convert.get_params(), hapax_only))
    assert 0 < opened.escape < 1 and np.isfinite(opened.log_keep)
