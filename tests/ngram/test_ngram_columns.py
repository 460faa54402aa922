"""The 5-gram and 5-gram NSLM columns of the tables, on copies of test_nslm's tiny real runs.

The reference models are built independently by ``nslm ngram build`` (word and ``--tagged``
streams) and scored by :func:`nslm.ngram.build.score_split`; the micro-models' P_MM comes
from each model's own ``log_prob_targets``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import copy_run
from nslm.cli import main
from nslm.evaluation.report import EvalOptions, evaluate_run
from nslm.ngram.build import score_split
from nslm.ngram.columns import NgramColumns, column_names, ngram_source
from nslm.ngram.model import NgramModel
from nslm.perplexity import perplexity
from nslm.scores.passes import Scorer

ORDER = 5
WORD, NSLM = column_names(ORDER)
SLICE = 20_000  # as in test_nslm
pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def run(tiny_nslm_each_top: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the session's tiny run, for each HNLM top level (as test_nslm): the
    5-gram caches and the tables are written into it."""
    return copy_run(tiny_nslm_each_top, tmp_path_factory.mktemp("ngram-run") / "tiny")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Word and tagged 5-grams built by the ``nslm ngram build`` command."""
    out = tmp_path_factory.mktemp("ngram-ref")
    paths = {"word": out / "word", "tagged": out / "tagged"}
    build = ["ngram", "build", "--order", str(ORDER), "--corpus", "wikitext-2", "--out-dir"]
    assert main([*build, str(paths["word"])]) == 0
    assert main([*build, str(paths["tagged"]), "--tagged"]) == 0
    return paths


@pytest.fixture(scope="module")
def source(loaded, micro, run: Path) -> NgramColumns:
    # RUN/ngram is also where `nslm eval RUN --ngram 5` looks: the CLI test reuses the build
    return ngram_source(ORDER, micro=micro)(loaded)


@pytest.fixture(scope="module")
def result(loaded, micro, source):
    return evaluate_run(
        loaded, micro, split="test", options=EvalOptions(max_tokens=SLICE), extra=[source]
    )


def test_columns_in_every_table(result) -> None:
    for entry in result["tables"].values():
        assert entry["models"] == ["NNLM", "HNLM", "NSLM", "NSLM-pure", WORD, NSLM]
        assert entry["tokens"]["Global"] == SLICE - 1
        for row in entry["rows"].values():
            assert math.isfinite(row[WORD]) and math.isfinite(row[NSLM])
        assert WORD in entry["change"]["Global"]


def test_global_equals_the_ngram_scorer(loaded, result, reference) -> None:
    ref = NgramModel.load(reference["word"])
    lp = score_split(ref, loaded.corpus, "test")[:SLICE]
    want = perplexity(lp[~np.isnan(lp)])
    for entry in result["tables"].values():
        assert entry["rows"]["Global"][WORD] == want  # exact: the same model, the same positions


def test_ngram_eval_json_matches(loaded, reference, source, capsys) -> None:
    assert main(["ngram", "eval", str(reference["word"]), "--split", "test", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    full = source.score("test", loaded.corpus.test, {})[WORD]
    assert perplexity(full[~np.isnan(full)]) == rows["Global"]["ppl"]
    assert int((~np.isnan(full)).sum()) == rows["Global"]["tokens"] == len(loaded.corpus.test) - 1


def test_every_nnlm_position_is_scored(loaded, source, test_slice) -> None:
    nnlm = Scorer(loaded.model, batch_size=8, bptt=20).score(test_slice, ("nnlm",)).nnlm
    cols = source.score("test", test_slice, {})
    for name in (WORD, NSLM):
        np.testing.assert_array_equal(np.isnan(cols[name]), np.isnan(nnlm))
        assert np.isnan(cols[name][0]) and not np.isinf(cols[name][1:]).any()


def test_nslm_is_eq4_over_the_tagged_ngram(loaded, micro, source, test_slice, reference) -> None:
    corpus = loaded.corpus
    col = source.score("test", test_slice, {})[NSLM]
    top = score_split(NgramModel.load(reference["tagged"]), corpus, "test")[:SLICE]
    cls = test_slice.class_ids
    # classes with a micro-model: log P_ngram(tag | h) + log P_MM(w)
    for name, mm in micro.items():
        at = cls == corpus.class_id(name)
        assert at.sum() > 10
        want = top[at] + mm.log_prob_targets(test_slice)[at]
        np.testing.assert_allclose(col[at], want, rtol=1e-12)
    # word positions, OOV class tokens included (<unk> words): the n-gram's word probability
    words = (cls == 0) & ~np.isnan(col)
    assert (words & test_slice.oov_class_mask).any()
    np.testing.assert_allclose(col[words], top[words], rtol=1e-12)
    # a class without a micro-model: P(tag | h) · (n(c, w) + 1) / (n(c) + |V_c|)
    day = corpus.class_id("day")
    at = np.flatnonzero(cls == day)
    assert at.size > 10
    members = corpus.class_vocab(day)
    train = corpus.train
    seen = train.token_ids[train.class_ids == day]
    counts = {int(w): int((seen == w).sum()) for w in np.unique(test_slice.token_ids[at])}
    want = [
        top[p] + math.log((counts[int(test_slice.token_ids[p])] + 1) / (len(seen) + len(members)))
        for p in at
    ]
    np.testing.assert_allclose(col[at], want, rtol=1e-12)


def _check_distribution(loaded, source, test_slice, positions: np.ndarray) -> None:
    full = source.distribution_at(test_slice, positions)
    marginal = full.marginal()
    np.testing.assert_array_less(np.abs(np.exp(marginal).sum(axis=1) - 1.0), 1e-9)
    # the per-position score is the (class, word) entry of that distribution
    col = source.score("test", test_slice, {})[NSLM]
    cids = test_slice.class_ids[positions]
    targets = test_slice.token_ids[positions].astype(np.int64)
    for i, (c, w) in enumerate(zip(cids.tolist(), targets.tolist(), strict=True)):
        pair = full.pair_log_prob(c, np.array([w]))[i] if c else full.word[i, w]
        assert pair == pytest.approx(col[positions[i]], rel=1e-9, abs=1e-12)


def test_distribution_sums_to_one_at_every_kind_of_position(loaded, source, test_slice) -> None:
    corpus = loaded.corpus
    rng = np.random.default_rng(0)
    cids = test_slice.class_ids
    kinds = [0, *(corpus.class_id(n) for n in ("year", "city", "day", "country"))]
    picks = [rng.choice(np.flatnonzero(cids[1:] == c) + 1, 3, replace=False) for c in kinds]
    _check_distribution(loaded, source, test_slice, np.unique(np.concatenate(picks)))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, SLICE - 1), min_size=1, max_size=4, unique=True))
def test_distribution_sums_to_one_anywhere(loaded, source, test_slice, picks: list[int]) -> None:
    _check_distribution(loaded, source, test_slice, np.array(sorted(picks)))


def test_the_cache_is_reused(loaded, micro, source, test_slice, run: Path) -> None:
    again = ngram_source(ORDER, micro=micro)(loaded)
    assert again.loaded_from_cache == {"prepared": True, "tagged": True}
    for name, values in source.score("test", test_slice, {}).items():
        np.testing.assert_array_equal(again.columns(test_slice)[name], values)
    assert (run / "ngram" / f"{ORDER}-gram-tagged" / "model.npz").is_file()


def test_eval_cli_shows_the_columns(run: Path, source, capsys) -> None:
    args = ["eval", str(run), "--split", "test", "--prefix-tokens", "5000", "--ngram", str(ORDER)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{NSLM}" in out and "Table 2" in out
    data = json.loads((run / "tables_test.json").read_text())
    rows = data["tables"]["numbers"]["rows"]
    assert rows["Global"][WORD] > 0 and data["tables"]["numbers"]["tokens"]["Global"] == 4999


def test_eval_cli_without_micro_prints_the_global_ppl(run, loaded, tmp_path, capsys) -> None:
    other = tmp_path / "copy"
    shutil.copytree(run, other, ignore=shutil.ignore_patterns("micro.json", "ngram"))
    args = ["eval", str(other), "--split", "test", "--prefix-tokens", "3000", "--ngram", "2"]
    assert main(args) == 0
    assert "2-GRAM" in capsys.readouterr().out
    ppl = json.loads((other / "eval.json").read_text())["test"]["ppl_2-gram"]
    model = NgramModel.load(other / "ngram" / "2-gram-prepared")
    lp = score_split(model, loaded.corpus, "test")[:3000]
    assert ppl == pytest.approx(perplexity(lp[1:]), rel=1e-12)


@pytest.mark.parametrize("order", ["0", "10"])
def test_bad_order_is_one_line_exit_2(run: Path, capsys, order: str) -> None:
    assert main(["eval", str(run), "--ngram", order]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--ngram must be between 1 and 9" in err
