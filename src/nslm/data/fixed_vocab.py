"""Prepare any text with a trained run's vocabulary and class rules (``nslm eval --text``).

Scoring a text the run never saw (as KenLM's ``query`` or nltk's perplexity do) must prepare
it exactly as the training corpus was prepared, but learn nothing from it: plain text is
tokenized by the run's rules (:mod:`nslm.data.text`), then the lines go through
:func:`nslm.data.tagging.tag_lines` (numbers re-joined, places chunked, classes tagged, an
article starting at each `` = Title = `` heading) and :func:`nslm.data.prepare.encode_tagged`,
with the run's vocabulary (a token outside it becomes ``<unk>`` and is counted), the run's
classes and class rules, and the unit map the run's train split learnt (the ``<convert>``
targets). Files are read by :func:`nslm.data.textfile.read_text`, so an empty, binary or
non-UTF-8 file is a one-line :class:`NslmError`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.data.conllu import conllu_text, is_conllu
from nslm.data.conversions import unit_map_from_json
from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.locate import SPLITS, locate_corpus
from nslm.data.prepare import encode_tagged
from nslm.data.tagging import alternate_names_of, class_names_for, tag_lines
from nslm.data.text import corpus_lines, text_form_of, to_plain
from nslm.data.textfile import read_text
from nslm.data.vocab import EOS
from nslm.errors import NslmError


@dataclass
class TextSplit:
    """A text prepared with a run's vocabulary, and what fell outside that vocabulary."""

    split: Split
    source: str  # the file, or "<text>"
    oov_tokens: int  # tokens outside the vocabulary, now <unk> (a literal <unk> is not counted)
    oov_types: int  # distinct such tokens
    oov_class_tokens: int  # of them, tokens a class rule tagged (Split.oov_class_mask)
    oov_mask: np.ndarray  # per position: its token was outside the vocabulary
    plain_bytes: int  # UTF-8 bytes of the text as plain text (bits per byte divide by them)
    plain_words: int  # its whitespace-separated words (word perplexity divides by them)
    strings: tuple[str, ...] = ()  # every token as written, <unk>'s too (open vocabulary)

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
    corpus: PreparedCorpus,
    text: str,
    name: str = "text",
    source: str = "<text>",
    input_format: str = "plain",
) -> TextSplit:
    """``text`` as a :class:`Split` named ``name``: ``plain`` text is tokenized by the run's
    rules (:mod:`nslm.data.text`), ``tokenized`` text is read as lines of the corpus's
    tokens. The plain text's bytes and words are counted either way (a tokenized text is
    measured as the plain text it detokenizes to), so that bits per byte and word perplexity
    do not depend on the tokenization."""
    classes = str(corpus.meta.get("classes_option", ""))
    rules = tuple(corpus.class_rules.values())
    if class_names_for(classes, rules) != tuple(corpus.class_names):
        raise NslmError("the run's class options do not give its class names; cannot tag text")
    if not text.strip():
        raise NslmError(f"{source}: no text to score")
    form = text_form_of(corpus.meta, corpus.vocab.itos)
    lines = corpus_lines(text, form, input_format)
    tagged = tag_lines(lines, classes, rules, alternate_names=alternate_names_of(corpus.meta))
    if all(token == EOS for token in tagged.tokens):  # control characters, marks: no words
        raise NslmError(
            f"{source}: no tokens to score once tokenized (only line breaks, "
            "control characters or other marks)"
        )
    unit_map = unit_map_from_json(corpus.meta.get("unit_map", {}))
    split = encode_tagged(name, tagged, corpus.vocab, corpus.class_names, unit_map)
    stoi = corpus.vocab.stoi
    oov = np.array([t not in stoi for t in tagged.tokens], dtype=bool)
    plain = text if input_format == "plain" else to_plain(" <eos> ".join(lines).split(), form)
    return TextSplit(
        split=split,
        source=source,
        oov_tokens=int(oov.sum()),
        oov_types=len({t for t, o in zip(tagged.tokens, oov, strict=True) if o}),
        oov_class_tokens=int(np.count_nonzero(split.oov_class_mask)),
        oov_mask=oov,
        plain_bytes=len(plain.encode("utf-8", errors="surrogatepass")),
        plain_words=len(plain.split()),
        strings=tuple(tagged.tokens),
    )


def prepare_text_file(
    corpus: PreparedCorpus, path: Path | str, name: str = "text", input_format: str = "plain"
) -> TextSplit:
    """The text file ``path`` (plain or ``.xz``) as a :class:`Split` named ``name``; a
    CoNLL-U file (``.conllu``, ``.conllu.xz``) is read as its sentences' text, a document
    at each ``# newdoc`` (:mod:`nslm.data.conllu`)."""
    path = Path(path)
    if path.is_dir():
        raise NslmError(f"{path} is a directory; --text takes a file (--corpus a directory)")
    text = read_text(path)
    if is_conllu(path.name):
        if input_format != "plain":
            raise NslmError(f"{path}: a CoNLL-U file is read as plain text (its '# text =' lines)")
        text = conllu_text(text, str(path))
    return prepare_text(corpus, text, name=name, source=str(path), input_format=input_format)


def prepare_corpus_dir(
    corpus: PreparedCorpus, name_or_path: Path | str, input_format: str = "plain"
) -> dict[str, TextSplit]:
    """Another corpus's train/valid/test, prepared with the run's vocabulary (not its own).

    ``name_or_path``: a directory holding ``train.txt``, ``valid.txt`` and ``test.txt`` (or
    ``.xz``, or ``wiki.*.tokens``), or a known corpus already on disk (nothing is downloaded).
    """
    paths = locate_corpus(name_or_path, download=False)
    return {s: prepare_text_file(corpus, paths[s], s, input_format) for s in SPLITS}
