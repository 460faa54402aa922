"""The spelling model of nslm.scores.spelling: a proper distribution over all finite byte
strings, and over the strings outside a vocabulary V; its parameters as JSON."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data.locate import locate_corpus
from nslm.data.textfile import read_text
from nslm.scores.spelling import BEGIN, END, SYMBOLS, SpellingModel

TYPES = ["cat", "cart", "carts", "café", "naïve", "1984", "2001", "x-ray", "Ölfen", "ab"]
MAX_LENGTH = 2  # every byte string up to this length is enumerated: 1 + 256 + 256² strings


def all_byte_strings(max_length: int) -> list[bytes]:
    return [
        bytes(s) for n in range(max_length + 1) for s in itertools.product(range(256), repeat=n)
    ]


def tail_mass(model: SpellingModel, log_probs: np.ndarray, strings: list[bytes]) -> float:
    """P(a string goes on past MAX_LENGTH bytes), from ``log_probs``, P of every byte string up
    to MAX_LENGTH (``strings``): a string s of length MAX_LENGTH was ended with P(end | s), so
    it stands for P(s) / P(end | s) of prefix mass, of which the share 1 − P(end | s) goes on.
    For an order-2 model P(end | s) depends on s's last byte only: 256 conditionals, not 256²."""
    assert model.order == 2
    end_after = np.array([model.next_distribution(bytes([b]))[END] for b in range(256)])
    longest = [i for i, s in enumerate(strings) if len(s) == MAX_LENGTH]
    last_bytes = np.array([strings[i][-1] for i in longest])
    tail = np.exp(log_probs[longest]) * (1.0 / end_after[last_bytes] - 1.0)
    return math.fsum(tail.tolist())


def total(log_probs: np.ndarray) -> float:
    return math.fsum(np.exp(log_probs).tolist())


@pytest.fixture(scope="module")
def order2() -> SpellingModel:
    return SpellingModel.fit(TYPES, order=2)


@pytest.fixture(scope="module")
def universe() -> list[bytes]:
    return all_byte_strings(MAX_LENGTH)


def test_all_strings_up_to_a_length_and_the_tail_sum_to_one(order2, universe) -> None:
    log_probs = order2.log_prob(universe)
    assert total(log_probs) + tail_mass(order2, log_probs, universe) == pytest.approx(1, abs=1e-9)


def test_every_conditional_sums_to_one_and_can_end() -> None:
    model = SpellingModel.fit(TYPES, order=4)
    # every seen context as the token prefix it stands for, and prefixes never seen
    prefixes = {bytes(s for s in ngram[:-1] if s != BEGIN) for ngram in model.ngrams}
    prefixes |= {b"", b"\xff\xfe\x00", b"zzzz", "carté".encode()}
    for prefix in prefixes:
        probs = model.next_distribution(prefix)
        assert probs.shape == (SYMBOLS,)
        assert math.fsum(probs.tolist()) == pytest.approx(1.0, abs=1e-12)
        assert probs[END] > 0 and probs.min() > 0


def test_log_prob_is_the_product_of_the_conditionals() -> None:
    model = SpellingModel.fit(TYPES, order=3)
    for token in ["cart", "", "Ölfen", "zq", "1985"]:
        data = token.encode()
        steps = [model.next_distribution(data[:i])[s] for i, s in enumerate((*data, END))]
        assert model.log_prob([token])[0] == pytest.approx(np.log(steps).sum(), rel=1e-12)


def test_untrained_model_is_uniform_over_symbols() -> None:
    model = SpellingModel.fit([])
    assert model.log_prob(["abc"])[0] == pytest.approx(-4 * math.log(SYMBOLS), rel=1e-12)


def test_fit_counts_each_type_once_in_any_order() -> None:
    once = SpellingModel.fit(TYPES).get_params()
    assert SpellingModel.fit(TYPES[::-1] + TYPES + ["cat"]).get_params() == once


def test_outside_vocab_is_proper_and_excludes_v(order2, universe) -> None:
    vocab = ["a", "ab", "é"]  # each at most MAX_LENGTH bytes, so the tail holds no member of V
    outside = order2.outside(vocab)
    assert order2.vocab is None  # the fitted model is left as it was
    assert np.all(outside.log_prob_outside(vocab) == -np.inf)
    assert np.all(outside.log_prob_outside([s.encode() for s in vocab]) == -np.inf)
    log_probs = outside.log_prob_outside(universe)
    assert np.isfinite(log_probs).sum() == len(universe) - len(vocab)
    # past MAX_LENGTH no string is in V: the tail is P's, divided by 1 − Σ_V P as every term
    tail = tail_mass(order2, order2.log_prob(universe), universe)
    tail_outside = tail / math.exp(outside.log_mass_outside)
    assert total(log_probs) + tail_outside == pytest.approx(1.0, abs=1e-9)
    mass_in = total(order2.log_prob(vocab))
    assert outside.log_mass_outside == pytest.approx(math.log1p(-mass_in), rel=1e-15)


def test_log_prob_outside_needs_v() -> None:
    with pytest.raises(ValueError, match="outside"):
        SpellingModel.fit(TYPES).log_prob_outside(["cat"])


@settings(max_examples=60, deadline=None)
@given(
    types=st.lists(st.text(max_size=12), max_size=20),
    query=st.text(max_size=30) | st.binary(max_size=30),
    order=st.integers(1, 5),
)
def test_log_prob_is_finite_and_at_most_zero(types, query, order) -> None:
    log_prob = SpellingModel.fit(types, order=order).log_prob([query])[0]
    assert np.isfinite(log_prob) and log_prob <= 0


def test_params_round_trip_exactly() -> None:
    queries = ["cat", "carté", "", "2027", b"\xff"]
    for model in (SpellingModel.fit(TYPES), SpellingModel.fit(TYPES, 3).outside(["cat", "dog"])):
        params = model.get_params()
        again = SpellingModel.from_params(json.loads(json.dumps(params)))
        assert again.get_params() == params
        assert np.array_equal(again.log_prob(queries), model.log_prob(queries))
    assert np.array_equal(again.log_prob_outside(queries), model.log_prob_outside(queries))


@pytest.mark.realdata
def test_wikitext2_rare_types_spell_like_words(data_dir: Path) -> None:
    train = read_text(locate_corpus(data_dir / "wikitext-2")["train"]).split()
    counts = Counter(train)
    # WikiText-2 has no hapaxes (words seen under 3 times are <unk>): its rarest types stand in
    fewest = min(counts.values())
    rare = [token for token, n in counts.items() if n == fewest]
    model = SpellingModel.fit(rare).outside(counts)
    word = "Zanzibarian"
    assert word not in counts
    rng = np.random.default_rng(0)
    noise = ["".join(map(chr, rng.integers(33, 127, len(word)))) for _ in range(100)]
    scores = model.log_prob_outside([word, *noise])
    assert scores[0] > scores[1:].max()
    year, garbled = model.log_prob(["2027", "2@x7"])
    assert year > garbled
