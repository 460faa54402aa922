"""Strings outside the vocabulary: a character n-gram spelling model over a token's bytes.

A language model here has a closed vocabulary V (every token type of the training split) plus
``<unk>``. To give every string a probability ("proper scores"), the probability of ``<unk>``
is spread over all the strings outside V by a spelling model:

    P(s | h) = P(s | h)                              for s ∈ V
             = P(<unk> | h) · P_spell(s | s ∉ V)      for s ∉ V
    P_spell(s | s ∉ V) = P_spell(s) / (1 − Σ_{v ∈ V} P_spell(v))

so that the total over all strings is exactly one.

P_spell is an n-gram model over the UTF-8 bytes of a token: 257 symbols (the 256 byte values
and an end-of-token symbol), the context padded with a begin symbol. It is smoothed by
interpolated Witten-Bell (Witten & Bell 1991; in the interpolated form of Chen & Goodman
1998), from the uniform distribution over the 257 symbols up:

    P(w | h) = (c(h w) + N1+(h •) · P(w | h')) / (c(h) + N1+(h •))

h' being h without its oldest symbol, N1+(h •) the distinct symbols seen after h, and an
unseen h passing P(w | h') on unchanged. Witten-Bell needs no discounts to estimate, and every
context keeps a share N1+ / (c + N1+) > 0 for the uniform floor, so P(end | h) > 0 in each of
the finitely many contexts: the mass of never ending is zero and the probabilities of all finite
byte strings sum to one (the empty string's included: a small share, as no type is empty).

It is trained on the training text's rare types, each type counted once: by Good & Turing
(Good 1953), what has not been seen looks like what was seen once, so the hapaxes spell the
way the unknown words will, while the frequent types (short function words) would not.
WikiText-2 has no hapaxes (its words seen under three times are ``<unk>``): there the types
seen the fewest times stand in for them.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus

END = 256  # the end of a token: the 257th symbol that a context predicts
BEGIN = 257  # pads the context before a token's first byte; never predicted
SYMBOLS = 257  # the 256 byte values and END

# (symbol → times seen after the context, c(h) + N1+(h •), N1+(h •)) of one seen context
ContextEntry = tuple[dict[int, int], int, int]


def encoded(token: str | bytes) -> bytes:
    """A token's UTF-8 bytes; bytes are taken as they are (the model covers every byte string,
    not only valid UTF-8). A lone surrogate (never in decoded text, though a str can hold one)
    is encoded as itself, so any str is scored rather than raising, and distinct strings keep
    distinct byte strings."""
    return token if isinstance(token, bytes) else token.encode("utf-8", "surrogatepass")


def symbols_of(token: str | bytes) -> tuple[int, ...]:
    """The token's bytes, then END."""
    return (*encoded(token), END)


def _texts(members: frozenset[bytes]) -> list[str]:
    """V's byte strings as JSON can hold them: V comes from str tokens (``outside``), so each
    decodes, a lone surrogate back to itself."""
    return [member.decode("utf-8", "surrogatepass") for member in members]


def _context_entries(
    order: int, ngrams: dict[tuple[int, ...], int]
) -> dict[tuple[int, ...], ContextEntry]:
    """Every context of length 0 … order − 1 that was seen, from the highest-order n-grams:
    each position of a token counts once at every order, so a lower order's counts are the
    sums over the higher contexts that end in it."""
    followers: dict[tuple[int, ...], Counter[int]] = {}
    for ngram, count in ngrams.items():
        context, symbol = ngram[:-1], ngram[-1]
        for length in range(order):
            suffix = context[len(context) - length :]
            followers.setdefault(suffix, Counter())[symbol] += count
    return {
        context: (dict(seen), seen.total() + len(seen), len(seen))
        for context, seen in followers.items()
    }


class SpellingModel:
    """P_spell over all finite byte strings (module docstring): ``fit`` on rare types, then
    ``log_prob``; ``outside(V)`` gives the model of P_spell(s | s ∉ V). Parameters as JSON."""

    def __init__(self, order: int, ngrams: dict[tuple[int, ...], int]) -> None:
        if order < 1:
            raise ValueError(f"order must be at least 1, got {order}")
        if any(len(ngram) != order for ngram in ngrams):
            raise ValueError(f"every n-gram of an order-{order} model has {order} symbols")
        self.order = order
        self.ngrams = ngrams  # (order − 1 context symbols, next symbol) → times seen
        self._contexts = _context_entries(order, ngrams)
        self.vocab: frozenset[bytes] | None = None  # V's byte strings, once fixed by `outside`
        self.log_mass_outside = 0.0  # log(1 − Σ_{v ∈ V} P_spell(v))

    @classmethod
    def fit(cls, types: Iterable[str], order: int = 4) -> SpellingModel:
        """Counts of every n-gram of the types' symbols, each distinct type counted once."""
        ngrams: Counter[tuple[int, ...]] = Counter()
        for token in set(types):  # the spellings of types, not their frequencies
            history = (BEGIN,) * (order - 1) + symbols_of(token)
            for end in range(order, len(history) + 1):
                ngrams[history[end - order : end]] += 1
        return cls(order, dict(ngrams))

    def _prob(self, context: tuple[int, ...], symbol: int) -> float:
        """P(symbol | context), ``context`` the order − 1 symbols before it."""
        prob = 1.0 / SYMBOLS
        for length in range(self.order):
            entry = self._contexts.get(context[len(context) - length :])
            if entry is None:
                break  # every longer context extends this one, so it is unseen too
            seen, denominator, distinct = entry
            prob = (seen.get(symbol, 0) + distinct * prob) / denominator
        return prob

    def next_distribution(self, prefix: bytes) -> np.ndarray:
        """P(· | prefix) over the 257 symbols (index 256 is END) after a token's first bytes."""
        context = ((BEGIN,) * (self.order - 1) + tuple(prefix))[len(prefix) :]
        return self._distribution(context)

    def normalisation_check(self) -> dict[str, float]:
        """Over every context the model has seen (any other backs off to one of them): the
        largest |Σ P(· | context) − 1| and the least P(END | context). Each next-symbol
        distribution summing to one with P(END) ≥ p > 0 everywhere makes the total over all
        finite strings one: the chance of not ending within n symbols is at most (1 − p)^n."""
        worst, least_end = 0.0, 1.0
        for context in self._contexts:
            full = (BEGIN,) * (self.order - 1 - len(context)) + context
            probs = self._distribution(full)
            worst = max(worst, abs(float(probs.sum()) - 1.0))
            least_end = min(least_end, float(probs[END]))
        return {"next_symbol_max_error": worst, "least_end_probability": least_end}

    def _distribution(self, context: tuple[int, ...]) -> np.ndarray:
        probs = np.full(SYMBOLS, 1.0 / SYMBOLS)
        for length in range(self.order):
            entry = self._contexts.get(context[len(context) - length :])
            if entry is None:
                break
            seen, denominator, distinct = entry
            counts = np.zeros(SYMBOLS)
            counts[list(seen)] = list(seen.values())
            probs = (counts + distinct * probs) / denominator
        return probs

    def log_prob(self, strings: Sequence[str | bytes]) -> np.ndarray:
        """Natural-log P_spell(s) of each string, over all finite byte strings."""
        pad = (BEGIN,) * (self.order - 1)
        out = np.empty(len(strings))
        for i, token in enumerate(strings):
            history = pad + symbols_of(token)
            # a sum of logs: a product of ~1/257 factors underflows past ~130 bytes
            out[i] = sum(
                math.log(self._prob(history[end - self.order + 1 : end], history[end]))
                for end in range(self.order - 1, len(history))
            )
        return out

    def outside(self, vocab: Iterable[str]) -> SpellingModel:
        """This model with V fixed: scores P_spell(s | s ∉ V) by :meth:`log_prob_outside`.

        Σ_{v ∈ V} P_spell(v) is a sum of positive terms by ``math.fsum`` (correctly rounded,
        whatever V's order), so 1 − Σ carries only the rounding of each P_spell(v).
        """
        members = frozenset(map(encoded, vocab))
        mass_in = math.fsum(np.exp(self.log_prob(list(members))).tolist())
        if not mass_in < 1.0:
            raise ValueError(f"V holds all of P_spell's mass ({mass_in!r}): nothing is left")
        fixed = copy.copy(self)  # shares the counts, which nothing mutates
        fixed.vocab = members
        fixed.log_mass_outside = math.log1p(-mass_in)
        return fixed

    def log_prob_outside(self, strings: Sequence[str | bytes]) -> np.ndarray:
        """log P_spell(s | s ∉ V) of each string; −inf for a member of V."""
        if self.vocab is None:
            raise ValueError("V is not fixed: call outside(vocab) first")
        out = self.log_prob(strings) - self.log_mass_outside
        out[[encoded(token) in self.vocab for token in strings]] = -np.inf
        return out

    def get_params(self) -> dict[str, Any]:
        """Plain JSON: the n-gram counts (sorted, so equal models give equal JSON) and V."""
        return {
            "order": self.order,
            "ngrams": [[*ngram, count] for ngram, count in sorted(self.ngrams.items())],
            "vocab": None if self.vocab is None else sorted(_texts(self.vocab)),
            "log_mass_outside": self.log_mass_outside,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> SpellingModel:
        ngrams = {tuple(int(s) for s in row[:-1]): int(row[-1]) for row in params["ngrams"]}
        model = cls(int(params["order"]), ngrams)
        if params.get("vocab") is not None:
            model.vocab = frozenset(map(encoded, params["vocab"]))
            model.log_mass_outside = float(params["log_mass_outside"])
        return model


def rare_types(corpus: PreparedCorpus) -> list[str]:
    """The training types seen the fewest times (the hapaxes where there are any), the
    vocabulary's own markers (``<unk>``, ``<eos>``) left out: what the spelling model of the
    unknown words learns from (Good & Turing: the unseen look like the rarest seen)."""
    counts = corpus.type_class_counts().sum(axis=1)
    itos = corpus.vocab.itos
    words = [i for i, t in enumerate(itos) if counts[i] > 0 and not _is_marker(t)]
    fewest = min(counts[i] for i in words)
    return [itos[i] for i in words if counts[i] == fewest]


def _is_marker(token: str) -> bool:
    return token.startswith("<") and token.endswith(">")


def fit_spelling(corpus: PreparedCorpus) -> SpellingModel:
    """The spelling model behind ``<unk>``, fitted on the rarest types, outside V; fitted
    once per corpus object (it depends on the corpus alone, and a text's score asks for it
    every time)."""
    fitted = corpus.__dict__.get("_spelling")
    if fitted is None:
        fitted = SpellingModel.fit(rare_types(corpus)).outside(corpus.vocab.itos)
        corpus.__dict__["_spelling"] = fitted
    return fitted
