"""Scoring passes of the word+POS models over a split: the history with gold or own tags.

Every figure is aligned with the split's tokens (``EncodedSentences``), so the models'
perplexities are over the same test tokens, ``<eos>`` included:

- ``history="gold"``: the words and gold tags *before* each position are the input (the
  setting paper 003 meant). One batched forward pass.
- ``history="predicted"``: no gold tag at all. The model tags each word once it has scored
  it (greedy, P(t_t | w_≤t, t_<t)) and reads its own tag as history, position by position —
  what a user with raw text gets. For a model that reads no tags the two are the same pass.

Besides log P(w_t | h) (the marginal over tags), a pass gives log P(w_t, t_t | h) for the
gold tag where the model defines a joint, and the tag it predicts for every word.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from nslm.perplexity import perplexity
from nslm.word_pos.batches import SentenceBatch, eval_batches
from nslm.word_pos.model import READS_TAGS, PositionScores, WordPosLM, model_inputs
from nslm.word_pos.vocab import BOS, EncodedSentences, TaggedVocab

HISTORIES = ("gold", "predicted")


@dataclass
class TaggedScores:
    """Per-token figures of one split (N,) — NaN / −1 where the model has none."""

    word: np.ndarray  # log P(w_t | h), float64
    joint: np.ndarray  # log P(w_t, t_t | h) for the gold tag, float64
    predicted_tags: np.ndarray  # int64, −1 without a tagger
    gold_tags: np.ndarray
    unknown: np.ndarray  # bool: the word is an unknown signature
    eos: np.ndarray  # bool: the sentence end (no tag to predict)

    def word_perplexity(self) -> float:
        return perplexity(self.word)

    def joint_perplexity(self) -> float:
        return perplexity(self.joint)

    def tagger_accuracy(self, which: str = "all") -> float:
        """Accuracy of the predicted tags over the words (``all``, ``known``, ``unknown``)."""
        keep = ~self.eos & (self.predicted_tags >= 0)
        if which != "all":
            keep &= self.unknown if which == "unknown" else ~self.unknown
        if not keep.any():
            return math.nan
        return float((self.predicted_tags[keep] == self.gold_tags[keep]).mean())


def _positions(encoded: EncodedSentences, batch: SentenceBatch) -> tuple[np.ndarray, ...]:
    """(rows, cols, split positions) of the real targets of ``batch``."""
    rows, cols = np.nonzero(batch.mask)
    return rows, cols, encoded.starts[batch.sentence_ids[rows]] + cols


def _store(
    out: dict[str, np.ndarray], where: np.ndarray, scores: PositionScores, bos_tag: int
) -> np.ndarray | None:
    """Write ``scores`` at split positions ``where``; return the greedy tags (or None)."""
    if scores.word is not None:
        out["word"][where] = scores.word.double().cpu().numpy()
    if scores.joint is not None:
        out["joint"][where] = scores.joint.double().cpu().numpy()
    if scores.tag_posterior is None:
        return None
    posterior = scores.tag_posterior.clone()
    posterior[:, bos_tag] = -math.inf  # <bos> is an input, never a tag to predict
    tags = posterior.argmax(dim=-1).cpu().numpy()
    out["tags"][where] = tags
    return tags


@torch.no_grad()
def score_tagged(
    model: WordPosLM,
    encoded: EncodedSentences,
    vocab: TaggedVocab,
    *,
    history: str = "gold",
    batch_size: int = 64,
) -> TaggedScores:
    """The pass over every sentence of ``encoded`` with the given ``history``."""
    if history not in HISTORIES:
        raise ValueError(f"history is one of {HISTORIES}, not {history!r}")
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    n = encoded.n_tokens
    out = {
        "word": np.full(n, np.nan),
        "joint": np.full(n, np.nan),
        "tags": np.full(n, -1, dtype=np.int64),
    }
    bos_tag = vocab.tag_ids[BOS]
    sequential = history == "predicted" and model.kind in READS_TAGS
    for batch in eval_batches(encoded, vocab, batch_size):
        if sequential:
            _predicted_history(model, encoded, batch, out, bos_tag, device)
            continue
        h, _ = model(*model_inputs(model.kind, batch, device))
        mask = torch.from_numpy(batch.mask).to(device)
        words = torch.from_numpy(batch.target_words).to(device)[mask]
        tags = torch.from_numpy(batch.target_tags).to(device)[mask]
        _store(out, _positions(encoded, batch)[2], model.scores(h[mask], words, tags), bos_tag)
    model.train(was_training)
    unknown = np.array([vocab.is_unknown(i) for i in range(len(vocab.words))])
    return TaggedScores(
        out["word"],
        out["joint"],
        out["tags"],
        encoded.tags.copy(),
        unknown[encoded.words],
        encoded.words == vocab.eos,
    )


def _predicted_history(
    model: WordPosLM,
    encoded: EncodedSentences,
    batch: SentenceBatch,
    out: dict[str, np.ndarray],
    bos_tag: int,
    device: torch.device,
) -> None:
    """Step through ``batch`` one position at a time, feeding the model its own tags."""
    inputs = model_inputs(model.kind, batch, device)
    width = batch.words.shape[1]
    starts = encoded.starts[batch.sentence_ids]
    previous = torch.full((batch.words.shape[0],), bos_tag, dtype=torch.long, device=device)
    state = None
    for col in range(width):
        step = [x[:, col : col + 1] for x in inputs]
        step[1] = previous[:, None]  # the tag input: the model's own tag of the last word
        h, state = model(*step, state)
        live = np.nonzero(batch.mask[:, col])[0]
        words = torch.from_numpy(batch.target_words[live, col]).to(device)
        tags = torch.from_numpy(batch.target_tags[live, col]).to(device)
        scores = model.scores(h[live, 0], words, tags)
        predicted = _store(out, starts[live] + col, scores, bos_tag)
        if predicted is not None:
            previous[torch.from_numpy(live).to(device)] = torch.from_numpy(predicted).to(device)


def most_frequent_tag_accuracy(
    train: EncodedSentences, test: EncodedSentences, n_tags: int
) -> float:
    """The baseline tagger: each word's most frequent train tag (the vocabulary's words and
    unknown signatures, as every model sees them), the overall most frequent for a word
    never seen in train. Over the words of ``test`` (``<eos>`` excluded)."""
    counts = np.zeros((int(max(train.words.max(), test.words.max())) + 1, n_tags))
    np.add.at(counts, (train.words, train.tags), 1.0)
    overall = int(np.bincount(train.tags, minlength=n_tags).argmax())
    best = np.where(counts.sum(axis=1) > 0, counts.argmax(axis=1), overall)
    words = np.ones(test.n_tokens, dtype=bool)
    words[test.starts[1:] - 1] = False  # the <eos> ending each sentence
    return float((best[test.words[words]] == test.tags[words]).mean())


def split_figures(
    model: WordPosLM,
    vocab: TaggedVocab,
    train: EncodedSentences,
    part: EncodedSentences,
    name: str,
    *,
    batch_size: int = 64,
) -> dict[str, float | None]:
    """The comparison of docs/word-pos.md on one split, keys prefixed ``{name}_``:
    word perplexity with gold previous tags and with the model's own, joint perplexity (None
    where the model defines no joint), the tagger's accuracy on all, known and unknown words,
    the most-frequent-tag baseline, and the unknown-word rate."""
    gold = score_tagged(model, part, vocab, history="gold", batch_size=batch_size)
    out: dict[str, float | None] = {}
    predicted = gold
    if model.kind in READS_TAGS:
        predicted = score_tagged(model, part, vocab, history="predicted", batch_size=batch_size)
    if model.kind != "tagger":
        out[f"{name}_word_ppl_gold_prev_tags"] = gold.word_perplexity()
        out[f"{name}_word_ppl_predicted_tags"] = predicted.word_perplexity()
        joint = model.kind in ("joint", "eq11")
        out[f"{name}_joint_ppl"] = gold.joint_perplexity() if joint else None
    if model.kind in READS_TAGS:
        for which in ("all", "known", "unknown"):
            key = f"{name}_tagger_acc" + ("" if which == "all" else f"_{which}")
            out[key] = predicted.tagger_accuracy(which)
    out[f"{name}_tagger_mft_baseline_acc"] = most_frequent_tag_accuracy(
        train, part, len(vocab.tags)
    )
    out[f"{name}_unknown_rate"] = float(gold.unknown[~gold.eos].mean())
    return out
