"""The class members a micro-model can name, as the Transformer's token sequences.

Each member w of a class vocabulary V_c (``New_York_City`` written ``New York City``) is
spelt two ways: ``" w"`` (after a word or punctuation such as ``,``) and ``"w"`` (at a line
start or after an opening mark such as ``(`` or a dash: :data:`OPENERS`). Which spelling a
position uses is fixed by the token before it, so at every position each member has one
token sequence τ(w).

The mixture (:mod:`nslm.transformer.mixture`) treats "the next word is w" as an event of
the Transformer's continuations: the tokens τ(w), then a token that does not extend w. A
token extends w when it starts with a letter or digit (``1914`` + ``5``, ``Paris`` + ``ian``)
or when it continues τ(w) towards a longer member (``New York`` + `` City``, ``3`` +
``.``): F(w) = the word-continuing tokens ∪ the children of τ(w) in the members' trie. With
this F the events of different members are disjoint (one member's tokens followed by a
token of F(w) is never the event of w), which keeps the mixture a proper distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OPENERS = frozenset("([{–—-/$£€#\n\"'")  # after these a member is written without a space


@dataclass
class Spelling:
    """One spelling of every member: token sequences padded with -1, the trie children of
    each member's sequence, and the sequences' first tokens."""

    tokens: np.ndarray  # (W, L) int64, -1 after the end
    lengths: np.ndarray  # (W,)
    children: list[np.ndarray]  # per member: token ids that extend τ(w) to a longer member
    first: np.ndarray  # sorted distinct first tokens

    def matches(self, actual: np.ndarray) -> np.ndarray:
        """Per member: how many leading tokens of ``actual`` (the text from here) match τ(w)."""
        width = min(self.tokens.shape[1], len(actual))
        eq = self.tokens[:, :width] == actual[None, :width]
        run = np.cumprod(eq, axis=1)
        return run.sum(axis=1)


@dataclass
class Members:
    """The members of the modelled classes (the union of their V_c, as plain strings), both
    spellings, and the token sets the scoring pass must measure at every position."""

    strings: tuple[str, ...]  # plain spelling of each member
    classes: dict[str, np.ndarray]  # class → member index of each V_c candidate (aligned)
    spaced: Spelling
    bare: Spelling
    continuing: np.ndarray  # (V,) bool: tokens that start with a letter or digit
    extra: np.ndarray  # (E,) token ids: every child of some member, not continuing

    def token_sets(self) -> list[np.ndarray]:
        """The masks whose per-position log mass the pass keeps: the continuing tokens, then
        each extra child alone."""
        size = len(self.continuing)
        sets = [self.continuing]
        for token in self.extra:
            mask = np.zeros(size, dtype=bool)
            mask[token] = True
            sets.append(mask)
        return sets

    def spelling(self, previous_token_text: str | None) -> Spelling:
        """The spelling used after a token ending in ``previous_token_text``'s last char."""
        if not previous_token_text or previous_token_text[-1] in OPENERS:
            return self.bare
        return self.spaced


def surface(token: str) -> str:
    """A corpus token as written in plain text (a chunked place's ``_`` are spaces)."""
    if "_" in token and not token.startswith("_") and not token.endswith("_"):
        return token.replace("_", " ")
    return token


def _spelling(tokenizer, texts: list[str]) -> Spelling:
    seqs = [tokenizer.encode(t, add_special_tokens=False).ids for t in texts]
    width = max(len(s) for s in seqs)
    tokens = np.full((len(seqs), width), -1, dtype=np.int64)
    for i, s in enumerate(seqs):
        tokens[i, : len(s)] = s
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    prefixes: dict[tuple[int, ...], set[int]] = {}
    for s in seqs:
        for k in range(1, len(s)):
            prefixes.setdefault(tuple(s[:k]), set()).add(s[k])
    children = [np.array(sorted(prefixes.get(tuple(s), ())), dtype=np.int64) for s in seqs]
    return Spelling(tokens, lengths, children, np.unique(tokens[:, 0]))


def continuing_mask(tokenizer, vocab_size: int) -> np.ndarray:
    """Tokens whose text starts with a letter or digit (they would extend a word)."""
    mask = np.zeros(vocab_size, dtype=bool)
    for i in range(vocab_size):
        text = tokenizer.decode([i], skip_special_tokens=False)
        mask[i] = bool(text) and text[0].isalnum()
    return mask


def build_members(tokenizer, vocab_size: int, class_strings: dict[str, list[str]]) -> Members:
    """``class_strings``: each class's V_c as corpus tokens, in V_c's order."""
    strings: list[str] = []
    index: dict[str, int] = {}
    classes = {}
    for name, tokens in class_strings.items():
        rows = []
        for token in tokens:
            text = surface(token)
            if text not in index:
                index[text] = len(strings)
                strings.append(text)
            rows.append(index[text])
        classes[name] = np.asarray(rows, dtype=np.int64)
    spaced = _spelling(tokenizer, [" " + s for s in strings])
    bare = _spelling(tokenizer, strings)
    continuing = continuing_mask(tokenizer, vocab_size)
    kids = np.unique(np.concatenate([*spaced.children, *bare.children, np.zeros(0, np.int64)]))
    extra = kids[~continuing[kids]] if len(kids) else kids
    return Members(tuple(strings), classes, spaced, bare, continuing, extra.astype(np.int64))
