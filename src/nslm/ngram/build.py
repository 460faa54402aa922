"""Turn a corpus into the id stream the n-gram code counts, and build a model from it.

Three streams are supported:

* **prepared** (default): the prepared corpus's token ids, with ``<eos>`` as ``</s>``. Every
  line is a sentence, including empty ones (a lone ``<eos>``), so the scores line up with the
  evaluator's per-position arrays.
* **tagged**: the prepared stream with every class token replaced by its class tag
  (``<year>``, ``<city>``, …), in history and target alike. Scored on this stream the model
  gives P(class tag | history): the class probability an n-gram NSLM multiplies with a
  micro-model (paper Eq. 4).
* **raw**: the original WikiText text as KenLM's ``lmplz`` reads it: each line stripped and
  split on whitespace, empty lines dropped, ``<s>``/``</s>`` around every line, ``<unk>`` an
  ordinary word. The vocabulary also holds lmplz's reserved, never-seen unknown word (count 0,
  so it only gets the uniform share of the unigram level); it is named ``<unk>`` unless the
  corpus itself uses ``<unk>`` as a word, in which case it is ``<oov>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.textfile import read_text
from nslm.data.vocab import EOS as CORPUS_EOS
from nslm.errors import NslmError
from nslm.ngram.counting import check_order, count_ngrams, with_sentence_starts
from nslm.ngram.kneser_ney import estimate_kneser_ney
from nslm.ngram.model import BOS, EOS, NgramModel
from nslm.ngram.simple import estimate_simple

METHODS = ("kn", "mle", "add-k")


@dataclass
class Stream:
    """Token ids (``</s>`` ends each sentence) over a vocabulary without ``<s>``."""

    ids: np.ndarray
    itos: list[str]
    eos_id: int
    unk_id: int


def prepared_vocabulary(corpus: PreparedCorpus, tagged: bool = False) -> list[str]:
    itos = [EOS if t == CORPUS_EOS else t for t in corpus.vocab.itos]
    if tagged:
        itos += [f"<{name}>" for name in corpus.class_names[1:]]
    return itos


def prepared_stream(corpus: PreparedCorpus, split: str | Split, tagged: bool = False) -> Stream:
    """The prepared split as a stream; with ``tagged``, class tokens become their tags."""
    sp = corpus.splits[split] if isinstance(split, str) else split
    ids = sp.token_ids.astype(np.int64)
    itos = prepared_vocabulary(corpus, tagged)
    if tagged:
        cls = sp.class_ids.astype(np.int64)
        # tag id of class c (c ≥ 1) is len(vocab) + c − 1
        ids = np.where(cls > 0, len(corpus.vocab) + cls - 1, ids)
    eos = corpus.vocab.stoi[CORPUS_EOS]
    return Stream(ids=ids, itos=itos, eos_id=eos, unk_id=corpus.vocab.unk_id)


def raw_lines(path: Path) -> list[list[str]]:
    """lmplz's reading of a text file: stripped, whitespace-split, empty lines dropped."""
    text = read_text(path)
    return [line.split() for line in text.split("\n") if line.strip()]


def raw_vocabulary(train_lines: list[list[str]]) -> tuple[list[str], int]:
    """Train types in first-seen order, then ``</s>`` and the reserved unknown word."""
    seen: dict[str, None] = {}
    for line in train_lines:
        seen.update(dict.fromkeys(line))
    for special in (BOS, EOS):
        if special in seen:
            raise NslmError(f"the corpus contains the reserved token {special}")
    itos = [*seen, EOS]
    reserved = "<oov>" if "<unk>" in seen else "<unk>"
    itos.append(reserved)
    return itos, len(itos) - 1


def raw_stream(lines: list[list[str]], itos: list[str], unk_id: int) -> Stream:
    stoi = {s: i for i, s in enumerate(itos)}
    eos = stoi[EOS]
    flat: list[int] = []
    for line in lines:
        flat.extend(stoi.get(t, unk_id) for t in line)
        flat.append(eos)
    return Stream(ids=np.asarray(flat, dtype=np.int64), itos=itos, eos_id=eos, unk_id=unk_id)


def build_model(
    stream: Stream,
    order: int,
    method: str = "kn",
    *,
    add_k: float = 1.0,
    discounts: list[list[float]] | None = None,
    discount_fallback: tuple[float, float, float] | None = None,
) -> NgramModel:
    """Count and estimate an n-gram model of ``order`` over ``stream``.

    ``method`` is ``kn`` (interpolated modified Kneser-Ney), ``mle`` or ``add-k``.
    """
    check_order(order)
    if method not in METHODS:
        raise NslmError(f"unknown n-gram method {method!r}; choose one of {', '.join(METHODS)}")
    if stream.ids.size == 0:
        raise NslmError("cannot build an n-gram model from an empty corpus")
    itos = [*stream.itos, BOS]
    bos = len(itos) - 1
    ext = with_sentence_starts(stream.ids, stream.eos_id, bos)
    counts = count_ngrams(ext, order, len(itos), bos, stream.eos_id)
    if method == "kn":
        model = estimate_kneser_ney(
            counts,
            discounts=discounts,
            fallback=discount_fallback,
            itos=itos,
            unk_id=stream.unk_id,
        )
    elif method == "mle":
        model = estimate_simple(counts, add_k=None, itos=itos, unk_id=stream.unk_id)
    else:
        if add_k <= 0:
            raise NslmError(f"add-k needs k > 0, got {add_k}")
        model = estimate_simple(counts, add_k=add_k, itos=itos, unk_id=stream.unk_id)
    model.meta["train_tokens"] = counts.n_tokens
    model.meta["ngrams"] = model.sizes()
    return model


def score_split(
    model: NgramModel, corpus: PreparedCorpus, split: str, *, tagged: bool | None = None
) -> np.ndarray:
    """The evaluator's array for a prepared split: natural-log P(w_t | history) per position,
    NaN at position 0, aligned with ``corpus.splits[split].token_ids``.

    Works for any :class:`NgramModel` (built here or read from ARPA): tokens are matched by
    string, ``<eos>`` as ``</s>``, unknown ones as the model's unknown word. ``tagged``
    (default: how the model was built) scores the class-tagged stream, giving
    log P(class tag | history) at class positions.
    """
    if tagged is None:
        tagged = model.meta.get("stream") == "tagged"
    stream = prepared_stream(corpus, split, tagged=tagged)
    ids = model.map_vocabulary(stream.itos, eos_token=EOS)[stream.ids]
    return model.score_ids(ids)
