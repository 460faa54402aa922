"""The base of an unbounded number class: the class's own micro-model on V_c, and a value
model over every spelling the class keeps.

    v(w | ctx) = (1 − η) · P_MM(w | c, ctx)·[w ∈ V_c] + η · P_value(w | c, ctx)

P_MM is the class's fitted micro-model (metric ∘ PDF over V_c, paper Eq. 1); P_value the
spelling model of :mod:`nslm.micro.number_spellings` with the value density

    (1 − λ) · p(log10 x) + λ · p'(log10 x − log10 r)

(:mod:`nslm.micro.value_density`), r the class's previous value in the article and the
article's previous quantity of any other class where its magnitude is within the class's own
range (the ratio density averaged over the two), or each quantity a conversion converts, for
``<convert>``; the first part alone where there is none. η and λ
are free parameters of the deleted estimation (:mod:`nslm.micro.open_set`); while it runs,
P_MM is renormalised over the members the counting half has seen, as the model that half
would have had.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.data.numbers import is_number, number_value
from nslm.micro.fit_checks import Parameter
from nslm.micro.history import Context
from nslm.micro.logspace import logit, logsumexp, sigmoid
from nslm.micro.model import MicroModel
from nslm.micro.number_spellings import (
    CAP,
    EXPONENTS,
    MAX_DECIMALS,
    Precision,
    Spelling,
    accepts,
    class_rule,
    derivations,
    parse,
    round_strings,
    spell,
)
from nslm.micro.value_density import LogMixture


def reference_kind(micro: MicroModel) -> str:
    """What the ratio density is relative to: the conversion's quantities for a class whose
    micro-model reads them (``<convert>``), else the previous value."""
    return "convert" if "convert_target" in micro.metric.needs else "prev"


def log_refs(
    ctx: Context, kind: str, quantity_range: tuple[float, float] | None = None
) -> np.ndarray:
    """log10 of each row's reference values (B, R), NaN where none (or not positive): the
    conversion's quantities, or the class's previous value and, with ``quantity_range``
    (log10 bounds of the class's own values), the article's previous quantity of any class
    where its magnitude is within them and it is not that same value."""
    if kind == "convert":
        refs = ctx.convert_target
    elif quantity_range is None:
        refs = ctx.prev_value[:, None]
    else:
        lo, hi = quantity_range
        quantity = np.asarray(ctx.quantity_value, float)
        with np.errstate(invalid="ignore", divide="ignore"):
            log_q = np.log10(np.where(quantity > 0, quantity, np.nan))
            fits = (log_q >= lo) & (log_q <= hi) & (quantity != ctx.prev_value)
        refs = np.column_stack([ctx.prev_value, np.where(fits, quantity, np.nan)])
    refs = np.asarray(refs, float).reshape(len(ctx), -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(refs > 0, np.log10(np.where(refs > 0, refs, 1.0)), np.nan)


def log_interval_mass(
    lo: np.ndarray,
    hi: np.ndarray,
    refs: np.ndarray,
    density: LogMixture,
    *,
    paired: bool = False,
) -> np.ndarray:
    """log P([lo, hi)) normalised to the support [0, CAP), averaged over each row's
    references (``refs`` (B, R) log10, NaN where none; a row without any gives −inf):
    ``lo``/``hi`` (1, N) for every interval at every row, or (B, 1) with ``paired``, row b's
    own interval. Only the rows that have a reference are computed (a conversion has a few
    plausible units out of many)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    width = np.broadcast_shapes(lo.shape, hi.shape)[-1]
    total = np.full((len(refs), width), -np.inf)
    count = np.zeros((len(refs), 1))
    for r in range(refs.shape[1]):
        below = np.full(len(refs), -np.inf)
        has = np.isfinite(refs[:, r])
        below[has] = density.log_below(CAP, refs[has, r])
        rows = np.flatnonzero(np.isfinite(below))  # a reference too far up reads as none
        if not len(rows):
            continue
        ref = refs[rows, r][:, None]
        row_lo, row_hi = (lo[rows], hi[rows]) if paired else (lo, hi)
        mass = density.log_interval(row_lo, row_hi, ref) - below[rows][:, None]
        total[rows] = np.logaddexp(total[rows], mass)
        count[rows] += 1
    with np.errstate(divide="ignore"):
        return total - np.log(np.maximum(count, 1))


def unique_refs(refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``refs`` (NaN equal to NaN) and, per row, which one it is: rows
    with the same references (the same previous value) share every interval mass."""
    keyed = np.where(np.isfinite(refs), refs, -1e300)
    distinct, inverse = np.unique(keyed, axis=0, return_inverse=True)
    return np.where(distinct == -1e300, np.nan, distinct), inverse.reshape(-1)


def _by_owner(joint: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """log Σ over each owner's columns (owners ascending, each present)."""
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    return np.logaddexp.reduceat(joint, starts, axis=-1)


ROWS_AT_ONCE = 128  # rows × derivations × components × 2 ends in memory at once


def spelling_grid(
    spellings: list[Spelling], refs: np.ndarray, density: LogMixture, precision: Precision
) -> np.ndarray:
    """log P_value of every spelling at every row (B, N), before the class rule's Z_c."""
    owner, e, lo, hi = derivations(spellings)
    log_e = precision.log_exponent[e + MAX_DECIMALS]
    style = precision.log_style(spellings)
    distinct, which = unique_refs(refs)
    out = np.empty((len(distinct), len(spellings)))
    for start in range(0, len(distinct), ROWS_AT_ONCE):
        rows = slice(start, start + ROWS_AT_ONCE)
        mass = log_interval_mass(lo[None, :], hi[None, :], distinct[rows], density)
        out[rows] = _by_owner(mass + log_e, owner) + style
    return out[which]


def spelling_paired(
    spellings: list[Spelling], refs: np.ndarray, density: LogMixture, precision: Precision
) -> np.ndarray:
    """log P_value of row b's spelling at row b (B,), before Z_c."""
    owner, e, lo, hi = derivations(spellings)
    mass = log_interval_mass(lo[:, None], hi[:, None], refs[owner], density, paired=True)[:, 0]
    joint = mass + precision.log_exponent[e + MAX_DECIMALS]
    return _by_owner(joint, owner) + precision.log_style(spellings)


def log_kept_mass(
    rule: str, precision: Precision, listed: list[Spelling], refs: np.ndarray, density: LogMixture
) -> np.ndarray:
    """log Z_c per row (B,): the mass of the spellings class rule ``rule`` keeps
    (:func:`nslm.micro.number_spellings.class_rule`; ``listed`` its enumerated strings)."""
    decimals = precision.log_decimal_share()
    if rule == "all":
        return np.zeros(len(refs))
    if rule == "decimals":
        return np.full(len(refs), decimals)
    distinct, which = unique_refs(refs)  # rows with the same references share Z_c
    kept = logsumexp(spelling_grid(listed, distinct, density, precision), axis=1)[which]
    if rule == "only":
        return kept
    integers = float(np.log(-np.expm1(decimals)))  # "except": the integers but the listed
    return integers + np.log(-np.expm1(np.minimum(kept - integers, -1e-12)))


@dataclass
class ValueBase:
    micro: MicroModel
    precision: Precision
    free: LogMixture
    ratio: LogMixture | None
    reference: str
    lam: float = 0.5  # weight of the ratio density where a reference exists
    eta: float = 0.5  # weight of the value model against the class's own micro-model
    # log10 of the 1st and 99th percentiles of the class's training values: an article's
    # previous quantity of another class is a reference where it falls within them
    quantity_range: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        name = self.micro.cls.name
        self.rule, listed = class_rule(name)
        self.listed = [parse(s) for s in listed]
        vc = self.micro.cls.candidates.strings
        spellings = [parse(s) for s in vc]
        pairs = zip(spellings, vc, strict=True)
        self.vc_ok = np.array([sp is not None and accepts(name, sp, s) for sp, s in pairs])
        self.vc_spellings = [spellings[i] for i in np.flatnonzero(self.vc_ok)]
        self.log_z_free = float(self._log_z(np.zeros((1, 1)), self.free)[0])
        free = spelling_grid(self.vc_spellings, np.zeros((1, 1)), self.free, self.precision)
        self.vc_free = np.full(len(vc), -np.inf)
        self.vc_free[self.vc_ok] = free[0] - self.log_z_free

    def in_support(self) -> np.ndarray:
        """Which members of V_c the value model writes (canonical, kept by the rule)."""
        return self.vc_ok

    def _log_z(self, refs: np.ndarray, density: LogMixture) -> np.ndarray:
        return log_kept_mass(self.rule, self.precision, self.listed, refs, density)

    def _ratio_rows(self, refs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the rows with a usable reference, log Z_c of the ratio density at them)."""
        ok = np.isfinite(refs).any(axis=1) & (self.ratio is not None)
        log_z = np.full(len(refs), -np.inf)
        if ok.any() and self.ratio is not None:
            log_z[ok] = self._log_z(refs[ok], self.ratio)
        ok &= np.isfinite(log_z)  # a reference so far up that nothing it implies is kept
        return ok, log_z

    def components(self, ctx: Context) -> dict[str, np.ndarray]:
        refs = log_refs(ctx, self.reference, self.quantity_range)
        ok, log_z = self._ratio_rows(refs)
        ratio = np.full((len(ctx), len(self.vc_ok)), -np.inf)
        if ok.any() and self.ratio is not None:
            grid = spelling_grid(self.vc_spellings, refs[ok], self.ratio, self.precision)
            ratio[np.ix_(ok, self.vc_ok)] = grid - log_z[ok][:, None]
        return {"closed": self.micro.log_prob(ctx), "ratio": ratio, "ok": ok}

    def _value(self, free: np.ndarray, ratio: np.ndarray, ok: np.ndarray) -> np.ndarray:
        with_ref = np.logaddexp(np.log1p(-self.lam) + free, np.log(self.lam) + ratio)
        return np.where(ok[:, None], with_ref, free)

    def mix(self, parts: dict[str, np.ndarray], seen: np.ndarray | None = None) -> np.ndarray:
        closed = parts["closed"]
        if seen is not None:  # the micro-model of a half that has seen only ``seen``
            closed = np.where(seen, closed, -np.inf)
            closed = closed - logsumexp(closed, axis=1, keepdims=True)
        value = self._value(self.vc_free[None, :], parts["ratio"], parts["ok"])
        return np.logaddexp(np.log1p(-self.eta) + closed, np.log(self.eta) + value)

    def log_v_strings(self, strings: list[str], ctx: Context) -> np.ndarray:
        """log v of each row's string that is not in V_c (where P_MM has no mass)."""
        out = np.full(len(strings), -np.inf)
        name = self.micro.cls.name
        spellings = [parse(s) for s in strings]
        pairs = zip(spellings, strings, strict=True)
        keep = np.array([sp is not None and accepts(name, sp, s) for sp, s in pairs], dtype=bool)
        if not keep.any():
            return out
        rows = np.flatnonzero(keep)
        sps = [spellings[i] for i in rows]
        free = spelling_paired(sps, np.zeros((len(rows), 1)), self.free, self.precision)
        free = free - self.log_z_free
        refs = log_refs(ctx.rows(rows), self.reference, self.quantity_range)
        ok, log_z = self._ratio_rows(refs)
        ratio = np.full(len(rows), -np.inf)
        if ok.any() and self.ratio is not None:
            w = np.flatnonzero(ok)
            part = spelling_paired([sps[i] for i in w], refs[w], self.ratio, self.precision)
            ratio[w] = part - log_z[w]
        value = self._value(free[:, None], ratio[:, None], ok)[:, 0]
        out[rows] = np.log(self.eta) + value
        return out

    def candidates_new(self, ctx: Context) -> list[str]:
        """Spellings near the densities' modes: each component's centre ± 2σ in 17 steps,
        times each reference, rounded to 1–3 significant digits and to whole numbers, with
        0–2 decimals, grouped and not; and the enumerated members of the round class."""
        steps = np.linspace(-2, 2, 17)
        centres = [(self.free.means[:, None] + self.free.sigmas[:, None] * steps).ravel()]
        refs = log_refs(ctx, self.reference, self.quantity_range)[0]
        if self.ratio is not None:
            grid = (self.ratio.means[:, None] + self.ratio.sigmas[:, None] * steps).ravel()
            centres += [grid + r for r in refs[np.isfinite(refs)]]
        values = 10.0 ** np.concatenate(centres)
        values = values[(values > 0) & (values < CAP)]
        rounded = {float(f"{x:.{k}g}") for x in values for k in (1, 2, 3)}
        rounded |= {float(round(x)) for x in values}
        strings = {
            spell(x, d, comma)
            for x in rounded
            for d in (0, 1, 2)
            for comma in (False, True)
            if x >= 1000 or not comma
        }
        if self.rule == "only":
            strings |= set(round_strings())
        name = self.micro.cls.name
        return sorted(s for s in strings if (sp := parse(s)) is not None and accepts(name, sp, s))

    def free_start(self) -> list[float]:
        return [logit(self.eta)] + ([logit(self.lam)] if self.ratio is not None else [])

    def free_parameters(self) -> list[Parameter]:
        """What :meth:`free_start` holds: η, then λ where a ratio density exists."""
        eta = [Parameter("eta", "weight")]
        return [*eta, Parameter("lambda", "weight")] if self.ratio is not None else eta

    def with_free(self, theta: np.ndarray) -> ValueBase:
        out = copy.copy(self)  # keeps what __post_init__ computed: the weights change only
        out.eta = float(np.clip(sigmoid(theta[0]), 1e-9, 1 - 1e-9))
        if self.ratio is not None:
            out.lam = float(np.clip(sigmoid(theta[1]), 1e-9, 1 - 1e-9))
        return out

    @classmethod
    def build(cls, micro: MicroModel, train: Split | None, params: dict | None = None):
        if params is not None:
            ratio = params["ratio"]
            return cls(
                micro,
                Precision.from_params(params["precision"]),
                LogMixture.from_params(params["free"]),
                LogMixture.from_params(ratio) if ratio is not None else None,
                params["reference"],
                params["lambda"],
                params["eta"],
                _range(params.get("quantity_range")),
            )
        assert train is not None, "a value model is fitted on the training split"
        kind = reference_kind(micro)
        cand = micro.cls.candidates
        tokens = [s for s, n in zip(cand.strings, cand.counts, strict=True) for _ in range(int(n))]
        values = np.array([number_value(s) for s in tokens if is_number(s)])
        free = LogMixture.fit(np.log10(values[values > 0]))

        def free_mass(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
            return log_interval_mass(lo[None, :], hi[None, :], np.zeros((1, 1)), free)[0]

        precision = Precision.fit(tokens, log_mass=free_mass)
        quantity_range = None
        if kind == "prev" and (values > 0).any():
            lo, hi = np.percentile(np.log10(values[values > 0]), [1, 99])
            quantity_range = (float(lo), float(hi))
        samples = ratio_samples(micro, train, kind, quantity_range)
        ratio = LogMixture.fit(samples) if len(samples) >= 20 else None
        return cls(micro, precision, free, ratio, kind, quantity_range=quantity_range)

    def get_params(self) -> dict[str, Any]:
        return {
            "kind": "value",
            "reference": self.reference,
            "eta": self.eta,
            "lambda": self.lam,
            "precision": self.precision.get_params(),
            "free": self.free.get_params(),
            "ratio": self.ratio.get_params() if self.ratio is not None else None,
            "quantity_range": list(self.quantity_range) if self.quantity_range else None,
            "exponents": EXPONENTS.tolist(),
        }


def _range(saved: list[float] | None) -> tuple[float, float] | None:
    return (float(saved[0]), float(saved[1])) if saved else None


def ratio_samples(
    micro: MicroModel,
    train: Split,
    kind: str,
    quantity_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """log10(x / r) at the class's training tokens that have a reference (the nearest)."""
    positions, index = micro.cls.positions(train)
    ctx = micro.cls.context(train, positions, micro.context)
    x = micro.cls.candidates.values[index]
    refs = log_refs(ctx, kind, quantity_range)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.log10(x)[:, None] - refs
    t = np.where(np.isfinite(t), t, np.nan)
    has = np.isfinite(t).any(axis=1)
    best = np.nanargmin(np.abs(np.where(has[:, None], t, 0.0)), axis=1)
    out = t[np.arange(len(t)), best]
    return out[has & np.isfinite(out)]
