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

**Read by the LM's state** (where O_c is listed and the class's metric compares a member with
the context: years, days, places): the open model's parts restricted to the members later
than, earlier than, or other than the previous one (each renormalised over O_c, each with the
same known weight), mixed by a gate on the LM's hidden state h (:mod:`nslm.micro.gated`):

    P_open(w | c, ctx, h) = Σ_k g_k(h) · v_k(w | ctx) · e^{γ(w)} / Z_k(ctx)

so "began in 2027 and ended in" can put its mass on the years after 2027, all of them new,
where the whole difference PDF would put it on 2027 itself. The gate is fitted on the class's
train positions (the LM frozen), its L2 weight on valid, and kept only where it beats the
ungated model on valid (:meth:`OpenMicroModel.fit_gate`).

**How the known members share their mass** (``known_shape``): as above ("open": the base
v with the known weight), or as the class's own micro-model shares it, scaled to what the
open model keeps for them ("micro": P_MM(w | c, ctx) · (1 − P_open(new | c, ctx)), the open
model deciding only how likely a new member is). Chosen per class by the likelihood of its
validation tokens (:meth:`OpenMicroModel.fit_known_shape`); both are proper, for both keep
the known members' total. A model gated by the LM's state keeps the open shape: its parts
say, from h, which known member comes next (a later year, another city), which P_MM cannot.

**A cache of the new members the text has named** (:mod:`nslm.micro.open_cache`): every
scoring call takes the text's cache at its rows (``cache``), mixed in with a weight fitted by
deleted estimation beside a and b; without one (a prompt, a sample) the weight is zero.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.fit_checks import Parameter, fit_lbfgs, not_fitted
from nslm.micro.gated import (
    L2_GRID,
    RESTRICTIONS,
    GatedMixture,
    as_rows,
    compares_with_context,
)
from nslm.micro.history import Context
from nslm.micro.logspace import log1mexp, logsumexp
from nslm.micro.model import MicroModel
from nslm.micro.open_bases import Base, make_base
from nslm.micro.open_cache import CacheWeight, TextCache, split_cache, text_cache
from nslm.micro.open_enumerated import EnumeratedBase

ROWS_PER_HALF = 400  # held-out class tokens per half that the deleted estimation reads
CACHE_ROWS_PER_HALF = 2_000  # held-out class tokens with a non-empty cache, per half
GATED_PARTS = ("whole", *RESTRICTIONS)  # the gate's components: v, then v restricted
# the gate's L2 weights, chosen on valid: the context models' grid (micro/gated.py) and two
# decades above it, as a class that gains little from h (<day>) chose its top, 0.1
OPEN_GATE_L2_GRID = (*L2_GRID, 1.0, 10.0)
CHUNK_ROWS = 2_000  # rows of a (rows, |O_c|) matrix at a time while the gate is fitted
KNOWN_SHAPES = ("open", "micro")  # how the known members share their mass (module docstring)


@dataclass
class KnownWeight:
    """γ(w) = a + δ + b · log f(w) on the members of V_c (f: training frequency in the
    class). a and b come from the deleted estimation; δ (``shift``, 0 unless chosen) from
    validation text: a held-out half has met its classes' members in half the training
    articles only, so it sees more new members than a text after the whole training set
    does, and a + b · log f, fitted there, gives the known members too little
    (:func:`nslm.evaluation.open_report.choose_known_shift`)."""

    a: float = 0.0
    b: float = 0.0
    shift: float = 0.0

    def gamma(self, log_freq: np.ndarray) -> np.ndarray:
        seen = np.isfinite(log_freq)
        a = self.a + self.shift
        return np.where(seen, a + self.b * np.where(seen, log_freq, 0.0), -np.inf)


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

    def __init__(
        self,
        micro: MicroModel,
        base: Base,
        weight: KnownWeight,
        how: str = "",
        gate: GatedMixture | None = None,
        cache_weight: CacheWeight | None = None,
        known_shape: str = "open",
    ) -> None:
        if known_shape not in KNOWN_SHAPES:
            raise NslmError(f"known_shape {known_shape!r}: choose {' or '.join(KNOWN_SHAPES)}")
        if gate is not None and known_shape != "open":
            raise NslmError(f"<{micro.cls.name}>: a gated open model keeps the open known shape")
        self.known_shape = known_shape
        self.micro = micro
        self.cls = micro.cls
        self.base = base
        self.weight = weight
        self.how = how
        self.gate = gate
        self.cache_weight = cache_weight or CacheWeight()
        counts = self.cls.candidates.counts
        with np.errstate(divide="ignore"):
            self.log_freq = np.log(counts) - np.log(max(counts.sum(), 1.0))
        self.known = {s: i for i, s in enumerate(self.cls.candidates.strings)}
        # per fitted parameter: value, converged, iterations, at_bound (micro/fit_checks.py)
        self.fits: dict[str, dict[str, Any]] = {}

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

        start = [0.0, 0.0, *base.free_start()]
        parameters = [Parameter("a"), Parameter("b"), *base.free_parameters()]
        theta, best, fits = fit_lbfgs(loss, start, parameters)
        fitted = base.with_free(theta[2:])
        weight = KnownWeight(float(theta[0]), float(theta[1]))
        cache_weight, cache_how, cache_fits = fit_cache_weight(
            fitted, weight, train, (positions, index, halves), freqs, ctx, rng
        )
        how = (
            f"deleted estimation on the two halves of the training articles "
            f"({sum(map(len, rows)):,} held-out tokens, L-BFGS): "
            f"held-out log-likelihood {-best:.4f} a token; {cache_how}"
        )
        model = cls(micro, fitted, weight, how, cache_weight=cache_weight)
        model.fits = {**fits, **cache_fits}
        return model

    # -- the gate on the LM's state --------------------------------------------------------

    @property
    def needs_features(self) -> bool:
        """Whether scoring reads the LM's hidden state (a fitted gate)."""
        return self.gate is not None

    @property
    def has_new_members(self) -> bool:
        """Whether O_c holds anything beyond V_c (a listed class whose every member the
        vocabulary holds, as the 31 days may, has none)."""
        base = self.base
        return not isinstance(base, EnumeratedBase) or len(base.strings) > len(base.vc_columns)

    @property
    def gateable(self) -> bool:
        """Whether the class can have a gate: O_c listed, a metric against the context."""
        return (
            isinstance(self.base, EnumeratedBase)
            and self.base.informative
            and compares_with_context(self.micro)
        )

    def _gamma_members(self) -> np.ndarray:
        """γ over the whole of O_c: the known weight on V_c's columns, 0 elsewhere."""
        gamma = self.weight.gamma(self.log_freq)
        out = np.zeros(len(self.base.strings))
        out[self.base.vc_columns] = np.where(np.isfinite(gamma), gamma, 0.0)
        return out

    def part_log_probs(self, ctx: Context, cache: TextCache | None = None) -> np.ndarray:
        """(B, K, |O_c|): each gated part's distribution over the whole open set (module
        docstring), with the text's cache restricted as the part is: "after 2027" keeps the
        cached years after 2027 only, so a part the gate picks is never undone by the cache."""
        gamma = self.weight.gamma(self.log_freq)
        boost = self._gamma_members()
        masks = [None, *self.base.restriction_masks(ctx, GATED_PARTS[1:])]
        counts = self._cache_counts(cache, len(ctx))
        log_k, log_rest = self._kappa(cache, len(ctx))
        out = []
        for log_v, mask in zip(
            self.base.log_v_restricted(ctx, GATED_PARTS[1:]), masks, strict=True
        ):
            _, log_z = log_open(log_v[:, self.base.vc_columns], gamma)
            part = log_v + boost - log_z[:, None]
            if counts is not None:
                kept = counts if mask is None else np.where(mask, counts, 0.0)
                part = mix_in_cache(part, kept, log_k, log_rest, self.base.vc_columns)
            out.append(part)
        return np.stack(out, axis=1)

    def _cache_counts(self, cache: TextCache | None, n: int) -> np.ndarray | None:
        """(B, |O_c|): the cache's counts over the listed members (None: no cache)."""
        if cache is None:
            return None
        if len(cache) != n:
            raise NslmError(f"<{self.cls.name}>: a cache of {len(cache)} rows for {n} rows")
        out = np.zeros((n, len(self.base.strings)))
        for i, counts in enumerate(cache.counts):
            for s, c in counts.items():
                j = self.base.index.get(s)
                if j is not None:
                    out[i, j] = c
        return out

    def _states(self, H: Any, n: int) -> np.ndarray:
        if H is None:
            raise NslmError(f"<{self.cls.name}>'s open micro-model reads the LM's states")
        rows = as_rows(H)
        if len(rows) != n:
            raise NslmError(f"<{self.cls.name}>: {len(rows)} LM states for {n} rows")
        return rows

    def log_prob_members(
        self, ctx: Context, H: Any = None, cache: TextCache | None = None
    ) -> np.ndarray:
        """(B, |O_c|) log P over every member of a listed O_c, in ``base.strings`` order."""
        if self.gate is not None:  # the cache is inside each part
            parts = self.part_log_probs(ctx, cache)
            return self.gate.log_prob(self._states(H, len(ctx)), parts)
        _, log_z = self._known_and_z(ctx)
        out = self.base.log_v_all(ctx) + self._gamma_members() - log_z[:, None]
        vc = self.base.vc_columns
        out[:, vc] = self._shaped(out[:, vc], ctx)
        if cache is None:
            return out
        log_k, log_rest = self._kappa(cache, len(ctx))
        counts = self._cache_counts(cache, len(ctx))
        return mix_in_cache(out, counts, log_k, log_rest, self.base.vc_columns)

    def fit_gate(self, train: Split, H_train: Any, valid: Split, H_valid: Any) -> bool:
        """Fit the gate on the class's train positions (``H_*``: the LM's states there, in
        order), its L2 weight on valid; keep it only where it beats the ungated model on
        valid. True when kept. The open model's own parameters stay as fitted."""
        if not self.gateable:
            return False
        L, Lv = self._part_targets(train), self._part_targets(valid)
        if not len(L) or not len(Lv):
            return False
        gate = GatedMixture(len(GATED_PARTS), as_rows(H_train).shape[1], OPEN_GATE_L2_GRID)
        gate.fit(as_rows(H_train), L, as_rows(H_valid), Lv)
        self.gate_valid_nll = {"ungated": float(-Lv[:, 0].mean()), "gated": gate.valid_nll_}
        self.gate = gate if gate.valid_nll_ < self.gate_valid_nll["ungated"] else None
        self.fits["gate_l2"] = {
            "value": gate.l2_,
            "converged": gate.converged_,
            "iterations": gate.iterations_,
            "at_bound": gate.l2_at_edge,
            "kept": self.gate is not None,
        }
        if gate.l2_at_edge:
            self.fits["gate_l2"]["why"] = (
                f"the grid was widened to {min(gate.l2_grid):g} … {max(gate.l2_grid):g}, "
                "its limit, and the choice is still at its edge"
            )
        return self.gate is not None

    def fit_known_shape(self, valid: Split) -> str:
        """Choose ``known_shape`` by the log-likelihood of the class's validation tokens
        (all in V_c: a validation token outside the vocabulary is ``<unk>``); a gated model
        keeps the open shape (module docstring). Returns the choice."""
        positions, index = self.cls.positions(valid)
        if self.gate is not None or not len(positions):
            return self.known_shape
        ctx = self.cls.context(valid, positions, self.micro.context)
        nll = {}
        for shape in KNOWN_SHAPES:
            self.known_shape = shape
            known = self.log_prob_known(ctx)
            nll[shape] = float(-known[np.arange(len(positions)), index].mean())
        self.known_shape = min(nll, key=nll.get)
        self.known_shape_valid_nll = nll
        return self.known_shape

    def _shaped(self, log_known: np.ndarray, ctx: Context) -> np.ndarray:
        """(B, |V_c|) log P of the known members as ``known_shape`` shares them: the open
        model's, or P_MM's scaled to the same total."""
        if self.known_shape == "open":
            return log_known
        kept = logsumexp(log_known, axis=1)
        return self.micro.log_prob(ctx) + kept[:, None]

    def _part_targets(self, split: Split) -> np.ndarray:
        """(N, K): each part's log P_open of the target at the class's positions of a split."""
        positions, index = self.cls.positions(split)
        ctx = self.cls.context(split, positions, self.micro.context)
        columns = self.base.vc_columns[index]
        out = np.empty((len(positions), len(GATED_PARTS)))
        for a in range(0, len(positions), CHUNK_ROWS):
            at = np.arange(a, min(a + CHUNK_ROWS, len(positions)))
            parts = self.part_log_probs(ctx.rows(at))
            out[at] = parts[np.arange(len(at)), :, columns[at]]
        return out

    # -- scoring ---------------------------------------------------------------------------

    def _known_and_z(self, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
        """(log P_open over V_c (B, K), log Z (B,)) of the ungated model."""
        log_v = self.base.mix(self.base.components(ctx))
        known, log_z = log_open(log_v, self.weight.gamma(self.log_freq))
        return self._shaped(known, ctx), log_z

    def text_cache(self, split: Split, strings: list[str], queries: np.ndarray) -> TextCache:
        """The cache at ``queries`` of a scored text: the class's tokens (by rule) before
        each that are outside V_c, ``strings`` the text's tokens as written."""
        mask = self.cls.context_mask(split, "class")
        return split_cache(split, strings, mask, self.known, queries)

    def _kappa(self, cache: TextCache | None, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(log κ, log (1 − κ)) of the cache at each of n rows (no cache: −inf, 0)."""
        if cache is None:
            return np.full(n, -np.inf), np.zeros(n)
        if len(cache) != n:
            raise NslmError(f"<{self.cls.name}>: a cache of {len(cache)} rows for {n} rows")
        return self.cache_weight.log_kappa(cache)

    def _cache_share(self, strings: list[str], cache: TextCache | None) -> np.ndarray:
        """log n_t(w) / n_t of each row's string in its row's cache (−inf: none)."""
        if cache is None:
            return np.full(len(strings), -np.inf)
        share = np.array([cache.share(i, s) for i, s in enumerate(strings)])
        with np.errstate(divide="ignore"):
            return np.log(share)

    def log_prob_known(
        self, ctx: Context, H: Any = None, cache: TextCache | None = None
    ) -> np.ndarray:
        """(B, |V_c|): log P over V_c; ``H`` the rows' LM states where the model is gated,
        ``cache`` the text's new members before each row (which V_c's members never are)."""
        if self.gate is not None:
            return self.log_prob_members(ctx, H, cache)[:, self.base.vc_columns]
        known = self._known_and_z(ctx)[0]
        none = np.full(known.shape, -np.inf)  # no new member among V_c, none in the cache
        return open_log_prob(known, none, none, *self._kappa(cache, len(ctx)))

    def log_prob(
        self, strings: list[str], ctx: Context, H: Any = None, cache: TextCache | None = None
    ) -> np.ndarray:
        """log P(w | c, ctx) of the string of each row: in V_c or not; −inf outside O_c."""
        if self.gate is not None:
            members = self.log_prob_members(ctx, H, cache)
            where = np.array([self.base.index.get(s, -1) for s in strings], dtype=np.int64)
            picked = members[np.arange(len(strings)), np.maximum(where, 0)]
            return np.where(where >= 0, picked, -np.inf)
        known, new = self._log_prob_open(strings, ctx)
        share = self._cache_share(strings, cache)
        return open_log_prob(known, new, share, *self._kappa(cache, len(strings)))

    def _log_prob_open(self, strings: list[str], ctx: Context) -> tuple[np.ndarray, np.ndarray]:
        """The ungated model's known and new terms for each row's string, without a cache
        (each −inf where the string is of the other kind). The distribution over V_c is
        computed once per distinct context (many strings at one context: a sum over the open
        set, micro/open_sums.py)."""
        distinct, which = ctx.unique()
        known, log_z = self._known_and_z(distinct)
        known_term = np.full(len(strings), -np.inf)
        new_term = np.full(len(strings), -np.inf)
        index = np.array([self.known.get(s, -1) for s in strings], dtype=np.int64)
        seen = index >= 0
        known_term[seen] = known[which[seen], index[seen]]
        new = np.flatnonzero(~seen)
        if len(new):
            log_v = self.base.log_v_strings([strings[i] for i in new], ctx.rows(new))
            new_term[new] = log_v - log_z[which[new]]
        return known_term, new_term

    def log_new_mass(
        self, ctx: Context, H: Any = None, cache: TextCache | None = None
    ) -> np.ndarray:
        """log P(w ∉ V_c | c, ctx) per row: the probability that the member is new."""
        known = self.log_prob_known(ctx, H, cache)
        return log1mexp(np.minimum(logsumexp(known, axis=1), 0.0))

    def top_new(
        self, ctx: Context, k: int, H: Any = None, cache: TextCache | None = None
    ) -> list[list[tuple[str, float]]]:
        """The k likeliest members outside V_c in each row, with their log-probability: the
        open model's likeliest and the text's cached new members, ranked together."""
        if self.gate is not None:
            return self._top_new_members(self.log_prob_members(ctx, H, cache), k)
        ranked = self._top_new_open(ctx, k)
        if cache is None:
            return ranked
        out = []
        for i, listed in enumerate(ranked):
            strings = list(dict.fromkeys([s for s, _ in listed] + sorted(cache.counts[i])))
            row = ctx.rows(np.full(len(strings), i))
            scores = self.log_prob(strings, row, cache=cache.rows(np.full(len(strings), i)))
            best = np.argsort(-scores, kind="stable")[:k]
            out.append([(strings[j], float(scores[j])) for j in best if np.isfinite(scores[j])])
        return out

    def _top_new_members(self, members: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
        """The k likeliest members outside V_c of each row of a listed O_c's (B, |O_c|)."""
        members = members.copy()
        members[:, self.base.vc_columns] = -np.inf
        best = np.argsort(-members, axis=1, kind="stable")[:, :k]
        strings = self.base.strings
        return [
            [(strings[j], float(row[j])) for j in cols if np.isfinite(row[j])]
            for row, cols in zip(members, best, strict=True)
        ]

    def _top_new_open(self, ctx: Context, k: int) -> list[list[tuple[str, float]]]:
        """The ungated model's k likeliest new members of each row, without a cache."""
        _, log_z = self._known_and_z(ctx)
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
        """Everything but the gate's tensors (:meth:`tensors`, for safetensors)."""
        out = {
            "class": self.cls.name,
            "known_weight": dataclasses.asdict(self.weight),
            "base": self.base.get_params(),
            "how": self.how,
        }
        if self.gate is not None:
            out["gate"] = {"parts": list(GATED_PARTS), **self.gate.get_params()}
        if hasattr(self, "gate_valid_nll"):
            out["gate_valid_nll"] = self.gate_valid_nll
        out["cache_weight"] = dataclasses.asdict(self.cache_weight)
        out["fits"] = self.fits
        out["known_shape"] = self.known_shape
        if hasattr(self, "known_shape_valid_nll"):
            out["known_shape_valid_nll"] = self.known_shape_valid_nll
        return out

    def tensors(self) -> dict[str, np.ndarray]:
        return {} if self.gate is None else self.gate.tensors()

    @classmethod
    def from_params(
        cls,
        params: dict[str, Any],
        micro: MicroModel,
        tensors: dict[str, np.ndarray] | None = None,
    ) -> OpenMicroModel:
        base = make_base(micro, None, params["base"])
        weight = KnownWeight(**params["known_weight"])
        gate = None
        if "gate" in params:
            if params["gate"].get("parts") != list(GATED_PARTS) or tensors is None:
                raise NslmError(f"<{micro.cls.name}>: the open model's gate cannot be read")
            gate = GatedMixture.from_saved(params["gate"], tensors)
        try:
            cache_weight = CacheWeight(**params.get("cache_weight", {}))
        except TypeError:
            raise NslmError(
                f"<{micro.cls.name}>: the open model's cache weight cannot be read; refit"
            ) from None
        shape = params.get("known_shape", "open")  # "open" where the file names no choice
        model = cls(micro, base, weight, params.get("how", ""), gate, cache_weight, shape)
        for evidence in ("gate_valid_nll", "known_shape_valid_nll"):  # why each choice was made
            if evidence in params:
                setattr(model, evidence, params[evidence])
        model.fits = dict(params.get("fits", {}))
        return model


def open_log_prob(
    log_known: np.ndarray,
    log_new: np.ndarray,
    log_share: np.ndarray,
    log_k: np.ndarray,
    log_rest: np.ndarray,
) -> np.ndarray:
    """The open model's log-probability from its three terms (module docstring): the known
    members' share (log P_open of the members in V_c, −inf elsewhere), the new members'
    share (log P_open of those outside V_c, −inf elsewhere) and the cache (log n(w)/n, and
    log κ, log (1 − κ) per row):

        log ((1 − κ) · (P_known(w) + P_new(w)) + κ · n(w) / n)

    ``log_known``, ``log_new`` and ``log_share`` are (B,) or (B, M); every scoring call of
    :class:`OpenMicroModel` and the cache's fit go through here."""
    rows = (-1,) + (1,) * (np.ndim(log_known) - 1)
    log_p = np.logaddexp(log_known, log_new)
    return np.logaddexp(log_rest.reshape(rows) + log_p, log_k.reshape(rows) + log_share)


def mix_in_cache(
    log_p: np.ndarray,
    counts: np.ndarray,
    log_k: np.ndarray,
    log_rest: np.ndarray,
    vc_columns: np.ndarray,
) -> np.ndarray:
    """:func:`open_log_prob` over (B, |O_c|) members, ``counts`` n(w) per row
    (:mod:`nslm.micro.open_cache`), ``vc_columns`` the known members' columns; a row whose
    counts are all zero keeps P."""
    total = counts.sum(axis=1)
    some = total > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.log(counts) - np.log(np.where(some, total, 1.0))[:, None]
    known = np.zeros(log_p.shape[1], dtype=bool)
    known[vc_columns] = True
    return open_log_prob(
        np.where(known, log_p, -np.inf),
        np.where(known, -np.inf, log_p),
        np.where(some[:, None], share, -np.inf),
        np.where(some, log_k, -np.inf),
        np.where(some, log_rest, 0.0),
    )


def fit_cache_weight(
    base: Base,
    weight: KnownWeight,
    train: Split,
    class_positions: tuple[np.ndarray, np.ndarray, np.ndarray],
    freqs: list[np.ndarray],
    ctx: Context,
    rng: np.random.Generator,
) -> tuple[CacheWeight, str, dict[str, dict[str, Any]]]:
    """α and β of the cache (:mod:`nslm.micro.open_cache`) by deleted estimation: per half,
    the other half's class tokens whose cache of members unseen in the counting half is not
    empty, scored by the open model that half would have had. Returns the weight, how it was
    fitted and the fit's report (:func:`nslm.micro.fit_checks.fit_lbfgs`)."""
    positions, index, halves = class_positions
    rows: list[tuple[np.ndarray, np.ndarray, TextCache]] = []  # (log P_open, share, cache)
    for h, log_freq in enumerate(freqs):
        held = np.flatnonzero(halves != h)
        unseen = ~np.isfinite(log_freq)[index]
        cache = text_cache(index, positions, train.article_ids, unseen, positions[held])
        some = np.flatnonzero(cache.totals > 0)
        if len(some) > CACHE_ROWS_PER_HALF:
            some = np.sort(rng.choice(some, CACHE_ROWS_PER_HALF, replace=False))
        if not len(some):
            continue
        at = held[some]
        log_v = base.mix(base.components(ctx.rows(at)), np.isfinite(log_freq))
        log_p, _ = log_open(log_v, weight.gamma(log_freq))
        target = log_p[np.arange(len(at)), index[at]]
        share = np.array([cache.share(int(j), index[a]) for j, a in zip(some, at, strict=True)])
        keep = np.isfinite(target) | (share > 0)
        rows.append((target[keep], share[keep], cache.rows(some[keep])))
    if not rows:
        why = "no held-out token had a cache of new members: no cache"
        return CacheWeight(), why, not_fitted(("cache_alpha", "cache_beta"), why)
    target = np.concatenate([r[0] for r in rows])
    share = np.concatenate([r[1] for r in rows])
    cache = TextCache([c for r in rows for c in r[2].counts])
    with np.errstate(divide="ignore"):
        log_share = np.log(share)

    def loss(theta: np.ndarray) -> float:
        # the held-out token's own probability: known or new in the counting half's model
        none = np.full(len(target), -np.inf)
        log_k, log_rest = CacheWeight(*theta).log_kappa(cache)
        return -float(open_log_prob(target, none, log_share, log_k, log_rest).mean())

    parameters = [Parameter("cache_alpha"), Parameter("cache_beta")]
    theta, best, fits = fit_lbfgs(loss, [-2.0, 0.0], parameters)
    fitted = CacheWeight(*(float(x) for x in theta))
    gain = loss(np.array([-30.0, 0.0])) - best
    how = (
        f"cache of new members: {len(target):,} held-out tokens with one, "
        f"κ = σ({fitted.alpha:.2f} + {fitted.beta:.2f} · log n), {gain:+.4f} nats a token"
    )
    return fitted, how, fits
