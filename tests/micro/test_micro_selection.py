"""Grid search: on a corpus built so one pair is right, the search must pick that pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nslm.data import PreparedCorpus, Split, Vocabulary
from nslm.data.numbers import can_be
from nslm.errors import NslmError
from nslm.micro import builtin_class
from nslm.micro.selection import candidate_cells, evaluate, select_class

LOW, HIGH = 3000, 4999  # four-digit, never year-shaped: every value is an <other> number


def _walk(rng: np.random.Generator, articles: int, length: int) -> list[list[int]]:
    """Articles of <other> numbers where next = prev + d, d ~ ½ N(−25, 5²) + ½ N(+35, 5²).

    The generating model is exactly ``diff`` with a two-component mixture of Gaussians, so
    {diff, mog} is the known-best pair: value/freq carry no signal, one Gaussian cannot be
    bimodal, and a binned multinomial must estimate each bin separately from few pairs.
    """
    out = []
    for _ in range(articles):
        seq = [int(rng.integers(LOW + 100, HIGH - 100))]
        while not can_be("other", str(seq[0])):  # 3500 is <round>, not <other>
            seq = [int(rng.integers(LOW + 100, HIGH - 100))]
        while len(seq) < length:
            d = rng.normal(-25, 5) if rng.random() < 0.5 else rng.normal(35, 5)
            nxt = round(seq[-1] + d)
            if LOW <= nxt <= HIGH and can_be("other", str(nxt)):
                seq.append(nxt)
        out.append(seq)
    return out


def synthetic_corpus(seed: int = 0) -> PreparedCorpus:
    rng = np.random.default_rng(seed)
    pool = [str(v) for v in range(LOW, HIGH + 1) if can_be("other", str(v))]
    itos = ["<unk>", "<eos>", "the", *pool]
    vocab = Vocabulary(itos=itos, counts=np.ones(len(itos), dtype=np.int64))
    splits = {}
    for name, n_articles in (("train", 40), ("valid", 40), ("test", 20)):
        tokens, classes, articles = [], [], []
        for a, seq in enumerate(_walk(rng, n_articles, 25)):
            for v in seq:
                tokens += [str(v), "the"]
                classes += [1, 0]
                articles += [a, a]
        n = len(tokens)
        values = np.array([float(t) if t[0].isdigit() else np.nan for t in tokens])
        splits[name] = Split(
            name=name,
            token_ids=vocab.encode(tokens),
            rule_class_ids=np.asarray(classes, dtype=np.int16),
            values=values,
            coords=np.full((n, 2), np.nan),
            convert_targets=np.full((n, 3), np.nan),
            article_ids=np.asarray(articles, dtype=np.int32),
            unk_id=vocab.unk_id,
        )
    return PreparedCorpus(vocab=vocab, class_names=("word", "other"), splits=splits)


@pytest.fixture(scope="module")
def synthetic() -> PreparedCorpus:
    return synthetic_corpus()


@pytest.fixture(scope="module")
def selection(synthetic: PreparedCorpus):
    cls = builtin_class(synthetic, "other")
    return select_class(cls, synthetic.train, synthetic.valid)


def test_grid_picks_the_generating_pair(selection) -> None:
    best = selection.selected
    assert (best.metric, best.pdf) == ("diff", "mog")
    # the winner is the argmin of every recorded cell, and every valid cell was recorded
    scored = [c.valid_ppl for c in selection.cells if math.isfinite(c.valid_ppl)]
    assert best.valid_ppl == min(scored)
    names = {(c.metric, c.context, c.pdf) for c in selection.cells}
    assert ("value", "class", "gaussian") in names and ("freq", "class", "unigram") in names
    assert ("convert", "class", "binary") not in names  # no conversions: not a valid cell


def test_winner_beats_unigram_by_far_on_test(selection, synthetic: PreparedCorpus) -> None:
    result = evaluate(selection, synthetic.test)
    # the generating entropy is ≈ ln 2 + ½ ln(2πe·5²) → perplexity ≈ 41; unigram ≈ |V_c|
    assert result["mm_ppl"] < 60
    assert result["unigram_ppl"] > 1000
    assert result["fallback_tokens"] == 20  # the first number of each test article


def test_invalid_pairs_are_not_in_the_grid(synthetic: PreparedCorpus) -> None:
    cells = candidate_cells(builtin_class(synthetic, "other"), synthetic.train)
    assert all(c.pdf != "binary" for c in cells)  # binary takes 0/1 metrics only
    assert all(c.pdf != "unigram" or c.metric == "freq" for c in cells)
    assert not any(c.metric == "euclidean" for c in cells)  # numbers have no coordinates


def test_unknown_names_and_empty_classes_are_one_line_errors(synthetic: PreparedCorpus) -> None:
    cls = builtin_class(synthetic, "other")
    with pytest.raises(NslmError, match="unknown metric 'nope'"):
        select_class(cls, synthetic.train, synthetic.valid, metrics=["nope"])
    with pytest.raises(NslmError, match="unknown PDF 'nope'"):
        select_class(cls, synthetic.train, synthetic.valid, pdfs=["nope"])
    empty = PreparedCorpus(synthetic.vocab, ("word", "day"), synthetic.splits)
    with pytest.raises(NslmError, match="empty vocabulary") as info:
        builtin_class(empty, "day")  # no 1..31 in this vocabulary
    assert "\n" not in str(info.value)
