"""Modified Kneser-Ney: hand-worked probabilities, closed-form discounts, KenLM parity."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ngram_corpora import lines_stream
from nslm.errors import NslmError
from nslm.ngram.build import build_model, raw_lines, raw_stream, raw_vocabulary

# Toy corpus: sentences "a b", "a c", "b a"; vocabulary <unk> (never seen), a, b, c, </s>, <s>.
TOY = ["a b", "a c", "b a"]
FIXED = [[0.5, 1.0, 1.5]] * 3  # explicit D1, D2, D3+ keep the hand arithmetic simple

# Unigram adjusted counts = distinct left neighbours (<s> counts as a word):
#   a: {<s>, b} = 2   b: {a, <s>} = 2   c: {a} = 1   </s>: {b, c, a} = 3   <unk>: 0   → Σ = 8
# Discount mass 1.0 + 1.0 + 0.5 + 1.5 = 4 → γ(ε) = 4/8 = 0.5, spread over |V| − 1 = 5 types.
P1 = {
    "a": (2 - 1.0) / 8 + 0.5 / 5,  # 0.225
    "b": (2 - 1.0) / 8 + 0.5 / 5,  # 0.225
    "c": (1 - 0.5) / 8 + 0.5 / 5,  # 0.1625
    "</s>": (3 - 1.5) / 8 + 0.5 / 5,  # 0.2875
    "<unk>": 0.5 / 5,  # 0.1: only the uniform share (lmplz's leftover mass)
}


def _prob(model, history: list[str], word: str) -> float:
    dist = model.distribution([model.stoi[w] for w in history])
    return float(dist[model.stoi[word]])


def test_unigram_level_matches_hand_values() -> None:
    model = build_model(lines_stream(TOY), 2, discounts=FIXED)
    uni = np.power(10.0, model.log10_prob[0])
    for word, expected in P1.items():
        assert uni[model.stoi[word]] == pytest.approx(expected, abs=1e-12)
    assert uni[model.bos_id] == 0.0
    assert uni.sum() == pytest.approx(1.0, abs=1e-12)


def test_bigram_probabilities_match_hand_values() -> None:
    model = build_model(lines_stream(TOY), 2, discounts=FIXED)
    # Context <s>: children a (raw 2), b (raw 1); Σ = 3; γ = (1.0 + 0.5) / 3 = 0.5
    assert _prob(model, [], "a") == pytest.approx((2 - 1.0) / 3 + 0.5 * P1["a"], abs=1e-12)
    assert _prob(model, [], "b") == pytest.approx((1 - 0.5) / 3 + 0.5 * P1["b"], abs=1e-12)
    assert _prob(model, [], "c") == pytest.approx(0.5 * P1["c"], abs=1e-12)
    # Context a: children b, c, </s> (1 each); Σ = 3; γ = 1.5 / 3 = 0.5
    assert _prob(model, ["a"], "b") == pytest.approx(0.5 / 3 + 0.5 * P1["b"], abs=1e-12)
    assert _prob(model, ["a"], "a") == pytest.approx(0.5 * P1["a"], abs=1e-12)
    # Context b: children </s>, a; Σ = 2; γ = 1.0 / 2 = 0.5
    assert _prob(model, ["b"], "a") == pytest.approx(0.5 / 2 + 0.5 * P1["a"], abs=1e-12)
    assert _prob(model, ["b"], "<s>") == 0.0


def test_trigram_uses_continuation_counts_in_the_middle() -> None:
    model = build_model(lines_stream(TOY), 3, discounts=FIXED)
    # Bigram adjusted counts: <s> a = 2, <s> b = 1 (raw: start with <s>); the others are
    # continuation counts, 1 each (a b, a c, b a have left neighbour <s>; b </s>, c </s>,
    # a </s> have a, a, b). Context a: b, c, </s> → p2(b | a) = 0.5/3 + 0.5·p1(b).
    p2_b_a = 0.5 / 3 + 0.5 * P1["b"]
    # Context "<s> a": trigram children b, c (raw 1 each); Σ = 2; γ = 0.5.
    p3 = 0.5 / 2 + 0.5 * p2_b_a
    assert _prob(model, ["a"], "b") == pytest.approx(p3, abs=1e-12)
    # Context "a b": child </s>; Σ = 1; γ = 0.5. p2(</s> | b) = 0.5/2 + 0.5·p1(</s>).
    p2_eos_b = 0.5 / 2 + 0.5 * P1["</s>"]
    p3_eos = 0.5 / 1 + 0.5 * p2_eos_b
    p_a_start = (2 - 1.0) / 3 + 0.5 * P1["a"]
    # the scorer (backoff walk over sorted arrays) gives the same numbers
    stream = lines_stream(TOY)
    ids = np.array([stream.itos.index(t) for t in ("a", "b", "</s>", "c", "a", "</s>")])
    got = model.score_ids(ids, first_nan=False)
    # "c a": <s> c unseen → γ(<s>)·p1(c); then "<s> c" is no context, c's children: </s>
    # only (Σ = 1, γ = 0.5) → 0.5·p1(a).
    expected = [p_a_start, p3, p3_eos, 0.5 * P1["c"], 0.5 * P1["a"]]
    np.testing.assert_allclose(np.exp(got[:5]), expected, rtol=1e-12)


# Discount corpus, counted by hand. Sentences: "a b" ×4, "c b" ×3, "d b" ×2, "e b",
# "a c", "d c", "a d", "e d", "c d", "b e".
DISCOUNT_LINES = ["a b"] * 4 + ["c b"] * 3 + ["d b"] * 2 + ["e b", "a c", "d c", "a d"]
DISCOUNT_LINES += ["e d", "c d", "b e"]
# Bigrams (highest order: raw counts):
#   <s> a 6, <s> c 4, <s> d 3, <s> e 2, <s> b 1, a b 4, c b 3, d b 2, e b 1, b </s> 10,
#   a c 1, c </s> 2, d c 1, a d 1, d </s> 3, e d 1, c d 1, b e 1, e </s> 1
BIGRAM_N = {1: 9, 2: 3, 3: 3, 4: 2}
# Unigrams (distinct left neighbours): a {<s>} 1, e {<s>, b} 2, c {<s>, a, d} 3,
#   d {<s>, a, e, c} 4, </s> {b, c, d, e} 4, b {<s>, a, c, d, e} 5
UNIGRAM_N = {1: 1, 2: 1, 3: 1, 4: 2}


def _closed_form(n: dict[int, int]) -> list[float]:
    y = n[1] / (n[1] + 2 * n[2])
    return [k - (k + 1) * y * n[k + 1] / n[k] for k in (1, 2, 3)]


def test_discounts_follow_the_count_of_counts_formula() -> None:
    model = build_model(lines_stream(DISCOUNT_LINES), 2)
    assert model.meta["count_of_counts"][0] == [UNIGRAM_N[k] for k in (1, 2, 3, 4)]
    assert model.meta["count_of_counts"][1] == [BIGRAM_N[k] for k in (1, 2, 3, 4)]
    # by hand: unigrams Y = 1/3 → D = 1/3, 1, 1/3; bigrams Y = 0.6 → D = 0.6, 0.2, 1.4
    assert _closed_form(UNIGRAM_N) == pytest.approx([1 / 3, 1.0, 1 / 3])
    assert _closed_form(BIGRAM_N) == pytest.approx([0.6, 0.2, 1.4])
    np.testing.assert_allclose(model.meta["discounts"][0], _closed_form(UNIGRAM_N), rtol=1e-12)
    np.testing.assert_allclose(model.meta["discounts"][1], _closed_form(BIGRAM_N), rtol=1e-12)


def test_too_small_corpus_needs_fallback_discounts() -> None:
    with pytest.raises(NslmError, match="discount"):
        build_model(lines_stream(TOY), 2)
    model = build_model(lines_stream(TOY), 2, discount_fallback=(0.5, 1.0, 1.5))
    assert model.meta["discounts"][1] == [0.5, 1.0, 1.5]


@pytest.mark.parametrize("order", [0, 10, -1])
def test_bad_order_is_an_error(order: int) -> None:
    with pytest.raises(NslmError, match="between 1 and 9"):
        build_model(lines_stream(DISCOUNT_LINES), order)


def test_empty_corpus_is_an_error() -> None:
    with pytest.raises(NslmError, match="empty"):
        build_model(lines_stream([]), 2)


@pytest.mark.realdata
@pytest.mark.slow
def test_raw_wikitext_matches_kenlm_lmplz(data_dir) -> None:
    """lmplz -o 3 on the raw WikiText-2 stream gives test perplexity 230.89 (BENCHMARKS.md)."""
    from nslm.data import locate_corpus

    paths = locate_corpus("wikitext-2")
    train = raw_lines(paths["train"])
    itos, unk = raw_vocabulary(train)
    model = build_model(raw_stream(train, itos, unk), 3)
    test = raw_stream(raw_lines(paths["test"]), itos, unk)
    log_probs = model.score_ids(test.ids, first_nan=False)
    assert len(log_probs) == 244_102
    assert math.exp(-log_probs.mean()) == pytest.approx(230.89, rel=0.01)
