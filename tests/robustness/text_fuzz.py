"""The fuzz target of the text boundary: plain → tokens → plain (:mod:`nslm.data.text`).

Raw bytes become text three ways (UTF-8 with replacement characters; UTF-8 with each
undecodable byte as a lone surrogate, as Python reads a command line or a file name; UTF-16,
which reaches every code point of the BMP, lone surrogates included), and the text goes
through every function of the boundary in both text forms and both input formats. A crash is
an exception, or one of what the boundary keeps true failing: every token is non-empty and
holds no whitespace (a corpus line splits back into the same tokens), detokenizing returns
text, and an input of n lines gives n corpus lines with no line break inside one.
benchmarks/text/text_bad_input.py runs it under atheris (hypothesis without it); the tests run
it under hypothesis.
"""

from __future__ import annotations

from hypothesis import strategies as st

from nslm.data.text import (
    DOCUMENT_BREAK,
    INPUT_FORMATS,
    TEXT_FORMS,
    corpus_lines,
    prompt_line,
    to_plain,
    to_tokens,
)


class BoundaryBroken(AssertionError):
    """What the text boundary keeps true did not hold: a crash, as an exception is."""


def decode(data: bytes) -> str:
    """The fuzzer's bytes as text: the first byte picks how the rest is decoded."""
    if not data:
        return ""
    mode, body = data[0] % 3, data[1:]
    if mode == 0:
        return body.decode("utf-8", errors="replace")
    if mode == 1:
        return body.decode("utf-8", errors="surrogateescape")
    return body[: len(body) // 2 * 2].decode("utf-16-le", errors="surrogatepass")


def _check(ok: bool, what: str, text: str) -> None:
    if not ok:
        raise BoundaryBroken(f"{what}: {text[:200]!a}")


def text_target(data: bytes) -> None:
    """Plain → tokens → plain, and a whole input → corpus lines (one per line, and a break
    between documents), for one input."""
    text = decode(data)
    n_lines = expected_corpus_lines(text)
    for form in TEXT_FORMS:
        tokens = to_tokens(text, form)
        _check(all(isinstance(t, str) and t.split() == [t] for t in tokens), "a bad token", text)
        _check(isinstance(to_plain(tokens, form), str), "to_plain", text)
        for input_format in INPUT_FORMATS:
            got = corpus_lines(text, form, input_format)
            _check(len(got) == n_lines, f"{len(got)} corpus lines of {n_lines}", text)
            _check(not any("\n" in line for line in got), "a line break in a line", text)
            _check("\n" not in prompt_line(text, form, input_format), "prompt_line", text)


def expected_corpus_lines(text: str) -> int:
    """One corpus line per input line of each document (a trailing newline is not a line),
    and one document break between two documents that hold lines (docs/text.md)."""
    counts = []
    for document in text.split(DOCUMENT_BREAK):
        lines = document.split("\n")
        counts.append(len(lines) - (lines[-1] == ""))
    holding = [n for n in counts if n]
    return sum(holding) + max(0, len(holding) - 1)


# Pieces the rules look at, for hypothesis (the fuzzer finds them from its seeds).
FRAGMENTS = [
    "1914,",
    "1,000",
    "3.5",
    "well-known",
    "(16 km)",
    "$8,600.5",
    "\u201cquoted\u201d",
    "don't",
    "== Heading ==",
    " @-@ ",
    " @,@ ",
    "<unk>",
    "</s>",
    "\r\n",
    "\n",
    "\t",
    "\u200b",
    "\u202e",
    "\ufeff",
    "\x00",
    "\x1b",
    "\udcff",
    "\U0001f642",
    "战争",
    "في",
    "युद्ध",
    "e\u0301",
    "...",
    "'s",
    "--",
    "\u2014",
    "&amp;",
    "<b>",
]
TEXT = st.lists(
    st.one_of(
        st.sampled_from(FRAGMENTS),
        st.text(st.characters(blacklist_categories=()), max_size=12),  # surrogates too
        st.from_regex(r"[0-9]{1,4}[,.][0-9]{1,3}", fullmatch=True),
    ),
    max_size=30,
).map("".join)
# the same, as bytes text_target decodes (mode 2: UTF-16, which carries any of them)
TEXT_BYTES = TEXT.map(lambda t: b"\x02" + t.encode("utf-16-le", errors="surrogatepass"))
SEEDS = [
    "The war began in 1914, and ended in 1918 (4 years) at a cost of $8,600.5 million.",
    "William the Conqueror won the Battle of Hastings in 1066, and died in 1087.",
    "== Career ==\nIt is a well-known town, 16 km (10 mi) from New York City.",
    "\u201cDon\u2019t,\u201d she said \u2014 it\u2019s 3.5 \u00b0C.",
]
