"""Open-vocabulary class members: a class's micro-model extended to values never seen in training.

A micro-model is a function of the value, so a year, a count or a town the training text
never held can be scored like one it did. For class c with training vocabulary V_c and
open set O_c (every string c's rule accepts: every number of the class's shape, every
gazetteer place of the class):

    P_open(w | c, ctx) = (1 − β_c) · P_MM(w | c, ctx)    for w ∈ V_c      (paper Eq. 1)
                         β_c · q_c(w | ctx)               for w ∈ O_c \\ V_c

β_c, the probability that the class's next token is new, is the Good-Turing estimate
(Good 1953) from the class's training tokens: (n₁ + 1) / (N + 2), n₁ the tokens of types
seen once. q_c is a proper distribution over O_c \\ V_c:

* a finite O_c (``<year>``: 1000–2099; a place class: its gazetteer entries) is enumerated,
  and q_c is the class's own micro-model, metric ∘ PDF, normalised over the new members,
  smoothed by ε with the uniform distribution (uniform where the context is missing), so
  "2027" as w_prev favours 2028 and an unseen town near the previous place scores high;
* an unbounded number class gets the spelling model of :mod:`nslm.micro.open_numbers`; when
  its micro-model is binary on the conversion of the preceding quantity (``<convert>``),
  every rounding of the conversion that V_c lacks is found, and within its shape those
  share the micro-model's P(m = 1) as the candidates in V_c do: "8.0467" after "5 miles (".

Each part sums to one, so P(c | h) · P_open(w | c, ctx) keeps the NSLM of Eq. 4 a proper
distribution over the vocabulary plus every open member (tests/test_open_vocab.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nslm.data.numbers import NUMBER_CLASSES, number_value
from nslm.data.places import PLACE_CLASSES, chunk_token, load_gazetteer
from nslm.micro.classdata import Candidates, ClassData, precision_step
from nslm.micro.history import Context
from nslm.micro.logspace import logsumexp
from nslm.micro.model import MicroModel, metric_matrix, normalised_log_pdf, smooth
from nslm.micro.open_numbers import NumberShapes, rounded_spellings, shape_of

FIRST_YEAR, LAST_YEAR = 1000, 2099  # data/numbers.py is_year_shaped


def open_members(name: str) -> tuple[tuple[str, ...], np.ndarray, np.ndarray] | None:
    """(strings, values, coords) of a finite open set O_c, or None for an unbounded class."""
    if name == "year":
        years = np.arange(FIRST_YEAR, LAST_YEAR + 1)
        return tuple(map(str, years)), years.astype(float), np.full((len(years), 2), np.nan)
    if name in PLACE_CLASSES:
        places = sorted(
            {
                chunk_token(p.name): p for p in load_gazetteer().by_tokens.values() if p.cls == name
            }.items()
        )
        coords = np.array([[p.lat, p.lon] for _, p in places]).reshape(-1, 2)
        return tuple(s for s, _ in places), np.full(len(places), np.nan), coords
    return None


def as_candidates(strings: Sequence[str], values, coords) -> Candidates:
    """Members outside V_c as metric functions read them (no type id, no training count)."""
    n = len(strings)
    return Candidates(
        vocab_ids=np.full(n, -1, dtype=np.int64),
        strings=tuple(strings),
        values=np.asarray(values, dtype=float),
        coords=np.asarray(coords, dtype=float).reshape(-1, 2),
        counts=np.zeros(n),
        steps=np.array([precision_step(s) for s in strings]),
    )


class _Enumerated:
    """q_c over the enumerated O_c \\ V_c: the micro-model's metric ∘ PDF on the new members."""

    def __init__(self, micro: MicroModel, known: frozenset[str], strings, values, coords):
        keep = np.array([s not in known for s in strings], dtype=bool)
        self.strings = tuple(s for s, k in zip(strings, keep, strict=True) if k)
        self.index = {s: i for i, s in enumerate(self.strings)}
        self.members = ClassData(
            name=micro.cls.name,
            family=micro.cls.family,
            candidates=as_candidates(
                self.strings, np.asarray(values)[keep], np.asarray(coords)[keep]
            ),
            vocab_fingerprint=micro.cls.vocab_fingerprint,
            target_mask=micro.cls.target_mask,
            context_mask=micro.cls.context_mask,
        )
        self.metric, self.pdf, self.epsilon = micro.metric, micro.pdf, micro.epsilon
        # a count metric reads training counts, which every new member lacks: no information
        self.informative = self.metric.kind != "count" and self.metric.applies_to(
            self.members.candidates
        )

    def log_prob(self, ctx: Context) -> np.ndarray:
        """log q_c(w | ctx) for every row and every new member: (B, K_new)."""
        n = len(self.strings)
        out = np.full((len(ctx), n), -np.log(n))
        ok = self.metric.available(ctx) if self.informative else np.zeros(len(ctx), bool)
        if ok.any():
            m = metric_matrix(self.metric, self.members, ctx.rows(ok))
            log_q = normalised_log_pdf(self.pdf, m)
            out[ok] = smooth(log_q, -np.log(n), self.epsilon)  # ε with the uniform, as Eq. 1
        return out


class OpenClass:
    """P_open(w | c, ctx) of one class (module docstring): built from the class's fitted
    micro-model, then ``log_prob_new`` scores members outside V_c."""

    def __init__(self, micro: MicroModel, escape: float, shapes: NumberShapes | None = None):
        self.micro = micro
        self.cls = micro.cls
        self.escape = float(escape)
        self.shapes = shapes
        listed = open_members(self.cls.name)
        self.known = frozenset(self.cls.candidates.strings)  # V_c
        self.enumerated = None
        if listed is not None:
            if all(s in self.known for s in listed[0]):  # every US state is in V_<state>
                self.escape = 0.0  # no new member: nothing to escape to, P_open = P_MM
            else:
                self.enumerated = _Enumerated(micro, self.known, *listed)

    @classmethod
    def fit(cls, micro: MicroModel) -> OpenClass:
        """β_c by Good-Turing and, for an unbounded number class, the spelling model, both
        from the class's training counts (what a run keeps: no split is read)."""
        cand = micro.cls.candidates
        n_tokens = float(cand.counts.sum())
        hapaxes = [s for s, n in zip(cand.strings, cand.counts, strict=True) if n == 1]
        escape = (len(hapaxes) + 1) / (n_tokens + 2)  # < 1 even if every token is a hapax
        shapes = None
        if micro.cls.name in NUMBER_CLASSES and open_members(micro.cls.name) is None:
            shapes = NumberShapes(micro.cls.name).fit(hapaxes, cand.strings)
        return cls(micro, escape, shapes)

    @property
    def log_keep(self) -> float:
        """log(1 − β_c): what an in-vocabulary member's P_MM is multiplied by."""
        return float(np.log1p(-self.escape))

    def log_q(self, strings: list[str], ctx: Context) -> np.ndarray:
        """log q_c(w | ctx) for the token of each row (not in V_c); −inf for a string
        outside O_c (then nothing but ``<unk>`` can score it)."""
        out = np.full(len(strings), -np.inf)
        if self.enumerated is not None:
            where = np.array([self.enumerated.index.get(s, -1) for s in strings], dtype=np.int64)
            hit = np.flatnonzero(where >= 0)
            if len(hit):
                full = self.enumerated.log_prob(ctx.rows(hit))
                out[hit] = full[np.arange(len(hit)), where[hit]]
        elif self.shapes is not None and self.matching:
            p = self.micro.pdf.fitted["p"]
            out = self.shapes.log_prob_matching(strings, self.matches(ctx), p)
        elif self.shapes is not None:
            out = self.shapes.log_prob(strings)
        return out

    @property
    def matching(self) -> bool:
        """A binary micro-model on the conversion of the preceding quantity (``convert``):
        the new members it accepts are found by rounding, so it scores them too."""
        metric = self.micro.metric
        return metric.kind == "binary" and "convert_target" in metric.needs

    def matches(self, ctx: Context) -> list[set[str]]:
        """Per row: the strings outside V_c the binary micro-model accepts, among every
        rounding of every target of the row (:func:`rounded_spellings`)."""
        out = []
        for i in range(len(ctx)):
            targets = ctx.convert_target[i]
            spelled = sorted({s for t in targets for s in rounded_spellings(float(t))} - self.known)
            spelled = [s for s in spelled if shape_of(s) is not None]
            if not spelled:
                out.append(set())
                continue
            values = [number_value(s) for s in spelled]
            cand = as_candidates(spelled, values, np.full((len(spelled), 2), np.nan))
            accepted = self.micro.metric(cand.as_row(), ctx.rows(np.array([i])).as_column())
            out.append({s for s, ok in zip(spelled, np.ravel(accepted) > 0.5, strict=True) if ok})
        return out

    def log_prob_new(self, strings: list[str], ctx: Context) -> np.ndarray:
        """log β_c + log q_c(w | ctx): P_open of members outside V_c (−inf outside O_c)."""
        return self.log_q(strings, ctx) + (np.log(self.escape) if self.escape > 0 else -np.inf)

    def new_mass(self, ctx: Context) -> np.ndarray:
        """Σ_{w ∈ O_c \\ V_c} q_c(w | ctx) per row: 1 up to rounding (the sum-to-one check;
        enumerated where O_c is finite, shape by shape in closed form where it is not)."""
        if self.enumerated is not None:
            return np.exp(logsumexp(self.enumerated.log_prob(ctx), axis=1))
        if self.shapes is not None and self.matching:
            p = self.micro.pdf.fitted["p"]
            return np.array([self.shapes.matching_mass(m, p) for m in self.matches(ctx)])
        total = self.shapes.total_mass(self.cls.candidates.strings) if self.shapes else 0.0
        return np.full(len(ctx), total)  # 0 for a class without new members (β_c = 0 too)

    def top_new(self, ctx: Context, k: int) -> list[list[tuple[str, float]]]:
        """The k likeliest new members of each row with log β_c + log q_c (enumerated classes;
        an unbounded class has no ranking worth showing: its digits are uniform)."""
        if self.enumerated is None:
            return [[] for _ in range(len(ctx))]
        full = np.log(self.escape) + self.enumerated.log_prob(ctx)
        best = np.argsort(-full, axis=1, kind="stable")[:, :k]
        return [
            [(self.enumerated.strings[j], float(row[j])) for j in b]
            for row, b in zip(full, best, strict=True)
        ]

    def get_params(self) -> dict[str, Any]:
        return {
            "class": self.cls.name,
            "escape": self.escape,
            "open_set": "enumerated" if self.enumerated is not None else "shapes",
            "new_members": len(self.enumerated.strings) if self.enumerated is not None else None,
            "shapes": self.shapes.get_params() if self.shapes is not None else None,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any], micro: MicroModel) -> OpenClass:
        shapes = params.get("shapes")
        return cls(micro, params["escape"], NumberShapes.from_params(shapes) if shapes else None)


def fit_open(micro: dict[str, MicroModel]) -> dict[str, OpenClass]:
    """An open-vocabulary extension for every number and place class of ``micro``."""
    families = set(NUMBER_CLASSES) | set(PLACE_CLASSES)
    return {name: OpenClass.fit(m) for name, m in micro.items() if m.cls.name in families}
