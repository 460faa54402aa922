"""Texts as the functions read them: documents of corpus tokens (numbers joined, places
chunked as the run's corpus chunks them), one list per article (docs/text.md, "Documents")."""

from __future__ import annotations

from pathlib import Path

from nslm.data.prepare import split_lines
from nslm.data.tagging import TaggedText, tag_lines
from nslm.data.text import corpus_lines
from nslm.data.textfile import read_text


def documents_of(tagged: TaggedText) -> list[list[str]]:
    """The tagged tokens cut at their article boundaries."""
    documents: list[list[str]] = []
    last = None
    for token, article in zip(tagged.tokens, tagged.articles, strict=True):
        if article != last:
            documents.append([])
            last = article
        documents[-1].append(token)
    return documents


def corpus_file_documents(path: Path, classes: str = "all") -> list[list[str]]:
    """A corpus split file (WikiText's tokens, plain or ``.xz``) as documents."""
    return documents_of(tag_lines(split_lines(read_text(path)), classes))


def text_documents(
    text: str, form: str = "wikitext", input_format: str = "plain", classes: str = "all"
) -> tuple[TaggedText, list[list[str]]]:
    """A text (plain or tokenized; a form feed between documents) tagged, and as documents."""
    tagged = tag_lines(corpus_lines(text, form, input_format), classes)
    return tagged, documents_of(tagged)
