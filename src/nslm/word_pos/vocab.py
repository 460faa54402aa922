"""The vocabulary of the word+POS LMs, word shapes, and the encoding of tagged sentences.

Every word+POS model (word-only, factorised joint, Eq. 11, multi-task, the discriminative
tagger; docs/word-pos.md) shares this vocabulary, so their perplexities are comparable:

- **Words.** The ``size − 1`` most frequent train words, case kept, as in Gill (2017, paper
  003 §2: 9,999 words + ``<unk>``). A word outside them becomes an *unknown signature*
  rather than one ``<unk>``: ``<unk>`` plus its shape (``-Cap``/``-CAPS``, ``-num`` for a
  digit, ``-dash`` for a hyphen) and a known suffix (``-ing``, ``-ed``, ``-s``, …), e.g.
  ``<unk-Cap-ing>``. Only signatures seen in train are kept; an unseen one backs off (the
  suffix first, then the shape) to ``<unk>``. So a model that generates words generates the
  shape of an unknown one too, and P(w | tag, h) still tells an unknown noun from an
  unknown verb. Each signature is one vocabulary entry: its probability is that of the
  whole set of unknown words with that shape, as ``<unk>``'s is in any closed-vocabulary LM.
- **Sentence ends.** Each sentence ends with ``<eos>`` (tag ``<eos>``), scored like a word;
  ``<bos>`` (tag ``<bos>``) is the input before the first word and is never a target.
- **Shape inputs** for every token: its capitalisation × digit × hyphen class
  (:func:`shape_id`, 16 values) and its last three letters, lower-cased (train suffixes seen
  at least :data:`MIN_SUFFIX_COUNT` times; id 0 for any other).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.errors import NslmError

EOS, BOS, UNK = "<eos>", "<bos>", "<unk>"
SUFFIXES = (
    "ness",
    "ment",
    "able",
    "ible",
    "less",
    "ship",
    "ing",
    "ion",
    "est",
    "ive",
    "ity",
    "ous",
    "ful",
    "ism",
    "ist",
    "ize",
    "ed",
    "ly",
    "er",
    "al",
    "ic",
    "es",
    "s",
    "y",
)
MIN_SUFFIX_COUNT = 5
N_SHAPES = 16
OTHER_SUFFIX = "<other>"


def _caps(word: str) -> str:
    letters = [c for c in word if c.isalpha()]
    if not letters:
        return ""
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return "CAPS"
    return "Cap" if word[0].isupper() else ""


def shape_id(word: str) -> int:
    """Capitalisation (no letter, lower, Cap, CAPS) × has a digit × has a hyphen: 0..15."""
    letters = any(c.isalpha() for c in word)
    caps = {"": 1 if letters else 0, "Cap": 2, "CAPS": 3}[_caps(word)]
    digit = any(c.isdigit() for c in word)
    return caps * 4 + 2 * digit + ("-" in word)


def unk_signature(word: str) -> str:
    """The unknown-word class of ``word``: ``<unk>`` plus its shape and suffix."""
    parts = [_caps(word)] if _caps(word) else []
    if any(c.isdigit() for c in word):
        parts.append("num")
    if "-" in word:
        parts.append("dash")
    lower = word.lower()
    for suffix in SUFFIXES:  # longest first, so "-ness" wins over "-s"
        if lower.endswith(suffix) and len(lower) >= len(suffix) + 3:
            parts.append(suffix)
            break
    return "<unk" + "".join(f"-{p}" for p in parts) + ">"


def _backoffs(signature: str) -> list[str]:
    """``<unk-Cap-dash-ing>`` → itself, without its last part, …, ``<unk>``."""
    parts = signature[1:-1].split("-")
    return ["<" + "-".join(parts[:n]) + ">" for n in range(len(parts), 0, -1)]


@dataclass
class EncodedSentences:
    """Sentences as flat id arrays, each sentence followed by ``<eos>``.

    Sentence ``k`` is ``[starts[k], starts[k + 1])``; its last token is ``<eos>``.
    """

    words: np.ndarray  # (N,) int64 word ids
    tags: np.ndarray  # (N,) int64 tag ids
    suffixes: np.ndarray  # (N,) int64 suffix ids
    shapes: np.ndarray  # (N,) int64 shape ids
    starts: np.ndarray  # (S + 1,) int64 offsets

    def __len__(self) -> int:
        return len(self.starts) - 1

    @property
    def n_tokens(self) -> int:
        return int(self.starts[-1])

    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)


@dataclass
class TaggedVocab:
    """Words (with unknown signatures), tags and suffixes, each an ordered list of strings."""

    words: list[str]
    tags: list[str]
    suffixes: list[str]

    def __post_init__(self) -> None:
        self.word_ids = {w: i for i, w in enumerate(self.words)}
        self.tag_ids = {t: i for i, t in enumerate(self.tags)}
        self.suffix_ids = {s: i for i, s in enumerate(self.suffixes)}

    @classmethod
    def build(
        cls, sentences: Iterable[list[str]], tagset: list[str], size: int = 10_000
    ) -> TaggedVocab:
        """The ``size − 1`` most frequent words of ``sentences`` (train) and their unknowns'
        signatures; ties broken by first occurrence, so the vocabulary is deterministic."""
        if size < 2:
            raise NslmError(f"vocab_size must be at least 2, not {size}")
        counts = Counter(w for sentence in sentences for w in sentence)
        kept = [w for w, _ in counts.most_common(size - 1)]
        known = set(kept)
        signatures = {unk_signature(w) for w in counts if w not in known}
        signatures.add(UNK)
        ends = Counter(w[-3:].lower() for w in counts.elements())
        suffixes = [s for s, n in ends.most_common() if n >= MIN_SUFFIX_COUNT]
        return cls(
            words=[EOS, BOS, *sorted(signatures), *kept],
            tags=[EOS, BOS, *tagset],
            suffixes=[OTHER_SUFFIX, *suffixes],
        )

    # -- lookups ----------------------------------------------------------------------------

    def word_id(self, word: str) -> int:
        found = self.word_ids.get(word)
        if found is not None:
            return found
        for signature in _backoffs(unk_signature(word)):
            if signature in self.word_ids:
                return self.word_ids[signature]
        return self.word_ids[UNK]

    def is_unknown(self, word_id: int) -> bool:
        return self.words[word_id].startswith("<unk")

    @property
    def eos(self) -> int:
        return self.word_ids[EOS]

    @property
    def bos(self) -> int:
        return self.word_ids[BOS]

    def encode(self, words: list[list[str]], tags: list[list[str]]) -> EncodedSentences:
        """Ids of tagged sentences, ``<eos>`` after each. Every tag must be in the tag set."""
        ids, tag_ids, suffix_ids, shape_ids, starts = [], [], [], [], [0]
        for sentence, sentence_tags in zip(words, tags, strict=True):
            for word, tag in zip(sentence, sentence_tags, strict=True):
                if tag not in self.tag_ids:
                    raise NslmError(f"tag {tag!r} is not in the run's tag set")
                ids.append(self.word_id(word))
                tag_ids.append(self.tag_ids[tag])
                suffix_ids.append(self.suffix_ids.get(word[-3:].lower(), 0))
                shape_ids.append(shape_id(word))
            ids.append(self.eos)
            tag_ids.append(self.tag_ids[EOS])
            suffix_ids.append(0)
            shape_ids.append(0)
            starts.append(len(ids))
        return EncodedSentences(
            *(np.asarray(a, dtype=np.int64) for a in (ids, tag_ids, suffix_ids, shape_ids)),
            starts=np.asarray(starts, dtype=np.int64),
        )

    def tag_given_word_counts(self, encoded: EncodedSentences) -> np.ndarray:
        """Count(word, tag) over ``encoded`` (train): (n_words, n_tags) float64."""
        counts = np.zeros((len(self.words), len(self.tags)))
        np.add.at(counts, (encoded.words, encoded.tags), 1.0)
        return counts

    # -- JSON -------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"words": self.words, "tags": self.tags, "suffixes": self.suffixes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaggedVocab:
        try:
            return cls(list(data["words"]), list(data["tags"]), list(data["suffixes"]))
        except (KeyError, TypeError) as error:
            raise NslmError(f"not a word+POS vocabulary: {error}") from None
