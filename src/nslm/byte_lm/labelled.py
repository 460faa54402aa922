"""Labelled text for the neuron probes: SST-2 and IMDB sentiment, UD EWT part-of-speech tags.

Formats (``$NSLM_DATA_DIR/SOURCES.md``):

- ``sst2/{train,dev,test}.txt``: ``<label> <sentence>`` per line, 0 negative / 1 positive;
- ``imdb/{train,test}.tsv.xz``: ``label<TAB>text``, sorted by label (all negatives first),
  so :func:`read_imdb` shuffles with a fixed seed before anyone takes a prefix or a split;
- ``ud-english-ewt/{train,dev,test}.conllu.xz``: CoNLL-U; column 5 is the XPOS (PTB) tag.
  A multiword-token line ``19-20 don't`` carries the surface text of words 19 ("do") and
  20 ("n't"); an empty node ``8.1`` has no surface text and is skipped.

:func:`byte_tags` turns a sentence into the bytes a byte LM reads and one tag per byte: every
byte of a word gets the word's XPOS (a multi-byte UTF-8 character too), and the space between
two words gets ``SPACE``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.data.textfile import read_text
from nslm.errors import NslmError

SPACE = "SPACE"
IMDB_SEED = 0  # the one shuffle of the label-sorted IMDB files


@dataclass
class LabelledTexts:
    """Texts with one integer label each (0 negative, 1 positive)."""

    texts: list[str]
    labels: np.ndarray  # (N,) int64

    def __len__(self) -> int:
        return len(self.texts)

    def head(self, n: int | None) -> LabelledTexts:
        """The first ``n`` (all when None): a subset, random when the texts are shuffled."""
        return self if n is None else LabelledTexts(self.texts[:n], self.labels[:n])


def dataset_dir(name: str, data_dir: Path | str | None = None) -> Path:
    """``data_dir/name``, or ``$NSLM_DATA_DIR/name``; one line when it is not there."""
    root = data_dir if data_dir is not None else os.environ.get("NSLM_DATA_DIR")
    if root is None:
        raise NslmError(f"{name} needs a data directory: set $NSLM_DATA_DIR (it holds {name}/)")
    path = Path(root) / name
    if not path.is_dir():
        raise NslmError(f"no {name} data: {path} is not a directory")
    return path


def _text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (plain or ``.xz``), read by the corpus reader (one
    line for a missing, empty, binary, damaged or non-UTF-8 file; a BOM dropped). Lines end
    at ``\n``, ``\r\n`` or ``\r``, as a file opened in text mode reads them."""
    if not path.is_file():
        raise NslmError(f"missing file: {path}")
    text = read_text(path)
    return text.removesuffix("\n").split("\n")


def _checked(texts: list[str], labels: list[int], path: Path) -> LabelledTexts:
    if not texts:
        raise NslmError(f"empty split: {path} has no labelled lines")
    return LabelledTexts(texts, np.asarray(labels, dtype=np.int64))


def _label(field: str, path: Path, line_no: int) -> int:
    if field not in ("0", "1"):
        raise NslmError(f"{path}:{line_no}: label {field!r} is not 0 or 1")
    return int(field)


# -- sentiment ---------------------------------------------------------------------------------

SST2_SPLITS = ("train", "dev", "test")


def _labelled_lines(path: Path, separator: str, form: str) -> tuple[list[str], list[int]]:
    """(texts, labels) of a ``label SEPARATOR text`` file; blank lines are skipped."""
    texts, labels = [], []
    for line_no, line in enumerate(_text_lines(path), 1):
        if not line.strip():
            continue
        label, sep, text = line.partition(separator)
        if not sep:
            raise NslmError(f"{path}:{line_no}: expected {form}")
        labels.append(_label(label, path, line_no))
        texts.append(text)
    return texts, labels


def read_sst2(split: str, data_dir: Path | str | None = None) -> LabelledTexts:
    """One SST-2 split (``train``, ``dev``, ``test``), in file order."""
    if split not in SST2_SPLITS:
        raise NslmError(f"SST-2 has no split {split!r} (one of {', '.join(SST2_SPLITS)})")
    path = dataset_dir("sst2", data_dir) / f"{split}.txt"
    return _checked(*_labelled_lines(path, " ", "label SPACE sentence"), path)


# SST-2 is PTB-tokenised and lower-cased ("it 's a film , wo n't -lrb- ... -rrb-"); a byte LM
# trained on raw review text reads it better put back the way people type it
_PTB_BRACKETS = {"-lrb-": "(", "-rrb-": ")", "-lsb-": "[", "-rsb-": "]", "``": '"', "''": '"'}
_PTB_CONTRACTIONS = re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b")
_PTB_SPACE_BEFORE = re.compile(r" ([,.;:!?%)\]])")
_PTB_SPACE_AFTER = re.compile(r"([(\[$]) ")
_PTB_QUOTES = re.compile(r'" (.*?) "')


def detokenise_ptb(text: str) -> str:
    """A PTB-tokenised sentence as plain text: brackets and quotes restored, no space before
    punctuation or a clitic ("wo n't" → "won't"), the first letter capitalised."""
    for token, plain in _PTB_BRACKETS.items():
        text = text.replace(token, plain)
    text = text.replace("wo n't", "won't").replace("ca n't", "can't")
    text = _PTB_CONTRACTIONS.sub(r"\1", text)
    text = _PTB_SPACE_BEFORE.sub(r"\1", text)
    text = _PTB_SPACE_AFTER.sub(r"\1", text)
    text = _PTB_QUOTES.sub(r'"\1"', text)
    return text[:1].upper() + text[1:]


def read_imdb(
    split: str, data_dir: Path | str | None = None, *, seed: int = IMDB_SEED
) -> LabelledTexts:
    """One IMDB split (``train`` or ``test``), shuffled by ``seed``.

    The files hold 12,500 negatives, then 12,500 positives; the shuffle makes any prefix
    (``.head(n)``) a random, nearly balanced sample, the same one on every call.
    """
    if split not in ("train", "test"):
        raise NslmError(f"IMDB has no split {split!r} (train or test)")
    path = dataset_dir("imdb", data_dir) / f"{split}.tsv.xz"
    texts, labels = _labelled_lines(path, "\t", "label<TAB>text")
    data = _checked(texts, labels, path)
    order = np.random.default_rng(seed).permutation(len(data))
    return LabelledTexts([data.texts[i] for i in order], data.labels[order])


# -- part of speech ----------------------------------------------------------------------------


@dataclass
class Token:
    """One surface token: its text, its words' (form, XPOS), and whether a space follows.

    A plain word is one (form, tag) pair; a multiword token such as "don't" holds two,
    ("do", "VBP") and ("n't", "RB").
    """

    text: str
    words: list[tuple[str, str]]
    space_after: bool = True


@dataclass
class TaggedSentence:
    tokens: list[Token]
    text: str | None = None  # the ``# text =`` comment, when the file has one


EWT_SPLITS = ("train", "dev", "test")


def _space_after(misc: str) -> bool:
    return "SpaceAfter=No" not in misc.split("|")


# A CoNLL-U ID: a word (7), a multiword token's range (7-8) or an empty node (7.1).
_CONLLU_ID = re.compile(r"[0-9]+(?:-[0-9]+|\.[0-9]+)?")


def _word_line(line: str, where: str) -> tuple[str, str, str, str] | None:
    """(id, form, XPOS, MISC) of a word or multiword-token line; None for an empty node."""
    cols = line.split("\t")
    if len(cols) != 10:
        raise NslmError(
            f"{where}: not a CoNLL-U word line (10 tab-separated columns): {line[:60]!r}"
        )
    if not _CONLLU_ID.fullmatch(cols[0]):
        raise NslmError(f"{where}: not a CoNLL-U word ID: {cols[0][:20]!r}")
    return None if "." in cols[0] else (cols[0], cols[1], cols[4], cols[9])


def parse_conllu(lines: Iterable[str], source: str = "CoNLL-U") -> list[TaggedSentence]:
    """Sentences of CoNLL-U lines: surface tokens with the XPOS of their words. A malformed
    line is a one-line error naming ``source`` and the line."""
    sentences: list[TaggedSentence] = []
    tokens: list[Token] = []
    text: str | None = None
    until = 0  # the last word id covered by the current multiword token
    for line_no, raw in enumerate([*lines, ""], 1):  # a final blank line closes the last one
        line = raw.rstrip("\n")
        if not line.strip():
            if tokens:
                sentences.append(TaggedSentence(tokens, text))
            tokens, text, until = [], None, 0
        elif line.startswith("#"):
            if line.startswith("# text ="):
                text = line.partition("=")[2].strip()
        elif (word := _word_line(line, f"{source}:{line_no}")) is not None:  # not empty nodes
            ident, form, xpos, misc = word
            if "-" in ident:  # a multiword token; its words follow
                until = int(ident.split("-")[1])
                tokens.append(Token(form, [], _space_after(misc)))
            elif until and int(ident) <= until:
                tokens[-1].words.append((form, xpos))
            else:
                until = 0
                tokens.append(Token(form, [(form, xpos)], _space_after(misc)))
    return sentences


def read_ewt(
    split: str, data_dir: Path | str | None = None, *, limit: int | None = None
) -> list[TaggedSentence]:
    """The sentences of one UD EWT split (``train``, ``dev``, ``test``), the first ``limit``."""
    if split not in EWT_SPLITS:
        raise NslmError(f"UD EWT has no split {split!r} (one of {', '.join(EWT_SPLITS)})")
    path = dataset_dir("ud-english-ewt", data_dir) / f"{split}.conllu.xz"
    sentences = parse_conllu(_text_lines(path), str(path))
    if not sentences:
        raise NslmError(f"empty split: {path} has no sentences")
    return sentences[:limit] if limit is not None else sentences


def _token_tags(token: Token) -> list[str]:
    """One tag per byte of ``token.text``: each word's bytes get its tag.

    A multiword token whose words spell its text ("do" + "n't" = "don't") is cut at the word
    boundaries; one whose words do not (rare: a spelling the treebank normalised) takes its
    first word's tag throughout.
    """
    data = token.text.encode("utf-8")
    if len(token.words) == 1:
        return [token.words[0][1]] * len(data)
    pieces = [form.encode("utf-8") for form, _ in token.words]
    if b"".join(pieces).lower() != data.lower():
        return [token.words[0][1]] * len(data)
    return [tag for piece, (_, tag) in zip(pieces, token.words, strict=True) for _ in piece]


def byte_tags(sentence: TaggedSentence) -> tuple[bytes, list[str]]:
    """The sentence's UTF-8 bytes, one space between tokens unless ``SpaceAfter=No``, and
    the tag of every byte: its word's XPOS, or ``SPACE`` for a separator."""
    data, tags = bytearray(), []
    for i, token in enumerate(sentence.tokens):
        data += token.text.encode("utf-8")
        tags += _token_tags(token)
        if token.space_after and i < len(sentence.tokens) - 1:
            data += b" "
            tags.append(SPACE)
    return bytes(data), tags
