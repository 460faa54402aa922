"""Sentence batches for the word+POS LMs: whole sentences, padded on the right.

A word+POS model reads one sentence at a time from a fresh state (docs/word-pos.md), so
a batch is ``B`` sentences of similar length, each laid out as

    position      0        1        …   n          (n = the sentence's words + <eos>)
    input    <bos>/<bos>  w1/t1     …   wn-1/tn-1
    target     w1/t1      w2/t2     …   <eos>/<eos>

Inputs at position ``i`` are the token before target ``i``: the target's own tag is never
an input at its position (the leak of Gill 2017, paper 003 §4, cannot happen by layout). The
*current* token's shape (``target_suffixes``/``target_shapes``) is there for the
discriminative tagger, which reads the word it tags. Padding has target −1 and is masked.

Sentences are sorted by length and cut into batches (little padding); the order of the
batches is shuffled per epoch with ``seed + epoch``, so a resumed run sees the same order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from nslm.word_pos.vocab import EncodedSentences, TaggedVocab

PAD = -1


@dataclass
class SentenceBatch:
    """(B, L) int64 arrays; ``targets_words == −1`` marks padding."""

    words: np.ndarray  # input word ids
    tags: np.ndarray  # input tag ids
    suffixes: np.ndarray  # input suffix ids
    shapes: np.ndarray  # input shape ids
    target_words: np.ndarray
    target_tags: np.ndarray
    target_suffixes: np.ndarray
    target_shapes: np.ndarray
    sentence_ids: np.ndarray  # (B,) index of each sentence in its split

    @property
    def mask(self) -> np.ndarray:
        return self.target_words >= 0

    @property
    def n_targets(self) -> int:
        return int(self.mask.sum())


def make_batch(encoded: EncodedSentences, vocab: TaggedVocab, ids: np.ndarray) -> SentenceBatch:
    """The batch of sentences ``ids`` (in that order)."""
    starts, ends = encoded.starts[ids], encoded.starts[ids + 1]
    width = int((ends - starts).max())
    shape = (len(ids), width)
    out = {k: np.full(shape, PAD, dtype=np.int64) for k in ("w", "t", "s", "h")}
    inp = {k: np.zeros(shape, dtype=np.int64) for k in ("w", "t", "s", "h")}
    inp["w"][:] = vocab.bos
    inp["t"][:] = vocab.tag_ids["<bos>"]
    for row, (start, end) in enumerate(zip(starts, ends, strict=True)):
        n = end - start
        for key, source in (
            ("w", encoded.words),
            ("t", encoded.tags),
            ("s", encoded.suffixes),
            ("h", encoded.shapes),
        ):
            out[key][row, :n] = source[start:end]
            inp[key][row, 1:n] = source[start : end - 1]
    return SentenceBatch(
        inp["w"],
        inp["t"],
        inp["s"],
        inp["h"],
        out["w"],
        out["t"],
        np.maximum(out["s"], 0),
        np.maximum(out["h"], 0),
        np.asarray(ids),
    )


def batch_plan(encoded: EncodedSentences, batch_size: int) -> list[np.ndarray]:
    """Sentence ids cut into batches of ``batch_size`` sentences of similar length."""
    order = np.argsort(encoded.lengths(), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def epoch_batches(
    encoded: EncodedSentences,
    vocab: TaggedVocab,
    batch_size: int,
    *,
    seed: int,
    epoch: int,
    start: int = 0,
) -> Iterator[tuple[int, SentenceBatch]]:
    """This epoch's batches in a shuffled order, from index ``start`` (a resumed epoch)."""
    plan = batch_plan(encoded, batch_size)
    order = np.random.default_rng(seed + epoch).permutation(len(plan))
    for index in range(start, len(plan)):
        yield index, make_batch(encoded, vocab, plan[order[index]])


def eval_batches(
    encoded: EncodedSentences, vocab: TaggedVocab, batch_size: int
) -> Iterator[SentenceBatch]:
    """Every sentence once, in length order (scores come back by ``sentence_ids``)."""
    for ids in batch_plan(encoded, batch_size):
        yield make_batch(encoded, vocab, ids)
