"""One class as a micro-model sees it: V_c with per-candidate attributes, and its positions.

A built-in class (``<year>``, ``<city>``, …) comes from the prepared corpus's rules. A user
class comes from a regex over the vocabulary: :func:`regex_class`. Building a class reads
only the vocabulary, the class metadata and the (type, class) training counts, never a
split, so a run directory's assets (:mod:`nslm.runs.assets`) are enough to load micro.json.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.numbers import NUMBER_CLASSES, is_number, number_value
from nslm.data.places import PLACE_CLASSES
from nslm.errors import NslmError
from nslm.micro.history import Context, previous_index

FAMILIES = {"numbers": NUMBER_CLASSES, "places": PLACE_CLASSES}
# the numbers that count or measure (a context mode of its own, "quantity"): not the dates
QUANTITY_CLASSES = tuple(c for c in NUMBER_CLASSES if c not in ("year", "day"))


def precision_step(token: str) -> float:
    """The rounding step a number string was written at (for the ``convert`` metric).

    Decimals count as written (``8.05`` → 0.01). An integer's trailing zeros are taken as
    rounding (``1,600`` → 100), as Wikipedia's ``{{convert}}`` rounds, but at least two
    significant digits are kept so that ``10`` is not "correct" for 8.05 (``10`` → 1).
    """
    if not is_number(token):
        return np.nan
    digits = token.replace(",", "")
    if "." in digits:
        return 10.0 ** -len(digits.split(".")[1])
    canonical = str(int(digits))  # "08" is 8 and "0000" is 0: leading zeros say nothing
    trailing = len(canonical) - len(canonical.rstrip("0")) if canonical != "0" else 0
    return 10.0 ** min(trailing, max(len(canonical) - 2, 0))


@dataclass
class Candidates:
    """Attributes of the members of V_c, aligned with ``vocab_ids`` (shape (K,) each).

    ``counts`` is the training count *as this class*: "1990" counts its ``<year>`` uses for
    ``<year>`` and its ``<range>`` uses for ``<range>``. Metric functions read these fields.
    """

    vocab_ids: np.ndarray
    strings: tuple[str, ...]
    values: np.ndarray
    coords: np.ndarray  # (K, 2) lat, lon
    counts: np.ndarray
    steps: np.ndarray  # precision_step of each string

    def __len__(self) -> int:
        return len(self.vocab_ids)

    def take(self, index: np.ndarray) -> Candidates:
        """The candidates at ``index`` (any shape), e.g. the actual target of each position."""
        return Candidates(
            vocab_ids=self.vocab_ids[index],
            # a 1-D take keeps the strings, so a plug-in metric can read its targets' types
            strings=tuple(self.strings[i] for i in index) if np.ndim(index) == 1 else (),
            values=self.values[index],
            coords=self.coords[index],
            counts=self.counts[index],
            steps=self.steps[index],
        )

    def as_row(self) -> Candidates:
        """Shapes (1, K) so metric expressions broadcast against (B, 1) contexts."""
        return Candidates(
            vocab_ids=self.vocab_ids[None, :],
            strings=self.strings,
            values=self.values[None, :],
            coords=self.coords[None, :, :],
            counts=self.counts[None, :],
            steps=self.steps[None, :],
        )


@dataclass
class ClassData:
    """A class: its candidates, and how to find its target and context positions in a split.

    ``target_mask(split)`` marks the scored positions (in-vocabulary tokens of the class);
    ``context_mask(split, mode)`` marks the tokens that may serve as w_prev.
    """

    name: str
    family: str
    candidates: Candidates
    vocab_fingerprint: str
    target_mask: Callable[[Split], np.ndarray]
    context_mask: Callable[[Split, str], np.ndarray]
    _lookup: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0, np.int64))

    def __post_init__(self) -> None:
        if len(self.candidates) == 0:
            raise NslmError(f"class <{self.name}> has an empty vocabulary (no training types)")

    @property
    def fingerprint(self) -> str:
        """SHA-256 of V_c's strings: a micro-model fitted on another V_c is refused."""
        return hashlib.sha256("\n".join(self.candidates.strings).encode()).hexdigest()[:16]

    def positions(self, split: Split) -> tuple[np.ndarray, np.ndarray]:
        """The scored positions of a split and the index of each target within V_c."""
        positions = np.flatnonzero(self.target_mask(split))
        index = self._lookup[split.token_ids[positions]]
        if (index < 0).any():
            bad = split.token_ids[positions[index < 0][0]]
            raise NslmError(f"a <{self.name}> token (type id {bad}) is not in V_c")
        return positions, index

    def context(self, split: Split, positions: np.ndarray, mode: str) -> Context:
        prev = previous_index(self.context_mask(split, mode), split.article_ids)
        quantity = None
        if self.family == "numbers":
            quantity = previous_index(self.context_mask(split, "quantity"), split.article_ids)
        return Context.at(split, positions, prev, quantity)


def _candidates(corpus: PreparedCorpus, ids: np.ndarray, train_counts: np.ndarray) -> Candidates:
    strings = tuple(corpus.vocab.itos[i] for i in ids)
    values = np.array([number_value(s) if is_number(s) else np.nan for s in strings])
    return Candidates(
        vocab_ids=ids.astype(np.int64),
        strings=strings,
        values=values,
        coords=corpus.type_coords()[ids] if len(ids) else np.empty((0, 2)),
        counts=train_counts.astype(np.float64),
        steps=np.array([precision_step(s) for s in strings]),
    )


def _lookup(corpus: PreparedCorpus, ids: np.ndarray) -> np.ndarray:
    lookup = np.full(len(corpus.vocab), -1, dtype=np.int64)
    lookup[ids] = np.arange(len(ids))
    return lookup


def vocabulary_fingerprint(corpus: PreparedCorpus) -> str:
    return hashlib.sha256("\n".join(corpus.vocab.itos).encode()).hexdigest()[:16]


def builtin_class(corpus: PreparedCorpus, name: str) -> ClassData:
    """A class tagged by the corpus's rules (docs/data.md): ``year``, ``city``, …"""
    cid = corpus.class_id(name)
    name = corpus.class_names[cid]
    # A class tagged at preparation that is neither a number nor a place (a user class of
    # the data module) is its own family.
    family = next((f for f, members in FAMILIES.items() if name in members), "user")
    try:
        ids = corpus.class_vocab(name)
    except KeyError:
        raise NslmError(f"the corpus cannot list the vocabulary of class <{name}>") from None
    lookup = _lookup(corpus, ids)
    # From the (type, class) training counts, not the train split: a run's assets hold them.
    counts = corpus.type_class_counts()[ids, cid]
    members = FAMILIES.get(family, (name,))
    family_ids = [corpus.class_names.index(m) for m in members if m in corpus.class_names]
    quantity_ids = [
        corpus.class_names.index(m) for m in QUANTITY_CLASSES if m in corpus.class_names
    ]

    def target_mask(split: Split) -> np.ndarray:
        return split.class_ids == cid

    def context_mask(split: Split, mode: str) -> np.ndarray:
        if mode == "class":
            return split.rule_class_ids == cid
        if mode == "quantity":
            return np.isin(split.rule_class_ids, quantity_ids)
        return np.isin(split.rule_class_ids, family_ids)

    return ClassData(
        name=name,
        family=family,
        candidates=_candidates(corpus, ids, np.asarray(counts)),
        vocab_fingerprint=vocabulary_fingerprint(corpus),
        target_mask=target_mask,
        context_mask=context_mask,
        _lookup=lookup,
    )


def regex_class(corpus: PreparedCorpus, name: str, pattern: str) -> ClassData:
    """A user class: every vocabulary type that fully matches ``pattern`` (paper Table 1, step 2).

    Positions are the tokens of those types; context is the previous such token (mode
    ``class``) — there is no family, so ``family`` reads the same. Values are parsed for
    number-shaped types, so ``diff`` and ``value`` work on numeric user classes.
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise NslmError(f"class <{name}>: bad regex {pattern!r}: {exc}") from None
    matches = np.array([regex.fullmatch(t) is not None for t in corpus.vocab.itos], dtype=bool)
    matches[corpus.vocab.unk_id] = False
    ids = np.flatnonzero(matches)
    lookup = _lookup(corpus, ids)
    counts = corpus.type_class_counts()[ids].sum(axis=1)  # every training use of the type

    def target_mask(split: Split) -> np.ndarray:
        return matches[split.token_ids]

    def context_mask(split: Split, mode: str) -> np.ndarray:
        return matches[split.token_ids]

    return ClassData(
        name=name,
        family="user",
        candidates=_candidates(corpus, ids, counts),
        vocab_fingerprint=vocabulary_fingerprint(corpus),
        target_mask=target_mask,
        context_mask=context_mask,
        _lookup=lookup,
    )
