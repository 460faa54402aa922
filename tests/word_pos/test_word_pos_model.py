"""The word+POS models: no leak of the target's tag, normalised distributions, Eq. 12's α."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.word_pos.batches import epoch_batches, eval_batches
from nslm.word_pos.model import (
    EQ12_ALPHA,
    KINDS,
    WordPosLM,
    WordPosSizes,
    _tag_given_word,
    eq12_alpha,
    model_inputs,
)
from nslm.word_pos.scores import most_frequent_tag_accuracy, score_tagged
from nslm.word_pos.vocab import TaggedVocab, unk_signature

CPU = torch.device("cpu")


def _toy(seed: int = 0, size: int = 25):
    rng = np.random.default_rng(seed)
    lexicon = {f"w{i}": ("N" if i % 3 else "V") for i in range(40)}
    lexicon.update({"walking": "V", "Paris": "N", "the": "D"})
    names = sorted(lexicon)
    words = [
        [names[j] for j in rng.integers(len(names), size=rng.integers(1, 9))] for _ in range(60)
    ]
    tags = [[lexicon[w] for w in s] for s in words]
    vocab = TaggedVocab.build(words, ["D", "N", "V"], size=size)
    return vocab, vocab.encode(words, tags)


def _model(kind: str, vocab: TaggedVocab, encoded, seed: int = 0) -> WordPosLM:
    torch.manual_seed(seed)
    counts = torch.tensor(vocab.tag_given_word_counts(encoded))
    sizes = WordPosSizes(
        len(vocab.words),
        len(vocab.tags),
        len(vocab.suffixes),
        emb_size=8,
        tag_emb_size=4,
        shape_emb_size=4,
        hidden_size=12,
    )
    model = WordPosLM(kind, sizes, counts)
    # a few steps, so the heads and M are not at their start values
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _, batch in epoch_batches(encoded, vocab, 16, seed=0, epoch=0):
        h, _ = model(*model_inputs(kind, batch, CPU))
        mask = torch.from_numpy(batch.mask)
        words = torch.from_numpy(batch.target_words)[mask]
        loss, _ = model.loss(h[mask], words, torch.from_numpy(batch.target_tags)[mask])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.parametrize("kind", ["word_only", "joint", "eq11", "multitask"])
def test_the_target_tag_never_reaches_its_own_word_probability(kind: str) -> None:
    vocab, encoded = _toy()
    model = _model(kind, vocab, encoded)
    before = score_tagged(model, encoded, vocab, history="gold").word
    sentence = int(np.argmax(encoded.lengths()))
    start, end = encoded.starts[sentence], encoded.starts[sentence + 1]
    for k in range(start, end - 1):  # each target position of the longest sentence
        changed = encoded.tags.copy()
        changed[k] = vocab.tag_ids["D"] if changed[k] != vocab.tag_ids["D"] else vocab.tag_ids["N"]
        permuted = type(encoded)(
            encoded.words, changed, encoded.suffixes, encoded.shapes, encoded.starts
        )
        after = score_tagged(model, permuted, vocab, history="gold").word
        # the word at k and every word before it in the sentence: unchanged to the bit
        np.testing.assert_array_equal(after[start : k + 1], before[start : k + 1])
        if kind in ("joint", "eq11"):  # while it does reach the next word: a live input
            assert after[k + 1] != before[k + 1]


def _all_pairs(model: WordPosLM, vocab: TaggedVocab, h: torch.Tensor):
    """log P(w | h) for every w, and log P(w, t | h) for every (w, t) with t a real tag."""
    n_words = len(vocab.words)
    real_tags = [i for i, t in enumerate(vocab.tags) if t != "<bos>"]
    words = torch.arange(n_words)
    marginal = model.scores(h.expand(n_words, -1), words, words * 0).word
    joint = torch.stack(
        [
            model.scores(h.expand(n_words, -1), words, torch.full_like(words, t)).joint
            for t in range(len(vocab.tags))
        ]
    )
    return marginal, joint, real_tags


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["joint", "eq11"]), st.integers(0, 10_000))
def test_joint_and_marginal_sum_to_one(kind: str, seed: int) -> None:
    vocab, encoded = _toy()
    model = _model(kind, vocab, encoded)
    torch.manual_seed(seed)
    h = torch.randn(1, model.sizes.hidden_size)
    with torch.no_grad():
        marginal, joint, _ = _all_pairs(model, vocab, h)
    assert float(marginal.exp().sum()) == pytest.approx(1.0, abs=1e-5)
    assert float(joint.exp().sum()) == pytest.approx(1.0, abs=1e-5)
    # the marginal is the joint summed over tags
    np.testing.assert_allclose(joint.logsumexp(0).numpy(), marginal.numpy(), atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 5), st.integers(0, 10_000))
def test_eq12_alpha_is_two_by_brute_force(n_words: int, n_tags: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    word_probs = torch.rand(n_words, generator=gen).double().softmax(0)
    counts = torch.randint(0, 4, (n_words, n_tags), generator=gen).double()
    tag_probs = torch.rand(n_tags, generator=gen).double().softmax(0)
    alpha = eq12_alpha(word_probs, _tag_given_word(counts).double(), tag_probs)
    assert alpha == pytest.approx(EQ12_ALPHA, abs=1e-6)


def test_eq11_word_probability_is_the_word_head_alone() -> None:
    vocab, encoded = _toy()
    model = _model("eq11", vocab, encoded)
    batch = next(iter(eval_batches(encoded, vocab, 8)))
    with torch.no_grad():
        h, _ = model(*model_inputs("eq11", batch, CPU))
        mask = torch.from_numpy(batch.mask)
        words = torch.from_numpy(batch.target_words)[mask]
        scores = model.scores(h[mask], words, torch.from_numpy(batch.target_tags)[mask])
        head = torch.log_softmax(model.word_logits(h[mask]), -1).gather(1, words[:, None])[:, 0]
    torch.testing.assert_close(scores.word, head)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_scores_every_token_once(kind: str) -> None:
    vocab, encoded = _toy()
    model = _model(kind, vocab, encoded)
    gold = score_tagged(model, encoded, vocab, history="gold")
    predicted = score_tagged(model, encoded, vocab, history="predicted")
    if kind != "tagger":
        assert np.isfinite(gold.word).all() and np.isfinite(predicted.word).all()
    if kind in ("joint", "eq11", "tagger"):
        tags = predicted.predicted_tags[~predicted.eos]
        assert (tags >= 0).all() and (tags != vocab.tag_ids["<bos>"]).all()
        assert 0.0 <= predicted.tagger_accuracy() <= 1.0
    if kind in ("word_only", "multitask"):  # no tag input: the two histories agree
        np.testing.assert_array_equal(gold.word, predicted.word)


def test_most_frequent_tag_baseline_on_its_own_train_set() -> None:
    vocab, encoded = _toy(size=100)
    # every toy word has one tag and all are in the vocabulary: the baseline is always right
    assert most_frequent_tag_accuracy(encoded, encoded, len(vocab.tags)) == 1.0


@pytest.mark.parametrize(
    ("word", "signature"),
    [
        ("walking", "<unk-ing>"),
        ("Paris", "<unk-Cap-s>"),
        ("Oslo", "<unk-Cap>"),
        ("NASA", "<unk-CAPS>"),
        ("1,000", "<unk-num>"),
        ("well-known", "<unk-dash>"),
        ("Re-running", "<unk-Cap-dash-ing>"),
        ("is", "<unk>"),
    ],
)
def test_unknown_signatures(word: str, signature: str) -> None:
    assert unk_signature(word) == signature


def test_an_unseen_signature_backs_off() -> None:
    vocab = TaggedVocab.build([["a", "a", "b", "walking"]], ["X"], size=3)
    assert "<unk-ing>" in vocab.words
    assert vocab.words[vocab.word_id("talking")] == "<unk-ing>"
    assert vocab.words[vocab.word_id("Re-talking")] == "<unk>"  # no -Cap… signature in train
