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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    tokenizer: Any = None  # what spelt them (:meth:`with_strings` spells more)

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

    def with_strings(self, texts: Sequence[str]) -> Members:
        """These members and ``texts`` (plain strings, a function's results: ``23.3``) as
        one member set, for one root. A new string is kept only where every token it adds
        to the trie as a child, its own included, is continuing or already measured by the
        scoring pass (:attr:`extra`): the end of a word needs that token's mass there."""
        index = self.__dict__.setdefault("_index", {s: k for k, s in enumerate(self.strings)})
        new = [t for t in dict.fromkeys(texts) if t and t not in index]
        if not new:
            return self
        measured = self.continuing.copy()
        measured[self.extra] = True
        seqs = {
            key: [self.tokenizer.encode(p + t, add_special_tokens=False).ids for t in new]
            for key, p in (("spaced", " "), ("bare", ""))
        }
        keep = [
            k
            for k in range(len(new))
            if all(
                measured[tok]
                for key in seqs
                for tok in _children_of(getattr(self, key), seqs[key][k], seqs[key])
            )
        ]
        if not keep:
            return self
        spaced = _extend(self.spaced, [seqs["spaced"][k] for k in keep])
        bare = _extend(self.bare, [seqs["bare"][k] for k in keep])
        strings = self.strings + tuple(new[k] for k in keep)
        return Members(
            strings, self.classes, spaced, bare, self.continuing, self.extra, self.tokenizer
        )

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


def _prefixes(spelling: Spelling) -> dict[tuple[int, ...], set[int]]:
    """Every proper prefix of a member's tokens → the tokens that follow it (cached)."""
    cache = spelling.__dict__.get("_prefixes")
    if cache is None:
        cache = {}
        for row, n in zip(spelling.tokens.tolist(), spelling.lengths.tolist(), strict=True):
            for k in range(1, n):
                cache.setdefault(tuple(row[:k]), set()).add(row[k])
        spelling.__dict__["_prefixes"] = cache
    return cache


def _sequences(spelling: Spelling) -> dict[tuple[int, ...], list[int]]:
    """Each member's tokens → the members spelt so (cached)."""
    cache = spelling.__dict__.get("_sequences")
    if cache is None:
        cache = {}
        for w, (row, n) in enumerate(
            zip(spelling.tokens.tolist(), spelling.lengths.tolist(), strict=True)
        ):
            cache.setdefault(tuple(row[:n]), []).append(w)
        spelling.__dict__["_sequences"] = cache
    return cache


def _children_of(spelling: Spelling, seq: list[int], others: list[list[int]]) -> set[int]:
    """The trie's children that adding ``seq`` to ``spelling``'s members (beside the new
    ``others``) would bring: the tokens that extend ``seq`` towards a longer member, and
    ``seq``'s own tokens after a prefix that is a member."""
    out = set(_prefixes(spelling).get(tuple(seq), ()))
    out.update(t[len(seq)] for t in others if len(t) > len(seq) and t[: len(seq)] == seq)
    sequences = _sequences(spelling)
    complete = {tuple(t) for t in others}
    out.update(
        seq[k]
        for k in range(1, len(seq))
        if tuple(seq[:k]) in sequences or tuple(seq[:k]) in complete
    )
    return out


def _extend(spelling: Spelling, seqs: list[list[int]]) -> Spelling:
    """``spelling`` with the members ``seqs`` appended (the trie's children updated)."""
    width = max(spelling.tokens.shape[1], max(len(s) for s in seqs))
    tokens = np.full((len(spelling.lengths) + len(seqs), width), -1, dtype=np.int64)
    tokens[: len(spelling.lengths), : spelling.tokens.shape[1]] = spelling.tokens
    for i, s in enumerate(seqs):
        tokens[len(spelling.lengths) + i, : len(s)] = s
    lengths = np.concatenate([spelling.lengths, [len(s) for s in seqs]]).astype(np.int64)
    children = list(spelling.children)
    sequences, prefixes = _sequences(spelling), _prefixes(spelling)
    new = {tuple(s): i for i, s in enumerate(seqs)}
    for s in seqs:
        for k in range(1, len(s)):
            for w in sequences.get(tuple(s[:k]), ()):  # an old member that s extends
                children[w] = np.union1d(children[w], [s[k]])
    for s in seqs:
        kids = set(prefixes.get(tuple(s), ()))
        kids.update(t[len(s)] for t in new if len(t) > len(s) and t[: len(s)] == tuple(s))
        children.append(np.array(sorted(kids), dtype=np.int64))
    for s in seqs:  # a new member that another new one extends
        for k in range(1, len(s)):
            if tuple(s[:k]) in new:
                j = len(spelling.lengths) + new[tuple(s[:k])]
                children[j] = np.union1d(children[j], [s[k]]).astype(np.int64)
    first = np.union1d(spelling.first, [s[0] for s in seqs]).astype(np.int64)
    return Spelling(tokens, lengths, children, first)


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
    return Members(
        tuple(strings), classes, spaced, bare, continuing, extra.astype(np.int64), tokenizer
    )
