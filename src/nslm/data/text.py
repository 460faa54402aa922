"""The one boundary between people's text and a run's tokens: plain text ↔ corpus tokens.

A run reads text in the form its corpus was written in (its *text form*):

- ``wikitext``: WikiText's tokenization (Merity et al. 2017): the Moses tokenizer with
  aggressive hyphen splitting (``well-known`` → ``well @-@ known``), plus WikiText's own split
  of the separators inside numbers (``8,600`` → ``8 @,@ 600``, ``3.5`` → ``3 @.@ 5``).
  The Moses rules come from sacremoses; only the WikiText layer is written here.
- ``whitespace``: a corpus whose tokens are its whitespace-separated words (a user's own
  corpus, as ``nslm data prepare DIR`` reads it): text is split on whitespace and joined
  with spaces, so plain input reads exactly as the corpus did.

:func:`to_tokens` and :func:`to_plain` are the two directions; :func:`corpus_lines` turns a
whole input (several lines, said to be ``plain`` or already ``tokenized``) into the lines
:func:`nslm.data.tagging.tag_lines` reads. Retokenizing text that is already tokenized is not
safe (``'s`` would become ``' s``), so the input format is said by the caller, never guessed.

A form feed (``\f``, U+000C) ends a document: the lines after it start a new article, so
caches, previous values and the open model's document features start afresh there
(docs/text.md, "Documents"). :func:`corpus_lines` passes it on as a line of its own,
:data:`DOCUMENT_BREAK`, which ``tag_lines`` reads as an article boundary.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from nslm.errors import NslmError

TEXT_FORMS = ("wikitext", "whitespace")
INPUT_FORMATS = ("plain", "tokenized")  # how a command's text input is written
OUTPUT_FORMATS = ("plain", "tokenized")  # how a command writes words back
EOS_TOKENS = frozenset({"<eos>", "</s>"})  # a line break, in a run's and an ARPA model's tokens
DOCUMENT_BREAK = "\f"  # a form feed: the text after it is another document

# Curly quotes: WikiText writes almost every quote straight (2,349 " against 20 “ ” in test),
# and Moses splits "don't" into "don 't" only with a straight apostrophe.
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'", "‚": "'"})
# WikiText's separator inside a number, between digits (or an <unk> that hid digits): the
# right side must end the word, so "1,000th" stays one token as in the corpus.
_NUMBER_SEPARATOR = re.compile(r"(?<=\d|>)([,.])(?=(?:\d+|<unk>)(?!\w))")
_JOINED = re.compile(r" @([-,.])@ ")  # "well @-@ known", "8 @,@ 600" → joined again
# Kept whole through Moses: WikiText's placeholders and the separators added above.
_PROTECTED = (r"</?[a-z]+>", r"@[-,.]@")
_PROTECTED_SPAN = re.compile("|".join(_PROTECTED), re.IGNORECASE)  # as sacremoses matches them
# sacremoses numbers its placeholders with three digits: a line with more protected spans is
# tokenized in pieces cut at spaces (Moses reads words one at a time, so the cut changes none).
_MAX_PROTECTED = 900
_HEADING = re.compile(r"^(=+)\s+(.*?)\s+\1$")  # "== Career ==" in plain text


@functools.cache
def _moses():
    """The sacremoses English tokenizer and detokenizer (built once: loading the
    non-breaking prefixes is most of their start-up)."""
    from sacremoses import MosesDetokenizer, MosesTokenizer

    return MosesTokenizer(lang="en"), MosesDetokenizer(lang="en")


def check_form(form: str) -> str:
    if form not in TEXT_FORMS:
        raise NslmError(f"unknown text form {form!r}; one of {', '.join(TEXT_FORMS)}")
    return form


def text_form_of(meta: Mapping, itos: Sequence[str]) -> str:
    """A corpus's text form: the one its metadata records (``nslm data prepare`` writes it),
    else read from its vocabulary: WikiText's ``@-@`` token is in every WikiText vocabulary
    and in no whitespace-split one."""
    said = meta.get("text_form")
    if said:
        return check_form(str(said))
    return "wikitext" if "@-@" in set(itos) else "whitespace"


def to_tokens(line: str, form: str = "wikitext") -> list[str]:
    """One line of plain text → the corpus's tokens (WikiText-form: ``1 @,@ 000``, not yet
    re-joined; :func:`nslm.data.tagging.tag_lines` does that, as for the corpus itself)."""
    if check_form(form) == "whitespace":
        return line.split()
    line = " ".join(line.translate(_QUOTES).split())  # tabs, CR and runs of spaces: one space
    heading = _HEADING.match(line)
    if heading:  # "== Career ==" → "= = Career = ="
        marks = list(heading.group(1))
        return [*marks, *to_tokens(heading.group(2), form), *marks]
    line = _NUMBER_SEPARATOR.sub(r" @\1@ ", line)
    tokenizer, _ = _moses()
    return [
        token
        for piece in _pieces(line)
        for token in tokenizer.tokenize(
            piece,
            aggressive_dash_splits=True,  # WikiText's "a @-@ b"
            escape=False,  # WikiText keeps & < > " as they are
            protected_patterns=_PROTECTED,
        )
    ]


def _pieces(line: str) -> list[str]:
    """``line`` cut at spaces into pieces of at most :data:`_MAX_PROTECTED` protected spans
    (almost always the whole line, one piece)."""
    if len(_PROTECTED_SPAN.findall(line)) <= _MAX_PROTECTED:
        return [line]
    pieces, words, spans = [], [], 0
    for word in line.split(" "):
        found = len(_PROTECTED_SPAN.findall(word))
        if found > _MAX_PROTECTED:  # "<unk><unk>…" as one word: its spans apart
            pieces += [" ".join(words)] if words else []
            pieces += _pieces(_PROTECTED_SPAN.sub(r" \g<0> ", word))
            words, spans = [], 0
            continue
        if words and spans + found > _MAX_PROTECTED:
            pieces.append(" ".join(words))
            words, spans = [], 0
        words.append(word)
        spans += found
    return [*pieces, " ".join(words)]


def to_plain(tokens: Sequence[str], form: str = "wikitext") -> str:
    """Tokens (one or more lines, ``<eos>`` or ``</s>`` between them) → plain text.

    Number separators and hyphens are joined, Moses' spacing undone, a place chunked into
    one token (``New_York_City``) spaced again, headings ``= = X = =`` shown as ``== X ==``;
    ``<unk>`` stays visible.
    """
    form = check_form(form)
    lines: list[list[str]] = [[]]
    for token in tokens:
        if token in EOS_TOKENS:
            lines.append([])
        else:
            lines[-1].append(token)
    return "\n".join(_plain_line(line, form) for line in lines)


def _plain_line(tokens: list[str], form: str) -> str:
    if form == "whitespace":
        return " ".join(tokens)
    marks = 0
    while marks < len(tokens) // 2 and tokens[marks] == "=" and tokens[-1 - marks] == "=":
        marks += 1
    if marks and marks * 2 < len(tokens):  # a heading: its "=" marks written together
        inner = _plain_line(tokens[marks:-marks], form)
        return f"{'=' * marks} {inner} {'=' * marks}"
    spaced = [_unchunk(t) for t in tokens]
    joined = _JOINED.sub(r"\1", f" {' '.join(spaced)} ").split()
    _, detokenizer = _moses()
    return detokenizer.detokenize(joined, unescape=False)


def _unchunk(token: str) -> str:
    """``New_York_City`` (a place chunked by :mod:`nslm.data.places`) → ``New York City``."""
    if "_" in token and not token.startswith("_") and not token.endswith("_"):
        return token.replace("_", " ")
    return token


def corpus_lines(text: str, form: str, input_format: str = "plain") -> list[str]:
    """A whole input as the lines of a corpus file (`` tok tok ``, one per input line).

    ``input_format``: ``plain`` (tokenized here by the run's rules) or ``tokenized`` (already
    in the corpus's form: passed through unchanged). A trailing newline is not a line. Each
    form feed ends a document: it becomes a line :data:`DOCUMENT_BREAK` of its own between
    the documents' lines (an empty document adds none).
    """
    check_input_format(input_format)
    out: list[str] = []
    for document in text.split(DOCUMENT_BREAK):
        lines = document.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if out and lines and out[-1] != DOCUMENT_BREAK:
            out.append(DOCUMENT_BREAK)
        if input_format == "tokenized":
            out += lines
        else:
            out += [
                " " + " ".join(to_tokens(line, form)) + " " if line.strip() else " "
                for line in lines
            ]
    return out


def prompt_line(prompt: str, form: str, input_format: str = "plain") -> str:
    """A prompt (one line; a line break in it is a line end, as ``<eos>`` is) as the corpus
    line it reads as: ``"in 1914, and"`` → ``" in 1914 , and "``. A prompt that holds a form
    feed is read from its last document on: what comes before another document's start is
    not this document's context."""
    check_input_format(input_format)
    prompt = prompt.split(DOCUMENT_BREAK)[-1]
    if input_format == "tokenized":
        return " " + prompt.replace("\n", " <eos> ") + " "
    parts = [" ".join(to_tokens(line, form)) for line in prompt.split("\n")]
    return " " + " <eos> ".join(parts) + " "


def check_input_format(input_format: str) -> str:
    if input_format not in INPUT_FORMATS:
        raise NslmError(f"unknown input format {input_format!r}; one of {', '.join(INPUT_FORMATS)}")
    return input_format
