"""Metric functions and the context they read, on real WikiText-2 sentences."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import find
from nslm.data import PreparedCorpus
from nslm.errors import NslmError
from nslm.micro import (
    Context,
    MicroModel,
    builtin_class,
    get_metric,
    previous_index,
    register_metric,
)
from nslm.micro.classdata import precision_step
from nslm.micro.model import metric_matrix


def test_previous_index_stays_in_the_article() -> None:
    mask = np.array([1, 0, 1, 1, 0, 1, 0, 1], dtype=bool)
    articles = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    # position 5 is the first marked token of article 1: its context must not be 3
    assert previous_index(mask, articles).tolist() == [-1, 0, 0, 2, -1, -1, 5, 5]


def test_previous_index_on_real_text_never_crosses_articles(wt2_numbers: PreparedCorpus) -> None:
    split = wt2_numbers.valid
    prev = previous_index(split.rule_class_ids > 0, split.article_ids)
    has = prev >= 0
    assert has.sum() > 1000
    assert (prev[has] < np.flatnonzero(has)).all()
    assert (split.article_ids[prev[has]] == split.article_ids[has]).all()
    # and it is the *latest*: no marked token strictly between prev and t
    marked = np.flatnonzero(split.rule_class_ids > 0)
    t = np.flatnonzero(has)
    assert (np.searchsorted(marked, t) - np.searchsorted(marked, prev[has]) == 1).all()


def test_family_context_sees_other_number_classes(wt2_numbers: PreparedCorpus) -> None:
    """ "died on 9 September 1087": the day 9 is <year>'s family context, not its class one."""
    year = builtin_class(wt2_numbers, "year")
    split = wt2_numbers.train
    positions, _ = year.positions(split)
    same = year.context(split, positions, "class")
    family = year.context(split, positions, "family")
    differs = same.prev_index != family.prev_index
    assert differs.any()
    # the family context is never older than the same-class one
    assert (family.prev_index >= same.prev_index).all()
    prev_classes = split.rule_class_ids[family.prev_index[differs]]
    assert set(np.unique(prev_classes)) - {wt2_numbers.class_id("year")}


def test_convert_scores_8_after_5_miles(wt2_numbers: PreparedCorpus) -> None:
    """Real train text: "about 5 miles ( 8 km ) upstream"."""
    start = find(wt2_numbers, "train", "5 miles ( 8 km )")
    split, eight = wt2_numbers.train, start + 3
    assert split.rule_class_ids[eight] == wt2_numbers.class_id("convert")
    # miles are converted to km most often in training, so km comes first; the "km" written
    # after the 8 is never read
    assert split.convert_targets[eight][0] == pytest.approx(5 * 1.609344)
    cls = builtin_class(wt2_numbers, "convert")
    ctx = cls.context(split, np.array([eight]), "class")
    scores = metric_matrix(get_metric("convert"), cls, ctx)[0]
    by_string = dict(zip(cls.candidates.strings, scores, strict=True))
    assert by_string["8"] == 1.0
    assert by_string["5"] == 0.0 and by_string["9"] == 0.0 and by_string["80"] == 0.0
    # at each candidate's own precision: "08" and "8.0" are right too, "8.1" is not; so are
    # 5 miles in the other units training converts miles to (4.3 nmi, 8,000 m)
    correct = set(np.array(cls.candidates.strings)[scores == 1].tolist())
    assert {"8", "4.3", "8,000"} <= correct
    assert correct <= {"8", "08", "8.0", "8.05", "4", "04", "4.3", "8,000", "8000"}
    assert by_string["8.1"] == 0.0


def test_precision_step_reads_trailing_zeros_as_rounding() -> None:
    assert precision_step("8") == 1.0
    assert precision_step("8.05") == pytest.approx(0.01)
    assert precision_step("1,600") == 100.0  # {{convert}} output rounded to hundreds
    assert precision_step("10") == 1.0  # but at least two significant digits
    assert precision_step("0000") == 1.0 and precision_step("08") == 1.0
    assert precision_step("Paris") != precision_step("Paris")  # NaN for non-numbers


def test_euclidean_after_paris_ranks_rome_above_tokyo(wt2_places: PreparedCorpus) -> None:
    city = builtin_class(wt2_places, "city")
    strings = list(city.candidates.strings)
    paris = city.candidates.coords[strings.index("Paris")]
    ctx = Context.from_values(prev_coords=paris[None, :])
    m = metric_matrix(get_metric("euclidean"), city, ctx)[0]
    rome, tokyo = m[strings.index("Rome")], m[strings.index("Tokyo")]
    assert rome > tokyo
    assert m[strings.index("Paris")] == 0.0  # the metric's maximum: the same place
    assert (m <= 0).all()
    # and so does every fitted micro-model on it, whatever the PDF
    for pdf, hyper in (
        ("gaussian", {}),
        ("exponential", {}),
        ("multinomial", {"bins": 8}),
        ("mog", {"components": 4, "reg": 1e-4}),
    ):
        model = MicroModel(city, "euclidean", pdf, **hyper).fit(wt2_places.train)
        row = model.log_prob(ctx)[0]
        assert row[strings.index("Rome")] > row[strings.index("Tokyo")], pdf


def test_metrics_are_one_array_op_over_v_c(wt2_numbers: PreparedCorpus) -> None:
    """(B, 1) contexts × (1, K) candidates → (B, K), equal to the per-pair definition."""
    year = builtin_class(wt2_numbers, "year")
    positions, _ = year.positions(wt2_numbers.valid)
    ctx = year.context(wt2_numbers.valid, positions[:50], "class")
    ok = get_metric("diff").available(ctx)
    m = metric_matrix(get_metric("diff"), year, ctx.rows(ok))
    assert m.shape == (ok.sum(), len(year.candidates))
    expected = year.candidates.values[None, :] - ctx.prev_value[ok][:, None]
    np.testing.assert_array_equal(m, expected)


def test_unknown_metric_and_bad_registration_are_user_errors() -> None:
    with pytest.raises(NslmError, match="unknown metric 'distance'"):
        get_metric("distance")
    with pytest.raises(NslmError, match="unknown needs"):
        register_metric("bad", needs=("altitude",))
    with pytest.raises(NslmError, match="kind must be"):
        register_metric("bad", kind="ordinal")
