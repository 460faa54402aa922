"""Byte corpora: text as a stream of byte ids (0–255), one article per review or line.

A byte LM (docs/byte-lm.md) reads any text: its vocabulary is the 256 byte values (type id
= byte value), so nothing is unknown, nothing is tokenised and there are no classes. The
corpus is a :class:`~nslm.data.corpus.PreparedCorpus` like any other, so the TBPTT streams
(cut at article starts), the LM, training, checkpoints, runs and the scoring pass take it
unchanged. Two sources:

* ``imdb-bytes``: IMDB movie reviews (Maas et al. 2011), as Carvalho's byte LM (docs/byte-lm.md)
  trained on product reviews: the 50,000 unlabelled reviews and the 25,000 labelled training
  reviews of ``$NSLM_DATA_DIR/imdb`` (``unsup.txt.xz``, ``train.tsv.xz`` as ``label<TAB>text``),
  shuffled with a fixed seed (the files are sorted by label and id); the first
  :data:`HELD_OUT` of the shuffle are validation, the next as many test, and training
  drops any review whose text equals a held-out one (IMDB repeats some reviews). IMDB's test
  file and SST are never read.
* ``bytes:DIR``: a directory with ``train``/``valid``/``test`` files (``.txt`` or ``.txt.xz``)
  read as raw bytes in whatever encoding, one article per line (tests, your own text).

Each article is its bytes followed by ``\\n``: the stream reads like the one-review-a-line
file, and the model learns where a review ends. Per-token annotations that words have and
bytes lack (class ids, values, coordinates) are zero-stride arrays that cost no memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.locate import SPLITS, user_cache_dir
from nslm.data.textfile import read_bytes
from nslm.data.vocab import byte_vocabulary
from nslm.errors import NslmError

IMDB = "imdb-bytes"
DIR_PREFIX = "bytes:"
HELD_OUT = 500  # reviews each for validation and test: ~650 kB, a few seconds to score
SHUFFLE_SEED = 20  # fixed: the held-out reviews never change between runs
ARTICLE_END = b"\n"


def is_byte_corpus(name: str | Path) -> bool:
    """Whether a config's ``corpus`` names a byte corpus (``imdb-bytes`` or ``bytes:DIR``)."""
    return str(name) == IMDB or str(name).startswith(DIR_PREFIX)


class ByteCorpus(PreparedCorpus):
    """A prepared corpus of byte ids: one class ("word"), no ``<unk>``."""

    def type_class_counts(self) -> np.ndarray:
        # every byte is a plain "word": the (V, 1) counts are the vocabulary's own
        return np.asarray(self.vocab.counts, dtype=np.int64).reshape(-1, 1)


def byte_split(name: str, articles: Sequence[bytes]) -> Split:
    """One split: the articles' bytes, each followed by ``\\n``, as uint8 ids."""
    if not articles:
        raise NslmError(f"the {name} split of this byte corpus is empty")
    data = np.frombuffer(ARTICLE_END.join(articles) + ARTICLE_END, dtype=np.uint8)
    lengths = np.fromiter((len(a) + 1 for a in articles), dtype=np.int64, count=len(articles))
    n = len(data)
    return Split(
        name=name,
        token_ids=data,
        rule_class_ids=np.broadcast_to(np.int16(0), (n,)),
        values=np.broadcast_to(np.float64(np.nan), (n,)),
        coords=np.broadcast_to(np.float64(np.nan), (n, 2)),
        convert_targets=np.broadcast_to(np.float64(np.nan), (n, 3)),
        article_ids=np.repeat(np.arange(len(articles), dtype=np.int32), lengths),
        unk_id=-1,
    )


def prepare_byte_corpus(name: str | Path) -> ByteCorpus:
    """The byte corpus ``name`` (see the module docstring), read from disk (no download)."""
    name = str(name)
    if name == IMDB:
        articles, files = _imdb_articles()
    elif name.startswith(DIR_PREFIX):
        articles, files = _directory_articles(Path(name[len(DIR_PREFIX) :]).expanduser())
    else:
        raise NslmError(f"not a byte corpus: {name} (use {IMDB} or {DIR_PREFIX}DIR)")
    splits = {split: byte_split(split, articles[split]) for split in SPLITS}
    counts = np.bincount(splits["train"].token_ids, minlength=256)
    meta = {
        "unit": "byte",
        "source": name,
        "classes_option": "none",
        "files": files,
        "articles": {split: len(articles[split]) for split in SPLITS},
    }
    return ByteCorpus(byte_vocabulary(counts), ("word",), splits, meta)


def locate_byte_corpus(name: str | Path) -> dict[str, Path]:
    """The files a byte corpus reads; a one-line error when they are not on disk."""
    name = str(name)
    if name.startswith(DIR_PREFIX):
        directory = Path(name[len(DIR_PREFIX) :]).expanduser()
        return {split: _split_file(directory, split) for split in SPLITS}
    return _imdb_files()


# -- IMDB ------------------------------------------------------------------------------------


def _imdb_files() -> dict[str, Path]:
    roots = []
    if os.environ.get("NSLM_DATA_DIR"):
        roots.append(Path(os.environ["NSLM_DATA_DIR"]).expanduser() / "imdb")
    roots.append(user_cache_dir() / "imdb")
    for root in roots:
        found = {
            part: next((root / f for f in files if (root / f).is_file()), None)
            for part, files in (
                ("unsup", ("unsup.txt.xz", "unsup.txt")),
                ("train", ("train.tsv.xz", "train.tsv")),
            )
        }
        if all(found.values()):
            return found  # type: ignore[return-value]
    where = " or ".join(str(r) for r in roots)
    raise NslmError(f"{IMDB} needs unsup.txt.xz and train.tsv.xz in {where}")


def imdb_reviews() -> list[bytes]:
    """The 75,000 review texts the byte LM may read (unlabelled, then labelled train)."""
    files = _imdb_files()
    unsup = _lines(read_bytes(files["unsup"]))
    labelled = [line.split(b"\t", 1)[-1] for line in _lines(read_bytes(files["train"]))]
    return unsup + labelled


def imdb_split_reviews() -> dict[str, list[bytes]]:
    """The reviews of each split of ``imdb-bytes`` (shuffled with :data:`SHUFFLE_SEED`)."""
    reviews = imdb_reviews()
    order = np.random.default_rng(SHUFFLE_SEED).permutation(len(reviews))
    valid = [reviews[i] for i in order[:HELD_OUT]]
    test = [reviews[i] for i in order[HELD_OUT : 2 * HELD_OUT]]
    held_out = set(valid) | set(test)
    train = [reviews[i] for i in order[2 * HELD_OUT :] if reviews[i] not in held_out]
    return {"train": train, "valid": valid, "test": test}


def _imdb_articles() -> tuple[dict[str, list[bytes]], dict[str, str]]:
    files = {part: str(path) for part, path in _imdb_files().items()}
    return imdb_split_reviews(), files


# -- a directory of byte files -------------------------------------------------------------


def _split_file(directory: Path, split: str) -> Path:
    if not directory.is_dir():
        raise NslmError(f"no such byte-corpus directory: {directory}")
    for name in (f"{split}.txt", f"{split}.txt.xz"):
        if (directory / name).is_file():
            return directory / name
    raise NslmError(f"{directory}: expected {split}.txt (or {split}.txt.xz)")


def _directory_articles(directory: Path) -> tuple[dict[str, list[bytes]], dict[str, str]]:
    paths = {split: _split_file(directory, split) for split in SPLITS}
    return {s: _lines(read_bytes(p)) for s, p in paths.items()}, {
        s: str(p) for s, p in paths.items()
    }


def _lines(raw: bytes) -> list[bytes]:
    """A file's lines without their ends; the newline that ends the file adds no line."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines
