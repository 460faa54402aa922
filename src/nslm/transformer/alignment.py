"""Where each corpus token of a text lies in its plain text, and which Transformer tokens
spell it.

A text is scored twice over: the corpus tokens (:func:`nslm.data.fixed_vocab.prepare_text`:
numbers re-joined, places chunked, classes tagged) say which words are class members, and
the Transformer's own tokens carry the probabilities. :func:`char_spans` finds each corpus
token in the plain text (WikiText's ``@-@``/``@,@``/``@.@`` read as ``-``, ``,``, ``.``, a
chunked place with its spaces, ``<eos>`` as the line break); :func:`token_ranges` gives
each found corpus token the Transformer tokens that start inside it, counting the space
before it (byte-level BPE writes ``" Paris"`` as one token).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nslm.data.text import EOS_TOKENS

_SEPARATORS = {"@-@": "-", "@,@": ",", "@.@": "."}
_QUOTES = {'"': '"“”„', "'": "'‘’‚"}
_LOOKAHEAD = 40  # characters searched past the cursor before a token counts as not found


def _surface(token: str) -> str:
    if token in _SEPARATORS:
        return _SEPARATORS[token]
    if "_" in token and not token.startswith("_") and not token.endswith("_"):
        return token.replace("_", " ")
    return token


def _find(plain: str, surface: str, cursor: int, resync: bool = False) -> int:
    """The start of ``surface`` at or just after ``cursor`` (a quote matches its curly forms:
    the nearest of them), −1. Only whitespace may be skipped, unless ``resync``: after a
    token that was not found, the next one may skip what that token left unread."""
    window = plain[cursor : cursor + _LOOKAHEAD + len(surface)]
    forms = list(_QUOTES[surface]) if surface in _QUOTES else [surface]
    hits = [h for h in map(window.find, forms) if h >= 0]
    at = min(hits) if hits else -1
    if at < 0 or (window[:at].strip() and not resync):
        return -1
    return cursor + at


def char_spans(plain: str, tokens: Sequence[str]) -> np.ndarray:
    """(N, 2) [start, end) of each corpus token in ``plain``; (−1, −1) where not found. A
    token not found leaves the cursor where it was; the next token found re-synchronises."""
    spans = np.full((len(tokens), 2), -1, dtype=np.int64)
    cursor = 0
    lost = False
    for i, token in enumerate(tokens):
        if token in EOS_TOKENS:
            newline = plain.find("\n", cursor)
            if newline >= 0 and not plain[cursor:newline].strip():
                spans[i] = (newline, newline + 1)
                cursor = newline + 1
            continue
        surface = _surface(token)
        at = _find(plain, surface, cursor, resync=lost)
        lost = at < 0
        if lost:
            continue
        end = at + (1 if surface in _QUOTES and plain[at] != surface else len(surface))
        spans[i] = (at, end)
        cursor = end
    return spans


def token_ranges(spans: np.ndarray, offsets: np.ndarray, plain: str) -> np.ndarray:
    """(N, 2) [first, last + 1) Transformer tokens of each corpus token: the tokens whose
    start lies in the corpus token's span widened to the whitespace before it. A corpus
    token counts as spelt only when its span starts and ends on Transformer token edges;
    (−1, −1) otherwise."""
    starts, ends = offsets[:, 0], offsets[:, 1]
    out = np.full((len(spans), 2), -1, dtype=np.int64)
    for i, (a, b) in enumerate(spans):
        if a < 0:
            continue
        lead = a
        while lead > 0 and plain[lead - 1] == " ":
            lead -= 1
        first = int(np.searchsorted(starts, lead))
        last = int(np.searchsorted(starts, b))  # tokens starting before b
        if first >= last or starts[first] not in (lead, a) or ends[last - 1] != b:
            continue
        out[i] = (first, last)
    return out
