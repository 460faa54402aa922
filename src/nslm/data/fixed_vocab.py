"""Prepare any text with a trained run's vocabulary and class rules (``nslm eval --text``).

Scoring a text the run never saw (as KenLM's ``query`` or nltk's perplexity do) must prepare
it exactly as the training corpus was prepared, but learn nothing from it: the lines go
through :func:`nslm.data.tagging.tag_lines` (numbers re-joined, places chunked, classes
tagged, an article starting at each `` = Title = `` heading) and
:func:`nslm.data.prepare.encode_tagged`, with the run's vocabulary (a token outside it becomes
``<unk>`` and is counted), the run's classes and class rules, and the unit map the run's train
split learnt (the ``<convert>`` targets). Files are read by :func:`nslm.data.textfile.read_text`,
so an empty, binary or non-UTF-8 file is a one-line :class:`NslmError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.data.conversions import unit_map_from_json
from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.locate import SPLITS, locate_corpus
from nslm.data.prepare import encode_tagged, split_lines
from nslm.data.tagging import class_names_for, tag_lines
from nslm.data.textfile import read_text
from nslm.errors import NslmError


@dataclass
class TextSplit:
    """A text prepared with a run's vocabulary, and what fell outside that vocabulary."""

    split: Split
    source: str  # the file, or "<text>"
    oov_tokens: int  # tokens outside the vocabulary, now <unk> (a literal <unk> is not counted)
    oov_types: int  # distinct such tokens
    oov_class_tokens: int  # of them, tokens a class rule tagged (Split.oov_class_mask)

    @property
    def tokens(self) -> int:
        return len(self.split)

    def describe(self) -> str:
        """One line for the report: ``news.txt: 1,204 tokens, 31 outside the vocabulary
        (2.6%; 29 types), 4 of them class tokens (scored as <unk>)``."""
        share = self.oov_tokens / max(self.tokens, 1)
        return (
            f"{self.source}: {self.tokens:,} tokens, {self.oov_tokens:,} outside the "
            f"vocabulary ({share:.1%}; {self.oov_types:,} types), {self.oov_class_tokens:,} "
            "of them class tokens (scored as <unk>)"
        )


def prepare_text(
    corpus: PreparedCorpus, text: str, name: str = "text", source: str = "<text>"
) -> TextSplit:
    """``text`` (lines of WikiText-style tokens) as a :class:`Split` named ``name``."""
    classes = str(corpus.meta.get("classes_option", ""))
    rules = tuple(corpus.class_rules.values())
    if class_names_for(classes, rules) != tuple(corpus.class_names):
        raise NslmError("the run's class options do not give its class names; cannot tag text")
    if not text.strip():
        raise NslmError(f"{source}: no text to score")
    tagged = tag_lines(split_lines(text), classes, rules)
    unit_map = unit_map_from_json(corpus.meta.get("unit_map", {}))
    split = encode_tagged(name, tagged, corpus.vocab, corpus.class_names, unit_map)
    stoi = corpus.vocab.stoi
    unknown = [t for t in tagged.tokens if t not in stoi]
    return TextSplit(
        split=split,
        source=source,
        oov_tokens=len(unknown),
        oov_types=len(set(unknown)),
        oov_class_tokens=int(np.count_nonzero(split.oov_class_mask)),
    )


def prepare_text_file(corpus: PreparedCorpus, path: Path | str, name: str = "text") -> TextSplit:
    """The text file ``path`` (plain or ``.xz``) as a :class:`Split` named ``name``."""
    path = Path(path)
    if path.is_dir():
        raise NslmError(f"{path} is a directory; --text takes a file (--corpus a directory)")
    return prepare_text(corpus, read_text(path), name=name, source=str(path))


def prepare_corpus_dir(corpus: PreparedCorpus, name_or_path: Path | str) -> dict[str, TextSplit]:
    """Another corpus's train/valid/test, prepared with the run's vocabulary (not its own).

    ``name_or_path``: a directory holding ``train.txt``, ``valid.txt`` and ``test.txt`` (or
    ``.xz``, or ``wiki.*.tokens``), or a known corpus already on disk (nothing is downloaded).
    """
    paths = locate_corpus(name_or_path, download=False)
    return {s: prepare_text_file(corpus, paths[s], name=s) for s in SPLITS}
