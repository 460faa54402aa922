"""POS-tagged corpora for a word+POS joint LM: sentences of words, each with one tag.

:func:`load_tagged_corpus` reads one of three corpora into a :class:`TaggedCorpus` (train,
valid and test :class:`TaggedSplit`; words keep their case):

* ``brown``: ``$NSLM_DATA_DIR/brown/brown.tsv.xz`` (TSV with the header
  ``fileid category para sent tagged``, one sentence a line, ``tagged`` is ``word/tag``
  tokens split at the last ``/``). The Brown tags become the 12 universal tags of Petrov et
  al. (2012) by :func:`nslm.word_pos.brown_tags.universal_tag` (``tag_map`` ``universal-12``).
  Split by file, a fixed rule (:func:`brown_split_of`): the 500 fileids sorted, the i-th
  (0-based) goes to valid if i % 10 == 8, to test if i % 10 == 9, else to train. The ids
  sort by category (``ca01`` … ``cr09``), so every split spans the 15 categories; all 12
  universal tags occur in train:

  =====  =====  =========  =========
  split  files  sentences  tokens
  =====  =====  =========  =========
  train    400     46,175    929,728
  valid     50      5,523    115,661
  test      50      5,642    115,803
  =====  =====  =========  =========

* ``ewt``: UD English EWT as released (``train``, ``dev`` → valid, ``test``), read by
  :func:`nslm.byte_lm.labelled.read_ewt`. The unit is the syntactic word, so "don't" is "do"/VBP
  "n't"/RB; its tag is the XPOS (PTB) tag (``tag_map`` ``ptb-xpos``): 12,544 / 2,001 /
  2,077 sentences, 204,577 / 25,147 / 25,094 words, 49 tags in train.
* ``tagged:DIR``: a directory of ``train.txt``, ``valid.txt``, ``test.txt`` (UTF-8), one
  sentence a line in either form, chosen per line: ``word/tag word/tag …`` (split at the last
  ``/``, so a word may hold ``/`` and a tag may not), or ``w1 w2 …<TAB>t1 t2 …`` (a line with
  a tab). Tokens are separated by whitespace; empty lines are skipped; tags are kept as given
  (``tag_map`` ``as-given``).

Every problem is one :class:`~nslm.errors.NslmError` line naming the file and, when there is
one, the line (``PATH:LINE: …``): a token without a word or a tag, word and tag counts that
differ, an unknown Brown tag, a tag in valid or test that train does not have (so a model of
the train tags can score every split), a missing file, an empty split.
"""

from __future__ import annotations

import lzma
from dataclasses import dataclass, field
from pathlib import Path

from nslm.byte_lm.labelled import dataset_dir, read_ewt
from nslm.data.textfile import read_text
from nslm.errors import NslmError
from nslm.word_pos.brown_tags import universal_tag

SPLITS = ("train", "valid", "test")
CUSTOM_PREFIX = "tagged:"
BROWN_FILE = "brown.tsv.xz"
BROWN_HEADER = ["fileid", "category", "para", "sent", "tagged"]
_SPLIT_FILES = "train.txt, valid.txt and test.txt"
EWT_FILES = {"train": "train", "valid": "dev", "test": "test"}


@dataclass
class TaggedSplit:
    """The sentences of one split: ``words[i][j]`` has the tag ``tags[i][j]``."""

    name: str  # "train" | "valid" | "test"
    words: list[list[str]]
    tags: list[list[str]]
    source: str  # the file it came from (for messages)
    # the line of each sentence in ``source``; None for CoNLL-U (found on demand)
    lines: list[int] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.words)

    def n_tokens(self) -> int:
        return sum(len(sentence) for sentence in self.words)


@dataclass
class TaggedCorpus:
    name: str  # "brown" | "ewt" | "tagged:DIR"
    train: TaggedSplit
    valid: TaggedSplit
    test: TaggedSplit
    tagset: list[str]  # the sorted tags of train
    tag_map: str  # "universal-12" (Brown) | "ptb-xpos" (EWT) | "as-given" (tagged:DIR)

    @property
    def splits(self) -> dict[str, TaggedSplit]:
        return {"train": self.train, "valid": self.valid, "test": self.test}


def load_tagged_corpus(name: str, data_dir: Path | str | None = None) -> TaggedCorpus:
    """The tagged corpus ``name``: ``brown``, ``ewt`` or ``tagged:DIR`` (module docstring).

    ``data_dir`` holds ``brown/`` and ``ud-english-ewt/`` (default ``$NSLM_DATA_DIR``); a
    ``tagged:DIR`` directory is read as given (``~`` expanded, relative to the working
    directory).
    """
    if name == "brown":
        splits, tag_map = _brown_splits(dataset_dir("brown", data_dir) / BROWN_FILE), "universal-12"
    elif name == "ewt":
        splits, tag_map = _ewt_splits(data_dir), "ptb-xpos"
    elif name.startswith(CUSTOM_PREFIX) and name[len(CUSTOM_PREFIX) :]:
        splits = _custom_splits(Path(name[len(CUSTOM_PREFIX) :]).expanduser())
        tag_map = "as-given"
    else:
        raise NslmError(f"unknown tagged corpus {name!r} (brown, ewt or {CUSTOM_PREFIX}DIR)")
    for split in splits.values():
        if not split.words:
            raise NslmError(f"{split.source}: empty split: no {split.name} sentences")
    tagset = sorted({tag for sentence in splits["train"].tags for tag in sentence})
    for split in (splits["valid"], splits["test"]):
        _check_seen(split, set(tagset), splits["train"].source)
    return TaggedCorpus(name, splits["train"], splits["valid"], splits["test"], tagset, tag_map)


# -- tokens and lines -------------------------------------------------------------------------


def split_token(token: str, path: Path | str, line_no: int) -> tuple[str, str]:
    """``word/tag`` → (word, tag), split at the last ``/``; ``PATH:LINE:`` if either is empty."""
    word, slash, tag = token.rpartition("/")
    if not slash:
        raise NslmError(f"{path}:{line_no}: token {token!r} has no tag (expected word/tag)")
    if not tag:
        raise NslmError(f"{path}:{line_no}: token {token!r} has an empty tag (expected word/tag)")
    if not word:
        raise NslmError(f"{path}:{line_no}: token {token!r} has an empty word (expected word/tag)")
    return word, tag


def parse_tagged_line(line: str, path: Path | str, line_no: int) -> tuple[list[str], list[str]]:
    """(words, tags) of one sentence line: ``word/tag …`` or ``w1 w2 …<TAB>t1 t2 …``."""
    if "\t" in line:
        columns = line.split("\t")
        if len(columns) != 2:
            raise NslmError(
                f"{path}:{line_no}: expected two tab-separated columns (words<TAB>tags), "
                f"got {len(columns)}"
            )
        words, tags = columns[0].split(), columns[1].split()
        if len(words) != len(tags):
            raise NslmError(f"{path}:{line_no}: {len(words)} words but {len(tags)} tags")
        return words, tags
    pairs = [split_token(token, path, line_no) for token in line.split()]
    return [word for word, _ in pairs], [tag for _, tag in pairs]


def _check_seen(split: TaggedSplit, known: set[str], train_source: str) -> None:
    """NslmError at the first tag of ``split`` that is not in ``known`` (train's tags)."""
    for i, (words, tags) in enumerate(zip(split.words, split.tags, strict=True)):
        for word, tag in zip(words, tags, strict=True):
            if tag not in known:
                line = split.lines[i] if split.lines is not None else _conllu_line(split, tag)
                raise NslmError(
                    f"{split.source}:{line}: tag {tag!r} (word {word!r}) of {split.name} "
                    f"does not occur in train ({train_source})"
                )


# -- Brown ------------------------------------------------------------------------------------


def brown_split_of(fileids: list[str]) -> dict[str, str]:
    """Each Brown fileid's split: sorted, the i-th is valid if i % 10 == 8, test if 9."""
    rule = {8: "valid", 9: "test"}
    return {fileid: rule.get(i % 10, "train") for i, fileid in enumerate(sorted(set(fileids)))}


def _universal(tag: str, path: Path, line_no: int) -> str:
    try:
        return universal_tag(tag)
    except NslmError as exc:
        raise NslmError(f"{path}:{line_no}: {exc}") from None


def _brown_splits(path: Path) -> dict[str, TaggedSplit]:
    if not path.is_file():
        raise NslmError(f"missing file: {path}")
    rows: list[tuple[str, int, list[str], list[str]]] = []  # fileid, line, words, tags
    # the corpus reader: one line for a damaged .xz, binary or non-UTF-8 text; a BOM dropped
    lines = read_text(path).split("\n")
    if lines[0].rstrip("\r").split("\t") != BROWN_HEADER:
        raise NslmError(f"{path}:1: expected the header {' '.join(BROWN_HEADER)}")
    for line_no, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        columns = line.rstrip("\r").split("\t")
        if len(columns) != len(BROWN_HEADER) or not columns[4].strip():
            raise NslmError(f"{path}:{line_no}: expected 5 columns and a tagged sentence")
        words, tags = [], []
        for token in columns[4].split():
            word, tag = split_token(token, path, line_no)
            words.append(word)
            tags.append(_universal(tag, path, line_no))
        rows.append((columns[0], line_no, words, tags))
    split_of = brown_split_of([row[0] for row in rows])
    splits = {}
    for name in SPLITS:
        mine = [row for row in rows if split_of[row[0]] == name]
        words, tags = [row[2] for row in mine], [row[3] for row in mine]
        splits[name] = TaggedSplit(name, words, tags, str(path), [row[1] for row in mine])
    return splits


# -- UD English EWT ---------------------------------------------------------------------------


def _ewt_path(split: str, data_dir: Path | str | None) -> Path:
    return dataset_dir("ud-english-ewt", data_dir) / f"{EWT_FILES[split]}.conllu.xz"


def _ewt_splits(data_dir: Path | str | None) -> dict[str, TaggedSplit]:
    splits = {}
    for name, file in EWT_FILES.items():
        sentences = read_ewt(file, data_dir)
        words = [[form for token in s.tokens for form, _ in token.words] for s in sentences]
        tags = [[xpos for token in s.tokens for _, xpos in token.words] for s in sentences]
        splits[name] = TaggedSplit(name, words, tags, str(_ewt_path(name, data_dir)))
    return splits


def _conllu_line(split: TaggedSplit, tag: str) -> int | str:
    """The line of the first word with XPOS ``tag`` in a CoNLL-U file ("?" if none)."""
    path = Path(split.source)
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            columns = line.rstrip("\n").split("\t")
            if len(columns) == 10 and columns[0].isdigit() and columns[4] == tag:
                return line_no
    return "?"


# -- tagged:DIR -------------------------------------------------------------------------------


def _custom_splits(directory: Path) -> dict[str, TaggedSplit]:
    if not directory.is_dir():
        raise NslmError(
            f"no tagged corpus: {directory} is not a directory (it should hold {_SPLIT_FILES})"
        )
    return {name: _read_custom(name, directory / f"{name}.txt") for name in SPLITS}


def _read_custom(name: str, path: Path) -> TaggedSplit:
    if not path.is_file():
        raise NslmError(f"missing file: {path} (a tagged corpus has {_SPLIT_FILES})")
    words: list[list[str]] = []
    tags: list[list[str]] = []
    lines: list[int] = []
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, 1):
            try:  # line by line, so that a bad byte has a line number
                line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise NslmError(f"{path}:{line_no}: not UTF-8 text") from None
            if line.strip():
                sentence_words, sentence_tags = parse_tagged_line(line, path, line_no)
                words.append(sentence_words)
                tags.append(sentence_tags)
                lines.append(line_no)
    return TaggedSplit(name, words, tags, str(path), lines)
