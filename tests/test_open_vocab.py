"""Open micro-models (micro/open_set.py and its bases) and open-vocabulary scores
(evaluation/open_vocab.py): each P_open sums to one over its class's whole open set O_c,
a new member is scored by the same function as a known one, the fitted parameters survive
JSON, and the two conventions charge ``<unk>`` as they say."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data.corpus import PreparedCorpus
from nslm.data.fixed_vocab import prepare_text
from nslm.evaluation.open_vocab import OpenScores, open_scores
from nslm.micro.history import Context
from nslm.micro.number_spellings import class_rule
from nslm.micro.open_set import KnownWeight, OpenMicroModel, log_open
from nslm.micro.pipeline import fit_micro
from nslm.scores.spelling import fit_spelling
from nslm.scores.split_scores import SplitScores

CHEAP_PDFS = ["gaussian", "exponential", "unigram", "binary", "multinomial"]
ENUMERATED = ["year", "city"]


@pytest.fixture(scope="module")
def run(tiny_nslm_run):
    return tiny_nslm_run


@pytest.fixture(scope="module")
def models(loaded, micro) -> dict[str, OpenMicroModel]:
    """Open micro-models fitted on WikiText-2 train: the tiny run's year and city, and a
    value class (``round``: its O_c is finite, so it can be summed)."""
    train = loaded.corpus.train
    out = {name: OpenMicroModel.fit(micro[name], train) for name in ENUMERATED}
    selections, _ = fit_micro(loaded.corpus, names=["round"], pdfs=CHEAP_PDFS, eval_splits=())
    out["round"] = OpenMicroModel.fit(selections["round"].model, train)
    return out


def class_contexts(om: OpenMicroModel, corpus: PreparedCorpus, per_split: int) -> Context:
    """The contexts of ``per_split`` random class tokens of train and of test, stacked."""
    rng = np.random.default_rng(0)
    parts = []
    for split in (corpus.train, corpus.test):
        positions, _ = om.cls.positions(split)
        picked = np.sort(rng.choice(positions, min(per_split, len(positions)), replace=False))
        parts.append(om.cls.context(split, picked, om.micro.context))
    fields = [f.name for f in dataclasses.fields(Context)]
    return Context(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in fields})


# -- properness ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.floats(1e-6, 1.0), min_size=2, max_size=12),
    seen=st.lists(st.booleans(), min_size=12, max_size=12),
    a=st.floats(-5, 5),
    b=st.floats(-2, 2),
)
def test_known_weight_keeps_the_open_set_proper(weights, seen, a, b) -> None:
    v = np.array(weights) / sum(weights)  # the last weight stands for O_c outside V_c
    known = np.log(v[:-1])[None, :]
    log_freq = np.where(seen[: len(v) - 1], np.log(np.arange(1, len(v)) / len(v)), -np.inf)
    gamma = KnownWeight(a, b).gamma(log_freq)
    log_p, log_z = log_open(known, gamma)
    outside = v[-1] / np.exp(log_z[0])
    assert np.exp(log_p).sum() + outside == pytest.approx(1.0, abs=1e-12)
    unseen = ~np.isfinite(gamma)  # unseen members of V_c keep their base share, as new ones
    np.testing.assert_allclose(log_p[0, unseen], known[0, unseen] - log_z[0], rtol=1e-12)


@pytest.mark.parametrize("name", ENUMERATED)
def test_enumerated_open_set_sums_to_one(models, loaded, name: str) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 30)
    has = om.micro.metric.available(ctx)
    assert len(ctx) >= 50 and has.any() and (~has).any()  # the metric's part and the prior's
    known, log_z = om.log_prob_known(ctx)
    new_columns = np.setdiff1d(np.arange(len(om.base.strings)), om.base.vc_columns)
    assert len(new_columns) > 0
    log_new = om.base.log_v_all(ctx)[:, new_columns] - log_z[:, None]
    p_new = np.exp(log_new).sum(axis=1)
    np.testing.assert_allclose(np.exp(known).sum(axis=1) + p_new, 1.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.exp(om.log_new_mass(ctx)), p_new, rtol=0, atol=1e-9)


def test_round_open_set_sums_to_one(models, loaded) -> None:
    om = models["round"]
    ctx = class_contexts(om, loaded.corpus, 3)
    _, listed = class_rule("round")
    new = [s for s in listed if s not in om.known]
    known, log_z = om.log_prob_known(ctx)
    for i in range(len(ctx)):  # log_prob's reading of a new string, without its V_c part
        p_new = np.exp(om.base.log_v_strings(new, ctx.rows(np.full(len(new), i))) - log_z[i]).sum()
        assert np.exp(known[i]).sum() + p_new == pytest.approx(1.0, abs=1e-9)
        assert p_new == pytest.approx(np.exp(om.log_new_mass(ctx.rows(np.array([i]))))[0])


@pytest.mark.parametrize("name", [*ENUMERATED, "round"])
def test_log_prob_of_a_known_member_is_its_column(models, loaded, name: str) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 5)
    known, _ = om.log_prob_known(ctx)
    j = int(np.argmax(om.cls.candidates.counts))
    got = om.log_prob([om.cls.candidates.strings[j]] * len(ctx), ctx)
    np.testing.assert_array_equal(got, known[:, j])


@pytest.mark.parametrize("name", ENUMERATED)
def test_log_prob_of_a_new_member_is_its_share_of_the_enumeration(models, loaded, name) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 5)
    _, log_z = om.log_prob_known(ctx)
    column = int(np.setdiff1d(np.arange(len(om.base.strings)), om.base.vc_columns)[0])
    got = om.log_prob([om.base.strings[column]] * len(ctx), ctx)
    np.testing.assert_allclose(got, om.base.log_v_all(ctx)[:, column] - log_z, rtol=1e-12)
    assert np.isneginf(om.log_prob(["Atlantis 3000"], ctx.rows(np.array([0])))).all()


def test_new_values_take_what_the_known_ones_leave(models, loaded) -> None:
    om = models["round"]
    ctx = class_contexts(om, loaded.corpus, 3)
    known, _ = om.log_prob_known(ctx)
    left = 1.0 - np.exp(known).sum(axis=1)
    assert (left > 0).all()
    np.testing.assert_allclose(np.exp(om.log_new_mass(ctx)), left, rtol=1e-9)
    for i, listed in enumerate(om.top_new(ctx, 10)):
        assert len(listed) == 10
        strings, scores = zip(*listed, strict=True)
        assert not set(strings) & set(om.known)
        assert np.isfinite(scores).all() and (np.exp(scores) < left[i]).all()
        row = ctx.rows(np.full(len(strings), i))
        np.testing.assert_allclose(om.log_prob(list(strings), row), scores, rtol=1e-12)


# -- what the open set is for -----------------------------------------------------------


def year_context(om: OpenMicroModel, corpus: PreparedCorpus, year: int) -> Context:
    unk = corpus.vocab.stoi["<unk>"]
    prev_id = corpus.vocab.stoi.get(str(year), unk)
    ctx = Context.from_values(prev_value=np.array([float(year)]), prev_ids=np.array([prev_id]))
    assert om.micro.metric.available(ctx).all()
    return ctx


def likeliest(om: OpenMicroModel, ctx: Context) -> list[tuple[int, float]]:
    """Every member of O_c, known or new, by P_open: (year, probability), likeliest first."""
    known, log_z = om.log_prob_known(ctx)
    log_p = om.base.log_v_all(ctx)[0] - log_z[0]
    log_p[om.base.vc_columns] = known[0]
    order = np.argsort(-log_p, kind="stable")
    return [(int(om.base.strings[i]), float(np.exp(log_p[i]))) for i in order]


def test_after_an_unseen_year_the_next_is_a_new_one_just_after(models, loaded) -> None:
    om, corpus = models["year"], loaded.corpus
    years = sorted(int(s) for s in om.cls.candidates.strings)
    last = max(y for y in years if y < 2027)
    assert last < 2027 < min(y for y in years if y > last)  # 2027 is after V_c's run of years
    ranked = likeliest(om, year_context(om, corpus, 2027))
    assert 2027 <= ranked[0][0] <= 2037 and str(ranked[0][0]) not in om.known
    after = next(y for y, _ in ranked if y != 2027)  # w_prev repeated aside: what comes next
    assert 2027 < after <= 2037
    assert sum(p for y, p in ranked if 2027 < y <= 2037) > sum(p for y, p in ranked if y > 2037)


def test_after_a_known_year_the_next_is_a_known_one_near_it(models, loaded) -> None:
    om = models["year"]
    year, p = likeliest(om, year_context(om, loaded.corpus, 1990))[0]
    assert str(year) in om.known and abs(year - 1990) <= 3
    assert np.exp(om.log_new_mass(year_context(om, loaded.corpus, 1990)))[0] < p


# -- fitting and parameters ---------------------------------------------------------------


@pytest.mark.parametrize("name", [*ENUMERATED, "round"])
def test_deleted_estimation_gives_finite_parameters(models, name: str) -> None:
    om = models[name]
    assert om.how.startswith("deleted estimation") and "held-out log-likelihood" in om.how
    params = om.get_params()
    assert np.isfinite([om.weight.a, om.weight.b]).all()
    weights = ["epsilon"] if name in ENUMERATED else ["eta", "lambda"]
    assert all(0 < params["base"][w] < 1 for w in weights)
    assert np.isfinite(params["base"].get("power", 1.0))


@pytest.mark.parametrize("name", [*ENUMERATED, "round"])
def test_parameters_round_trip_through_json(models, loaded, name: str) -> None:
    om = models[name]
    again = OpenMicroModel.from_params(json.loads(json.dumps(om.get_params())), om.micro)
    ctx = class_contexts(om, loaded.corpus, 3)
    for got, want in zip(again.log_prob_known(ctx), om.log_prob_known(ctx), strict=True):
        np.testing.assert_array_equal(got, want)
    assert again.top_new(ctx, 5) == om.top_new(ctx, 5)
    assert again.how == om.how


# -- open scores ----------------------------------------------------------------------------


def test_conventions_charge_unk_and_leave_known_tokens_alone() -> None:
    oov = np.array([False, True, False, True, True])
    spell = np.where(oov, [0.0, -7.0, 0.0, -9.0, -7.0], np.nan)
    closed = SplitScores(
        nnlm=np.array([-1.0, -2.0, -3.0, -4.0, -5.0]),
        pure=np.array([-1.5, -2.5, -3.5, -4.5, -5.5]),
        micro=np.array([np.nan, np.nan, -0.7, np.nan, np.nan]),
    )
    scores = OpenScores(
        closed=closed,
        open_known=np.array([np.nan, np.nan, -0.9, np.nan, np.nan]),
        route=np.array([np.nan, -3.0, np.nan, -np.inf, np.nan]),
        spell=spell,
        oov=oov,
        n_oov_types=2,
    )
    proper, adjusted = scores.nnlm("proper"), scores.nnlm("adjusted")
    np.testing.assert_array_equal(proper[oov], closed.nnlm[oov] + spell[oov])
    np.testing.assert_allclose(adjusted[oov], closed.nnlm[oov] - math.log(2))
    np.testing.assert_array_equal(proper[~oov], adjusted[~oov])
    closed_pure, open_pure = scores.pure(open_vocab=False), scores.pure()
    assert open_pure[2] == pytest.approx(-3.5 - 0.9 + 0.7)  # P_open in place of P_MM
    assert open_pure[1] == pytest.approx(np.logaddexp(closed.pure[1] - 7.0, -3.0))
    np.testing.assert_array_equal(open_pure[[0, 3, 4]], closed_pure[[0, 3, 4]])
    assert scores.scored_open.tolist() == [False, True, False, False, False]
    with pytest.raises(ValueError, match="convention"):
        scores.nnlm("ueberla")


def test_open_scores_add_the_class_reading_at_unseen_class_tokens(models, loaded, micro) -> None:
    corpus = loaded.corpus
    line = "The tower was built in 1990 , rebuilt in 2027 and sold in 2031 to a zyzzyvax firm"
    text = prepare_text(corpus, line + " from Paris and Ouagadougou .\n", input_format="tokenized")
    split, strings = text.split, list(text.strings)
    opened = {n: models[n] for n in ENUMERATED}
    spelling = fit_spelling(corpus)
    got = open_scores(loaded.scorer(), text, micro, opened, spelling, corpus.class_names)
    modelled = np.isin(split.rule_class_ids, [corpus.class_id(n) for n in opened])
    unseen = split.oov_class_mask & modelled
    assert [strings[i] for i in np.flatnonzero(unseen)] == ["2027", "2031", "Ouagadougou"]
    assert (got.scored_open == unseen).all()
    closed, opened_pure = got.pure(open_vocab=False), got.pure()
    assert (opened_pure[unseen] > closed[unseen]).all() and np.isfinite(opened_pure[unseen]).all()
    oov = got.oov
    assert [strings[i] for i in np.flatnonzero(oov)] == ["2027", "2031", "zyzzyvax", "Ouagadougou"]
    charge = spelling.log_prob_outside([strings[i] for i in np.flatnonzero(oov)])
    for open_vocab in (False, True):
        proper = got.pure(open_vocab, "proper")
        adjusted = got.pure(open_vocab, "adjusted")
        np.testing.assert_array_equal(proper[~oov], adjusted[~oov])
    np.testing.assert_allclose(got.nnlm("proper")[oov], got.closed.nnlm[oov] + charge)
    np.testing.assert_allclose(got.nnlm("adjusted")[oov], got.closed.nnlm[oov] - math.log(4))
    known_year = np.flatnonzero(np.array(strings) == "1990")
    np.testing.assert_allclose(
        opened_pure[known_year] - closed[known_year],
        got.open_known[known_year] - got.closed.micro[known_year],
    )
