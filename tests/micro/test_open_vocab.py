"""Open micro-models (micro/open_set.py and its bases) and open-vocabulary scores
(evaluation/open_vocab.py): each P_open sums to one over its class's whole open set O_c,
a new member is scored by the same function as a known one, the fitted parameters survive
JSON, and the two conventions charge ``<unk>`` as they say."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data.corpus import PreparedCorpus
from nslm.data.fixed_vocab import prepare_text
from nslm.data.split import Split
from nslm.errors import NslmError
from nslm.evaluation.open_vocab import OpenScores, open_scores
from nslm.micro.gated import GatedMixture
from nslm.micro.history import Context
from nslm.micro.number_spellings import class_rule
from nslm.micro.open_cache import CacheWeight, TextCache, text_cache
from nslm.micro.open_set import GATED_PARTS, KnownWeight, OpenMicroModel, log_open
from nslm.micro.pipeline import fit_micro
from nslm.micro.unk_share import fit_unk_shares
from nslm.scores.passes import head_of
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


def test_a_known_weight_shift_moves_mass_to_the_known_members(models) -> None:
    """δ (chosen on valid by nslm micro fit) adds to a: the known members' γ rises by δ, the
    model stays proper, and the shift is kept in the class's parameters."""
    from nslm.evaluation.open_report import value_classes, with_known_shift

    log_freq = np.log(np.array([0.5, 0.25, 0.25]))
    base, moved = KnownWeight(-1.0, 0.5), KnownWeight(-1.0, 0.5, shift=2.0)
    np.testing.assert_allclose(moved.gamma(log_freq) - base.gamma(log_freq), 2.0)
    assert value_classes(models) == ["round"]
    shifted = with_known_shift(models, 1.5)
    for name, om in shifted.items():
        want = 1.5 if name in value_classes(models) else 0.0
        assert om.weight.shift == want and models[name].weight.shift == 0.0
        params = om.get_params()
        assert params["known_weight"]["shift"] == want
        again = OpenMicroModel.from_params(params, om.micro, om.tensors())
        assert again.weight == om.weight


@pytest.mark.parametrize("name", ENUMERATED)
def test_enumerated_open_set_sums_to_one(models, loaded, name: str) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 30)
    has = om.micro.metric.available(ctx)
    assert len(ctx) >= 50 and has.any() and (~has).any()  # the metric's part and the prior's
    known = om.log_prob_known(ctx)
    members = om.log_prob_members(ctx)
    np.testing.assert_array_equal(members[:, om.base.vc_columns], known)
    new_columns = np.setdiff1d(np.arange(len(om.base.strings)), om.base.vc_columns)
    assert len(new_columns) > 0
    # a new member keeps its base share: log P_open − log v is one constant (−log Z) a row
    offset = members[:, new_columns] - om.base.log_v_all(ctx)[:, new_columns]
    np.testing.assert_allclose(offset, offset[:, :1].repeat(len(new_columns), axis=1), atol=1e-9)
    p_new = np.exp(members[:, new_columns]).sum(axis=1)
    np.testing.assert_allclose(np.exp(known).sum(axis=1) + p_new, 1.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.exp(om.log_new_mass(ctx)), p_new, rtol=0, atol=1e-9)


def test_round_open_set_sums_to_one(models, loaded) -> None:
    om = models["round"]
    ctx = class_contexts(om, loaded.corpus, 3)
    _, listed = class_rule("round")
    new = [s for s in listed if s not in om.known]
    known = om.log_prob_known(ctx)
    for i in range(len(ctx)):  # log_prob's reading of every new string of the class's rule
        p_new = np.exp(om.log_prob(new, ctx.rows(np.full(len(new), i)))).sum()
        assert np.exp(known[i]).sum() + p_new == pytest.approx(1.0, abs=1e-9)
        assert p_new == pytest.approx(np.exp(om.log_new_mass(ctx.rows(np.array([i]))))[0])


@pytest.mark.parametrize("name", [*ENUMERATED, "round"])
def test_log_prob_of_a_known_member_is_its_column(models, loaded, name: str) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 5)
    known = om.log_prob_known(ctx)
    j = int(np.argmax(om.cls.candidates.counts))
    got = om.log_prob([om.cls.candidates.strings[j]] * len(ctx), ctx)
    np.testing.assert_array_equal(got, known[:, j])


@pytest.mark.parametrize("name", ENUMERATED)
def test_log_prob_of_a_new_member_is_its_share_of_the_enumeration(models, loaded, name) -> None:
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 5)
    column = int(np.setdiff1d(np.arange(len(om.base.strings)), om.base.vc_columns)[0])
    got = om.log_prob([om.base.strings[column]] * len(ctx), ctx)
    np.testing.assert_allclose(got, om.log_prob_members(ctx)[:, column], rtol=1e-12)
    assert np.isneginf(om.log_prob(["Atlantis 3000"], ctx.rows(np.array([0])))).all()


def test_new_values_take_what_the_known_ones_leave(models, loaded) -> None:
    om = models["round"]
    ctx = class_contexts(om, loaded.corpus, 3)
    known = om.log_prob_known(ctx)
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
    log_p = om.log_prob_members(ctx)[0]
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
    np.testing.assert_array_equal(again.log_prob_known(ctx), om.log_prob_known(ctx))
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


def test_the_unk_estimators_share_p_unk_with_the_new_members() -> None:
    """``unk``: known members keep the closed score, an unseen class token gets P(<unk> | h)
    · [(1 − Σρ) · P_spell + ρ_c · P_new]; ``escape+unk`` adds the open route to that."""
    oov = np.array([False, True, False, True])
    closed = SplitScores(
        nnlm=np.array([-1.0, -2.0, -3.0, -4.0]),
        pure=np.array([-1.5, -2.5, -3.5, -4.5]),
        micro=np.array([np.nan, np.nan, -0.7, np.nan]),
    )
    base = OpenScores(
        closed=closed,
        open_known=np.array([np.nan, np.nan, -0.9, np.nan]),
        route=np.array([np.nan, -3.0, np.nan, np.nan]),
        spell=np.where(oov, -7.0, np.nan),
        oov=oov,
        n_oov_types=2,
        new_share=np.array([np.nan, -1.2, np.nan, np.nan]),
        rule_class_ids=np.array([0, 1, 1, 0]),
        rho={1: 0.2, 2: 0.1},
    )
    unk = dataclasses.replace(base, new_mass="unk").pure()
    shared = -2.5 + np.logaddexp(math.log(0.7) - 7.0, math.log(0.2) - 1.2)
    assert unk[1] == pytest.approx(shared)
    assert unk[2] == -3.5  # a known member pays nothing
    assert unk[3] == pytest.approx(-4.5 + math.log(0.7) - 7.0)  # a word: the spelled share
    both = dataclasses.replace(base, new_mass="escape+unk").pure()
    assert both[1] == pytest.approx(np.logaddexp(shared, -3.0))
    assert both[2] == pytest.approx(-3.5 - 0.9 + 0.7)
    with pytest.raises(ValueError, match="new_mass"):
        dataclasses.replace(base, new_mass="cache")
    with pytest.raises(ValueError, match="rho"):
        dataclasses.replace(base, rho=None, new_mass="unk")


def test_rho_is_each_class_share_of_the_tokens_one_half_never_saw() -> None:
    # articles 0 and 2 are one half, 1 and 3 the other; type 9 is a <year> only in half 1,
    # type 8 a word only in half 0, type 7 a <year> in both
    tokens = np.array([1, 7, 8, 1, 7, 9, 9, 1, 2, 7], dtype=np.int32)
    classes = np.array([0, 1, 0, 0, 1, 1, 1, 0, 0, 1], dtype=np.int16)
    articles = np.array([0, 0, 0, 1, 1, 1, 1, 2, 3, 3], dtype=np.int32)
    n = len(tokens)
    train = Split(
        "train",
        tokens,
        classes,
        np.full(n, np.nan),
        np.full((n, 2), np.nan),
        np.full((n, 3), np.nan),
        articles,
        unk_id=0,
    )
    got = fit_unk_shares(train, ["word", "year", "city"], ["year", "city"])
    # new in half 1 (against half 0's types {1, 7, 8}): 9, 9, 2; new in half 0 (against
    # {1, 7, 9, 2}): 8. Four new tokens, two of them <year>
    assert got["new_tokens"] == 4
    assert got["rho"] == {"year": 0.5, "city": 0.0}


def test_rescoring_a_value_class_matches_scoring_anew(models, loaded, micro) -> None:
    """nslm micro fit tries each known-weight shift δ by swapping the value classes' open
    models into one scoring of valid (open_vocab.rescored): it must give what scoring the
    text anew with the shifted models gives, known tokens and unseen ones alike."""
    from nslm.evaluation.open_report import with_known_shift
    from nslm.evaluation.open_vocab import rescored

    corpus = loaded.corpus
    line = "The city had 20,000 people in 1990 , 370,000 in 2027 and 7,000,000 in 2031 .\n"
    text = prepare_text(corpus, line * 3, input_format="tokenized")
    spelling, names = fit_spelling(corpus), corpus.class_names
    opened = {n: models[n] for n in ("year", "round")}
    base = open_scores(loaded.scorer(), text, micro, opened, spelling, names)
    shifted = with_known_shift(opened, 2.0)
    want = open_scores(loaded.scorer(), text, micro, shifted, spelling, names)
    got = rescored(base, text, opened, {"round": shifted["round"]}, names)
    unseen_round = text.split.oov_class_mask & (text.split.rule_class_ids == names.index("round"))
    assert np.isfinite(want.route[unseen_round]).any()  # an unseen round number is read
    assert not np.allclose(base.route[unseen_round], want.route[unseen_round])  # δ moves it
    for field in ("open_known", "route", "new_share"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-10)


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


# -- the gate on the LM's state -------------------------------------------------------------


@pytest.fixture(scope="module")
def gated(models, loaded) -> OpenMicroModel:
    """The year's open model with a gate fitted on the tiny LM's states at the first 300,000
    tokens of train and valid (kept or not, the fitted gate is put in so that its scores can
    be checked)."""
    om = OpenMicroModel.from_params(models["year"].get_params(), models["year"].micro)
    train, valid = (head_of(s, 300_000) for s in (loaded.corpus.train, loaded.corpus.valid))
    scorer = loaded.scorer()
    H_train, H_valid = (scorer.features_at(s, om.cls.positions(s)[0]) for s in (train, valid))
    om.fit_gate(train, H_train, valid, H_valid)
    assert set(om.gate_valid_nll) == {"ungated", "gated"}
    if om.gate is None:  # not better on valid: put the fitted one in for what follows
        gate = GatedMixture(len(GATED_PARTS), H_train.shape[1])
        L_train, L_valid = om._part_targets(train), om._part_targets(valid)
        om.gate = gate.fit(H_train.numpy(), L_train, H_valid.numpy(), L_valid)
    return om


def random_states(om: OpenMicroModel, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return om.gate.mean + om.gate.scale * rng.normal(size=(n, om.gate.dim))


def test_every_gated_part_and_the_gated_mixture_sum_to_one(gated, loaded) -> None:
    ctx = class_contexts(gated, loaded.corpus, 20)
    parts = gated.part_log_probs(ctx)
    assert parts.shape == (len(ctx), len(GATED_PARTS), len(gated.base.strings))
    np.testing.assert_allclose(np.exp(parts).sum(axis=2), 1.0, rtol=0, atol=1e-9)
    H = random_states(gated, len(ctx))
    members = gated.log_prob_members(ctx, H)
    np.testing.assert_allclose(np.exp(members).sum(axis=1), 1.0, rtol=0, atol=1e-9)
    known = gated.log_prob_known(ctx, H)
    np.testing.assert_array_equal(known, members[:, gated.base.vc_columns])
    new = 1.0 - np.exp(known).sum(axis=1)
    np.testing.assert_allclose(np.exp(gated.log_new_mass(ctx, H)), new, rtol=1e-9)
    strings = [gated.base.strings[j] for j in range(0, len(gated.base.strings), 97)]
    row = ctx.rows(np.zeros(len(strings), dtype=np.int64))
    got = gated.log_prob(strings, row, np.repeat(H[:1], len(strings), axis=0))
    np.testing.assert_allclose(got, members[0, ::97], rtol=1e-12)


def test_the_after_part_puts_an_unseen_years_successors_first(gated, loaded) -> None:
    ctx = year_context(gated, loaded.corpus, 2027)
    after = gated.part_log_probs(ctx)[0, GATED_PARTS.index("after")]
    best = int(gated.base.strings[int(np.argmax(after))])
    assert 2027 < best <= 2037 and str(best) not in gated.known
    # a gate pinned to the "after" part is that part
    pinned = OpenMicroModel(
        gated.micro,
        gated.base,
        gated.weight,
        gate=GatedMixture.pinned(len(GATED_PARTS), gated.gate.dim, GATED_PARTS.index("after")),
    )
    H = random_states(gated, 1)
    np.testing.assert_allclose(pinned.log_prob_members(ctx, H)[0], after, atol=1e-12)
    top = pinned.top_new(ctx, 3, H)[0]
    assert top[0][0] == str(best)


def test_a_gated_model_needs_the_lms_states_and_round_trips(gated, loaded) -> None:
    ctx = class_contexts(gated, loaded.corpus, 3)
    with pytest.raises(NslmError, match="reads the LM's states"):
        gated.log_prob_known(ctx)
    with pytest.raises(NslmError, match="LM states for"):
        gated.log_prob_known(ctx, random_states(gated, len(ctx) + 1))
    params = json.loads(json.dumps(gated.get_params()))
    again = OpenMicroModel.from_params(params, gated.micro, gated.tensors())
    H = random_states(gated, len(ctx))
    # the gate's tensors are kept as float32 (safetensors), as a context model's are
    np.testing.assert_allclose(
        again.log_prob_known(ctx, H), gated.log_prob_known(ctx, H), rtol=1e-3
    )
    with pytest.raises(NslmError, match="gate cannot be read"):
        OpenMicroModel.from_params(params, gated.micro)


def test_a_class_without_a_listed_open_set_has_no_gate(models, loaded) -> None:
    om = models["round"]
    assert not om.gateable
    corpus = loaded.corpus
    assert om.fit_gate(corpus.train, np.zeros((1, 4)), corpus.valid, np.zeros((1, 4))) is False
    assert om.gate is None


# -- the cache of new members ----------------------------------------------------------------


def test_text_cache_holds_earlier_new_members_of_the_article_within_the_window() -> None:
    positions = np.array([1, 3, 5, 8, 12, 20])
    members = np.array(["a", "b", "a", "c", "a", "b"], dtype=object)
    new = np.array([True, False, True, True, True, True])
    articles = np.array([0] * 10 + [1] * 15)
    cache = text_cache(members, positions, articles, new, np.array([1, 7, 9, 13, 23]), window=6)
    assert [dict(c) for c in cache.counts] == [
        {},  # nothing before position 1
        {"a": 2},  # "b" at 3 is known: never cached
        {"a": 1, "c": 1},  # the "a" at 1 is more than 6 tokens back
        {"a": 1},  # position 12 starts article 1: only its own "a"
        {"b": 1},  # the "a" at 12 is 11 tokens back; the "b" at 20 is new
    ]
    assert cache.share(1, "a") == 1.0 and cache.share(2, "c") == 0.5 and cache.share(0, "a") == 0


def year_cache(om: OpenMicroModel, n: int) -> TextCache:
    """Caches for n rows: empty, one new year, two new years, one of them twice, …"""
    new = [s for s in om.base.strings if s not in om.known][:3]
    counts = [Counter(), Counter({new[0]: 1}), Counter({new[1]: 2, new[2]: 1})]
    return TextCache([counts[i % 3] for i in range(n)])


def test_the_cache_keeps_the_open_set_proper(models, loaded) -> None:
    om = models["year"]
    ctx = class_contexts(om, loaded.corpus, 10)
    om = OpenMicroModel(om.micro, om.base, om.weight, cache_weight=CacheWeight(-1.0, 0.5))
    cache = year_cache(om, len(ctx))
    members = om.log_prob_members(ctx, cache=cache)
    np.testing.assert_allclose(np.exp(members).sum(axis=1), 1.0, rtol=0, atol=1e-9)
    known = om.log_prob_known(ctx, cache=cache)
    np.testing.assert_array_equal(known, members[:, om.base.vc_columns])
    plain = om.log_prob_members(ctx)
    kappa = om.cache_weight.kappa(cache)
    assert kappa[0] == 0 and (kappa[1:3] > 0).all()
    for i in range(3):  # (1 − κ) · P_open + κ · n_t(w) / n_t, member by member
        want = (1 - kappa[i]) * np.exp(plain[i])
        for s, c in cache.counts[i].items():
            want[om.base.index[s]] += kappa[i] * c / cache.totals[i]
        np.testing.assert_allclose(np.exp(members[i]), want, rtol=1e-9, atol=1e-15)
    cached = next(iter(cache.counts[1]))
    got = om.log_prob([cached], ctx.rows(np.array([1])), cache=cache.rows(np.array([1])))
    assert got[0] == pytest.approx(members[1, om.base.index[cached]])
    top = om.top_new(ctx.rows(np.array([1])), 3, cache=cache.rows(np.array([1])))[0]
    assert top[0][0] == cached  # κ(1) = σ(−1) ≈ 0.27: the cached year comes first


def test_the_cache_keeps_a_value_class_proper(models, loaded) -> None:
    om = models["round"]
    ctx = class_contexts(om, loaded.corpus, 2)
    _, listed = class_rule("round")
    new = [s for s in listed if s not in om.known]
    om = OpenMicroModel(om.micro, om.base, om.weight, cache_weight=CacheWeight(0.0, 0.0))
    for i in range(len(ctx)):
        cache = TextCache([Counter({new[7]: 1, new[99]: 3})] * len(new))
        rows = ctx.rows(np.full(len(new), i))
        known = om.log_prob_known(ctx.rows(np.array([i])), cache=cache.rows(np.array([0])))
        total = np.exp(known).sum() + np.exp(om.log_prob(new, rows, cache=cache)).sum()
        assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("name", ["year", "round"])
def test_deleted_estimation_fits_the_cache_weight(models, name: str) -> None:
    om = models[name]
    assert "cache of new members" in om.how
    kappa = om.cache_weight.kappa(TextCache([Counter({1: 1}), Counter({1: 4})]))
    # a year or a round number the text has named again is common in WikiText articles
    assert (kappa > 0.01).all() and np.isfinite([om.cache_weight.alpha, om.cache_weight.beta]).all()
    again = OpenMicroModel.from_params(json.loads(json.dumps(om.get_params())), om.micro)
    assert again.cache_weight == om.cache_weight


def test_each_gated_part_reads_the_cache_as_it_reads_the_members(gated, loaded) -> None:
    """ "began in 2027 and ended in": the cache holds 2027 itself; the "after" part keeps
    only cached years after 2027, so a gate that picks it is not undone by the cache."""
    ctx = year_context(gated, loaded.corpus, 2027)
    om = OpenMicroModel(
        gated.micro, gated.base, gated.weight, gate=gated.gate, cache_weight=CacheWeight(0.0)
    )
    cache = TextCache([Counter({"2027": 1})])
    parts = om.part_log_probs(ctx, cache)
    np.testing.assert_allclose(np.exp(parts).sum(axis=2), 1.0, atol=1e-9)
    year = om.base.index["2027"]
    whole, after = parts[0, 0], parts[0, GATED_PARTS.index("after")]
    assert int(om.base.strings[int(np.argmax(whole))]) == 2027  # κ = ½ on the repeat
    assert np.isneginf(after[year])  # 2027 is not after 2027: neither the part nor its cache
    np.testing.assert_allclose(after, om.part_log_probs(ctx)[0, GATED_PARTS.index("after")])
    H = random_states(om, 1)
    members = om.log_prob_members(ctx, H, cache)
    np.testing.assert_allclose(np.exp(members).sum(), 1.0, atol=1e-9)
    assert om.log_prob(["2027"], ctx, H, cache)[0] == pytest.approx(members[0, year])


# -- how the known members share their mass ------------------------------------------------


def shaped(om: OpenMicroModel, shape: str) -> OpenMicroModel:
    return OpenMicroModel(om.micro, om.base, om.weight, om.how, om.gate, om.cache_weight, shape)


@pytest.mark.parametrize("name", ["year", "round"])
def test_the_micro_shape_keeps_the_known_total_and_shares_it_as_p_mm(models, loaded, name):
    """P_MM(w | c, ctx) · (1 − P_open(new)): the same mass for the known members as the open
    model's, split among them as the class's micro-model splits V_c, and the whole open set
    still sums to one."""
    om = models[name]
    ctx = class_contexts(om, loaded.corpus, 25)
    as_open, as_micro = shaped(om, "open"), shaped(om, "micro")
    known_open, known_micro = as_open.log_prob_known(ctx), as_micro.log_prob_known(ctx)
    np.testing.assert_allclose(
        np.exp(known_micro).sum(axis=1), np.exp(known_open).sum(axis=1), rtol=1e-9
    )
    share = known_micro - np.log(np.exp(known_micro).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(share, om.micro.log_prob(ctx), atol=1e-9)
    if name == "year":  # a listed O_c: every member at once
        members = as_micro.log_prob_members(ctx)
        np.testing.assert_allclose(np.exp(members).sum(axis=1), 1.0, rtol=0, atol=1e-9)
    else:  # the round class's rule lists its strings: the new ones one by one
        _, listed = class_rule("round")
        new = [s for s in listed if s not in om.known]
        for i in range(3):
            p_new = np.exp(as_micro.log_prob(new, ctx.rows(np.full(len(new), i)))).sum()
            assert np.exp(known_micro[i]).sum() + p_new == pytest.approx(1.0, abs=1e-9)
    strings = [om.cls.candidates.strings[0]] * len(ctx)
    np.testing.assert_allclose(as_micro.log_prob(strings, ctx), known_micro[:, 0], atol=1e-9)


def test_a_gated_model_keeps_the_open_shape(gated, loaded) -> None:
    """Its parts read from h which known member comes next; P_MM cannot."""
    assert gated.fit_known_shape(head_of(loaded.corpus.valid, 50_000)) == "open"
    with pytest.raises(NslmError, match="gated"):
        shaped(gated, "micro")


def test_the_known_shape_is_chosen_on_valid_and_round_trips(models, loaded) -> None:
    om = shaped(models["round"], "open")
    valid = head_of(loaded.corpus.valid, 100_000)
    chosen = om.fit_known_shape(valid)
    nll = om.known_shape_valid_nll
    assert set(nll) == {"open", "micro"} and chosen == min(nll, key=nll.get)
    positions, index = om.cls.positions(valid)
    ctx = om.cls.context(valid, positions, om.micro.context)
    got = om.log_prob_known(ctx)[np.arange(len(positions)), index]
    assert -got.mean() == pytest.approx(nll[chosen])
    params = json.loads(json.dumps(om.get_params()))
    again = OpenMicroModel.from_params(params, om.micro)
    assert again.known_shape == chosen and again.get_params() == params  # evidence kept too
    with pytest.raises(NslmError, match="known_shape"):
        OpenMicroModel.from_params(params | {"known_shape": "both"}, om.micro)


def test_a_city_keeps_its_population_over_all_its_names(models) -> None:
    """The open city prior splits a city's population between its main name and its
    alternate ones (α to the alternates, from the training tokens): summed over the names,
    each city weighs its population."""
    from nslm.data.places import load_gazetteer

    base = models["city"].base
    weight = dict(zip(base.strings, np.exp(base.raw_prior), strict=True))
    places = [p for p in load_gazetteer().places() if p.cls == "city"]
    for city in ("Mumbai", "Kolkata", "Istanbul"):
        names = [p for p in places if city in (p.name, p.known_as)]
        assert len(names) > 3
        total = sum(weight[p.name.replace(" ", "_")] for p in names)
        assert total == pytest.approx(names[0].population, rel=1e-9)
        alternates = [weight[p.name.replace(" ", "_")] for p in names if p.known_as]
        assert max(alternates) < weight[city]
