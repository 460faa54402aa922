"""Micro-models fitted on real WikiText-2: proper distributions, Figure 2, JSON round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data import PreparedCorpus
from nslm.errors import NslmError
from nslm.micro import Context, MicroModel, builtin_class, get_pdf
from nslm.micro.pdfs import MultinomialPdf, Pdf
from nslm.micro.selection import candidate_cells


def _first_hyper(pdf: str) -> dict:
    grid = get_pdf(pdf).hyper_grid
    return dict(grid[len(grid) // 2])  # a mid-grid setting: 4 MoG components, 32 bins, …


@pytest.fixture(scope="module")
def fitted(wt2_all: PreparedCorpus) -> list[MicroModel]:
    """Every valid {metric, context, PDF} cell of three classes, fitted on real train."""
    models = []
    for name in ("year", "convert", "city", "day"):
        cls = builtin_class(wt2_all, name)
        for cell in candidate_cells(cls, wt2_all.train):
            model = MicroModel(
                cls,
                cell.metric,
                cell.pdf,
                context=cell.context,
                epsilon=0.01,
                **_first_hyper(cell.pdf),
            )
            models.append(model.fit(wt2_all.train))
    return models


def test_the_grid_covers_every_pdf_and_metric(fitted: list[MicroModel]) -> None:
    pairs = {(m.metric.name, m.pdf.name) for m in fitted}
    assert {"diff", "freq", "value", "convert", "euclidean"} <= {p[0] for p in pairs}
    assert {"unigram", "multinomial", "gaussian", "mog", "binary"} <= {p[1] for p in pairs}


finite = st.floats(allow_nan=False, allow_infinity=False)
maybe_missing = st.one_of(st.just(float("nan")), finite.filter(lambda x: abs(x) < 1e7))


@settings(max_examples=25, deadline=None)
@given(
    prev_values=st.lists(maybe_missing, min_size=1, max_size=6),
    lat=st.floats(-90, 90),
    lon=st.floats(-180, 180),
    target=st.floats(0, 1e5),
)
def test_every_model_is_a_distribution_over_v_c(
    fitted: list[MicroModel], prev_values: list[float], lat: float, lon: float, target: float
) -> None:
    """Σ_{w∈V_c} P_MM(w | context) = 1 and every P_MM(w) > 0, for any context
    (docs/micro-models.md)."""
    n = len(prev_values)
    ctx = Context.from_values(
        prev_value=np.asarray(prev_values),
        prev_coords=np.tile([lat, lon], (n, 1)),
        convert_target=np.full(n, target),
    )
    for model in fitted:
        log_p = model.log_prob(ctx)
        assert log_p.shape == (n, len(model.cls.candidates))
        assert np.isfinite(log_p).all(), model
        p = np.exp(log_p)
        assert (p > 0).all(), model
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-9, err_msg=repr(model))


def test_year_diff_gaussian_peaks_at_plus_one_year(wt2_numbers: PreparedCorpus) -> None:
    """Paper Figure 2: the fitted year-difference Gaussian peaks at about +1 year."""
    year = builtin_class(wt2_numbers, "year")
    model = MicroModel(year, "diff", "gaussian").fit(wt2_numbers.train)
    assert model.target_metric(wt2_numbers.train).size > 15_000  # real year pairs
    grid = np.arange(-50, 51, 0.25)
    mode = grid[np.argmax(model.pdf.log_density(grid))]
    assert abs(mode - 1.0) <= 2.0


def test_year_mog_puts_the_next_year_above_distant_ones(wt2_numbers: PreparedCorpus) -> None:
    year = builtin_class(wt2_numbers, "year")
    model = MicroModel(year, "diff", "mog", components=4, reg=1e-4).fit(wt2_numbers.train)
    strings = list(year.candidates.strings)
    row = model.log_prob(Context.from_values(prev_value=np.array([1944.0])))[0]
    assert row[strings.index("1945")] > row[strings.index("1990")]  # far off
    assert row[strings.index("1945")] > row[strings.index("1943")]


def test_targets_array_follows_the_evaluator_contract(wt2_numbers: PreparedCorpus) -> None:
    year = builtin_class(wt2_numbers, "year")
    model = MicroModel(year, "diff", "multinomial", bins=64).fit(wt2_numbers.train)
    split = wt2_numbers.valid
    log_p = model.log_prob_targets(split)
    assert log_p.shape == split.token_ids.shape and log_p.dtype == np.float64
    in_class = split.class_ids == wt2_numbers.class_id("year")
    assert np.isfinite(log_p[in_class]).all() and (log_p[in_class] < 0).all()
    assert np.isnan(log_p[~in_class]).all()
    # the same numbers as the full distribution, row by row
    positions, index = year.positions(split)
    ctx = year.context(split, positions[:40], "class")
    full = model.log_prob(ctx)
    np.testing.assert_allclose(log_p[positions[:40]], full[np.arange(40), index[:40]])


def test_scoring_distinct_contexts_once_changes_no_score(
    fitted: list[MicroModel], wt2_all: PreparedCorpus
) -> None:
    """log_prob_at scores each distinct context once; every position must still get the
    score of its own row of the full (B, K) distribution, for every metric and PDF."""
    shared = 0
    for model in fitted:
        split = wt2_all.valid
        positions, index = model.cls.positions(split)
        ctx = model.cls.context(split, positions, model.context)
        distinct, which = ctx.unique()
        assert len(distinct) <= len(ctx) and which.shape == (len(ctx),)
        full = model.log_prob(ctx)
        np.testing.assert_allclose(
            model.log_prob_at(ctx, index), full[np.arange(len(ctx)), index], rtol=1e-12
        )
        shared += int(len(distinct) < len(ctx))
    assert shared > 0  # contexts do repeat in real text: the shortcut is exercised


def test_json_round_trip_scores_identically(wt2_numbers: PreparedCorpus) -> None:
    year = builtin_class(wt2_numbers, "year")
    model = MicroModel(year, "diff", "mog", components=3, reg=1e-4, epsilon=0.1)
    model.fit(wt2_numbers.train)
    text = json.dumps(model.to_json())  # plain JSON: no numpy objects left inside
    again = MicroModel.from_json(json.loads(text), year)
    np.testing.assert_array_equal(
        again.log_prob_targets(wt2_numbers.valid), model.log_prob_targets(wt2_numbers.valid)
    )
    day = builtin_class(wt2_numbers, "day")
    with pytest.raises(NslmError, match="another class vocabulary"):
        MicroModel.from_json(json.loads(text), day)


def test_bad_pairs_and_names_are_user_errors(wt2_numbers: PreparedCorpus) -> None:
    year = builtin_class(wt2_numbers, "year")
    with pytest.raises(NslmError, match="unknown PDF 'poisson'"):
        MicroModel(year, "diff", "poisson")
    with pytest.raises(NslmError, match="does not take the binary metric"):
        MicroModel(year, "convert", "gaussian")
    with pytest.raises(NslmError, match="lacks"):
        MicroModel(year, "euclidean", "gaussian")  # years have no coordinates


def test_multinomial_shares_a_bin_among_its_members() -> None:
    pdf = MultinomialPdf(bins=4).fit(np.array([0, 0, 1, 1, 2, 2, 3, 3, 10, 20], dtype=float))
    row = np.array([[0.0, 0.0, 0.0, 50.0]])  # three candidates in one bin, one alone
    scores = np.exp(pdf.log_score(row))[0]
    assert scores[0] == scores[1] == scores[2]
    b = pdf.bins(row)[0]
    np.testing.assert_allclose(scores[0] * 3, pdf.fitted["probs"][b[0]])
    restored = Pdf.from_params(json.loads(json.dumps(pdf.get_params())))
    np.testing.assert_array_equal(restored.log_score(row), pdf.log_score(row))


def test_all_classes_in_one_array_for_the_nslm(wt2_numbers: PreparedCorpus) -> None:
    from nslm.evaluation import class_perplexities
    from nslm.micro.pipeline import micro_log_probs

    models = {
        name: MicroModel(builtin_class(wt2_numbers, name), metric, pdf).fit(wt2_numbers.train)
        for name, metric, pdf in (("year", "diff", "gaussian"), ("convert", "convert", "binary"))
    }
    split = wt2_numbers.test
    log_p = micro_log_probs(models, split)
    rows = class_perplexities(log_p, split, wt2_numbers)
    for name, model in models.items():
        alone = model.log_prob_targets(split)
        assert rows[name]["tokens"] == int((~np.isnan(alone)).sum()) > 0
        assert rows[name]["ppl"] == pytest.approx(np.exp(-np.nanmean(alone)))
    assert np.isnan(log_p[split.class_ids == 0]).all()
