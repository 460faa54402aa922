"""One micro-model over a class's open set: a year, a count or a place never seen in training,
scored by the same function as the ones that were.

For class c with training vocabulary V_c and open set O_c (every string c's rule accepts: the
years 1000–2099, the days 1–31, every gazetteer place of the class, every canonical number
spelling the class keeps), a *base* distribution v(w | ctx) over O_c says what the class's
function expects, and the training counts enter as a weight on the members already seen:

    P_open(w | c, ctx) = v(w | ctx) · e^{γ(w)} / Z(ctx),   γ(w) = a + b · log f(w) for w ∈ V_c,
                                                           γ(w) = 0 for w ∈ O_c \\ V_c
    Z(ctx) = Σ_{w ∈ O_c \\ V_c} v(w | ctx) + Σ_{w ∈ V_c} v(w | ctx) · e^{γ(w)}

f(w) the training frequency of w within the class. Z needs v over V_c only (v sums to one
over O_c), so the distribution is proper even where O_c is infinite. Whether the next member
is new is then the base's own answer: after "2027" the year difference's PDF puts its mass
on 2028–2035, which no known year can take; after "1990" it lands on known years, which the
weight favours further.

The base (:mod:`nslm.micro.open_bases`): for an enumerated O_c, the class's fitted metric ∘
PDF normalised over O_c, mixed with a prior (a population prior for places, a value density
for years, uniform for days); for an unbounded number class, the class's micro-model on V_c
mixed with a value model of every spelling (:mod:`nslm.micro.open_values`).

a, b and the base's mixing weights are fitted by deleted estimation (Jelinek & Mercer 1980):
the training articles in two halves, the counts from one half, the likelihood of the other
half's class tokens, some of which that half has not seen; then both ways round. No grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nslm.data.corpus import Split
from nslm.micro.history import Context
from nslm.micro.logspace import log1mexp, logsumexp
from nslm.micro.model import MicroModel
from nslm.micro.open_bases import Base, make_base

ROWS_PER_HALF = 400  # held-out class tokens per half that the deleted estimation reads


@dataclass
class KnownWeight:
    """γ(w) = a + b · log f(w) on the members of V_c (f: training frequency in the class)."""

    a: float = 0.0
    b: float = 0.0

    def gamma(self, log_freq: np.ndarray) -> np.ndarray:
        seen = np.isfinite(log_freq)
        return np.where(seen, self.a + self.b * np.where(seen, log_freq, 0.0), -np.inf)


def log_open(log_v_known: np.ndarray, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log P_open over V_c (B, K), log Z (B,)) from log v over V_c and γ (K,; −inf where the
    member is unseen, so that it keeps its base mass)."""
    seen = np.isfinite(gamma)
    known = np.where(seen, log_v_known, -np.inf)
    rest = log1mexp(np.minimum(logsumexp(known, axis=1), 0.0))  # Σ_{not seen} v
    boosted = logsumexp(known + np.where(seen, gamma, 0.0), axis=1)
    log_z = np.logaddexp(rest, boosted)
    return log_v_known + np.where(seen, gamma, 0.0) - log_z[:, None], log_z


class OpenMicroModel:
    """P_open(w | c, ctx) of one class (module docstring): ``fit(train)``, then score any string."""

    def __init__(self, micro: MicroModel, base: Base, weight: KnownWeight, how: str = "") -> None:
        self.micro = micro
        self.cls = micro.cls
        self.base = base
        self.weight = weight
        self.how = how
        counts = self.cls.candidates.counts
        with np.errstate(divide="ignore"):
            self.log_freq = np.log(counts) - np.log(max(counts.sum(), 1.0))
        self.known = {s: i for i, s in enumerate(self.cls.candidates.strings)}

    # -- fitting ---------------------------------------------------------------------------

    @classmethod
    def fit(cls, micro: MicroModel, train: Split, seed: int = 0) -> OpenMicroModel:
        base = make_base(micro, train)
        positions, index = micro.cls.positions(train)
        ctx = micro.cls.context(train, positions, micro.context)
        halves = train.article_ids[positions] % 2
        rng = np.random.default_rng(seed)
        rows, freqs = [], []
        k = len(micro.cls.candidates)
        support = base.in_support()
        for h in (0, 1):
            counted = index[halves == h]
            n = np.bincount(counted, minlength=k).astype(float)
            with np.errstate(divide="ignore"):
                freqs.append(np.log(n) - np.log(max(n.sum(), 1.0)))
            # a held-out token the half's model cannot write (unseen there and outside the
            # base's support: a number spelled "007") is the <unk> route's, not the class's
            held = np.flatnonzero((halves != h) & ((n[index] > 0) | support[index]))
            if len(held) > ROWS_PER_HALF:
                held = np.sort(rng.choice(held, ROWS_PER_HALF, replace=False))
            rows.append(held)
        parts = [base.components(ctx.rows(r)) for r in rows]

        def loss(theta: np.ndarray) -> float:
            weight, mix = KnownWeight(theta[0], theta[1]), base.with_free(theta[2:])
            total, count = 0.0, 0
            for h, r in enumerate(rows):
                log_v = mix.mix(parts[h], np.isfinite(freqs[h]))
                log_p, _ = log_open(log_v, weight.gamma(freqs[h]))
                total += float(log_p[np.arange(len(r)), index[r]].sum())
                count += len(r)
            return -total / max(count, 1)

        start = np.array([0.0, 0.0, *base.free_start()])
        result = minimize(loss, start, method="L-BFGS-B", options={"maxiter": 60})
        fitted = base.with_free(result.x[2:])
        how = (
            f"deleted estimation on the two halves of the training articles "
            f"({sum(map(len, rows)):,} held-out tokens, L-BFGS): "
            f"held-out log-likelihood {-result.fun:.4f} a token"
        )
        return cls(micro, fitted, KnownWeight(float(result.x[0]), float(result.x[1])), how)

    # -- scoring ---------------------------------------------------------------------------

    def log_prob_known(self, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
        """(log P_open over V_c (B, K), log Z (B,))."""
        log_v = self.base.mix(self.base.components(ctx))
        return log_open(log_v, self.weight.gamma(self.log_freq))

    def log_prob(self, strings: list[str], ctx: Context) -> np.ndarray:
        """log P_open(w | c, ctx) of the string of each row: in V_c or not; −inf outside O_c."""
        known, log_z = self.log_prob_known(ctx)
        out = np.full(len(strings), -np.inf)
        index = np.array([self.known.get(s, -1) for s in strings], dtype=np.int64)
        seen = index >= 0
        out[seen] = known[np.flatnonzero(seen), index[seen]]
        new = np.flatnonzero(~seen)
        if len(new):
            log_v = self.base.log_v_strings([strings[i] for i in new], ctx.rows(new))
            out[new] = log_v - log_z[new]
        return out

    def log_new_mass(self, ctx: Context) -> np.ndarray:
        """log P_open(w ∉ V_c | c, ctx) per row: the probability that the member is new."""
        known, _ = self.log_prob_known(ctx)
        return log1mexp(np.minimum(logsumexp(known, axis=1), 0.0))

    def top_new(self, ctx: Context, k: int) -> list[list[tuple[str, float]]]:
        """The k likeliest members outside V_c in each row, with log P_open."""
        _, log_z = self.log_prob_known(ctx)
        out = []
        for i in range(len(ctx)):
            row = ctx.rows(np.array([i]))
            strings = [s for s in self.base.candidates_new(row) if s not in self.known]
            if not strings:
                out.append([])
                continue
            scores = self.base.log_v_strings(strings, row.rows(np.zeros(len(strings), int)))
            best = np.argsort(-scores, kind="stable")[:k]
            out.append([(strings[j], float(scores[j] - log_z[i])) for j in best])
        return out

    # -- parameters ------------------------------------------------------------------------

    def get_params(self) -> dict[str, Any]:
        return {
            "class": self.cls.name,
            "known_weight": {"a": self.weight.a, "b": self.weight.b},
            "base": self.base.get_params(),
            "how": self.how,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any], micro: MicroModel) -> OpenMicroModel:
        base = make_base(micro, None, params["base"])
        weight = KnownWeight(**params["known_weight"])
        return cls(micro, base, weight, params.get("how", ""))
