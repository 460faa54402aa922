"""Sums that can fail: an open micro-model's total over its whole open set, member by member.

A total taken as a complement, log(1 − Σ_{V_c} P), is one whatever the normalisers are; these
totals are not. For a listed O_c (years, days, places) every member is scored. For an
unbounded number class every kept spelling in a box is scored, by the call that scores a
text (:meth:`OpenMicroModel.log_prob`): the integers below ``BOX[0]``, the one-decimal
spellings below ``BOX[1]`` and the two-decimal ones below ``BOX[2]``, with the class's
training members and the text's cached members wherever they lie. What is left, the tail T
(larger values, longer decimals), is bounded analytically: for each rounding step 10^e the
multiples of 10^e outside the box tile one interval, whose probability the value density
gives in closed form (the interval integral of Spithourakis & Riedel 2018, Eq. 5, on the log
scale: :mod:`nslm.micro.value_density`); the few spellings in T that were scored (a large
training member) or that the class's rule leaves out (a round number in ``<other>``) are
subtracted one by one. So a normaliser (Z_c of the class's rule, Z(ctx) of the known weight,
the cache's κ) that is wrong by 1% moves the total by 1%.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nslm.micro.history import Context
from nslm.micro.logspace import logsumexp
from nslm.micro.number_spellings import (
    CAP,
    EXPONENTS,
    MAX_DECIMALS,
    accepts,
    class_rule,
    parse,
    spell,
)
from nslm.micro.open_cache import TextCache
from nslm.micro.open_enumerated import EnumeratedBase
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.open_values import ValueBase, log_interval_mass, log_refs, spelling_paired

BOX = (2_000, 200, 20)  # integers, one decimal, two decimals: scored below these values


def box_strings(om: OpenMicroModel) -> list[str]:
    """Every canonical spelling of the class's rule inside :data:`BOX`, with V_c; for a
    rule that lists its members (``<round>``), every one of them, so nothing is left over."""
    name = om.cls.name
    rule, listed = class_rule(name)
    out = list(listed) if rule == "only" else []
    for decimals, below in enumerate(BOX):
        for k in range(below * 10**decimals):
            value = k / 10**decimals
            out.append(spell(value, decimals, False))
            if value >= 1000:
                out.append(spell(value, decimals, True))
    kept = [s for s in out if accepts(name, parse(s), s)]
    return list(dict.fromkeys([*kept, *om.cls.candidates.strings]))


def in_box(value: float, decimals: int) -> bool:
    return decimals < len(BOX) and value < BOX[decimals]


def open_totals(
    om: OpenMicroModel,
    ctx: Context,
    H: Any = None,
    cache: TextCache | None = None,
    box: list[str] | None = None,
) -> np.ndarray:
    """(B,): Σ P_open(w | c, ctx) over every member of O_c ∪ V_c at each row (module
    docstring); ``box`` the value class's scored strings, if already listed."""
    out = np.empty(len(ctx))
    if isinstance(om.base, EnumeratedBase):
        # a listed O_c: every member's column of the row, the cached new members among them
        # (:meth:`OpenMicroModel.log_prob` reads a string's probability from this same row)
        for i in range(len(ctx)):
            one = np.array([i])
            states = None if H is None else np.asarray(H)[one]
            log_p = om.log_prob_members(ctx.rows(one), states, _rows(cache, one))
            out[i] = float(np.exp(logsumexp(log_p[0])))
        return out
    strings = box if box is not None else box_strings(om)
    for i in range(len(ctx)):
        cached = sorted(cache.counts[i]) if cache is not None else []
        row_strings = list(dict.fromkeys([*strings, *cached]))
        rep = np.full(len(row_strings), i)
        states = None if H is None else np.asarray(H)[rep]
        log_p = om.log_prob(row_strings, ctx.rows(rep), states, _rows(cache, rep))
        scored = float(np.exp(logsumexp(log_p)))
        tail = 0.0
        if isinstance(om.base, ValueBase):
            tail = value_tail(om, ctx.rows(np.array([i])), _rows(cache, np.array([i])), cached)
        out[i] = scored + tail
    return out


def _rows(cache: TextCache | None, index: np.ndarray) -> TextCache | None:
    return None if cache is None else cache.rows(index)


def value_tail(
    om: OpenMicroModel, ctx: Context, cache: TextCache | None, cached: list[str]
) -> float:
    """P_open of the tail T at one row: the kept spellings outside :data:`BOX` that are
    neither in V_c nor in the cache (module docstring)."""
    base = om.base
    assert isinstance(base, ValueBase) and om.gate is None  # a value class is never gated
    exponents = [int(e) for e in EXPONENTS if _rule_writes(base.rule, int(e))]
    if not exponents:  # a listed rule: every member was scored
        return 0.0
    log_pe = base.precision.log_exponent[np.array(exponents, int) + MAX_DECIMALS]
    lo, hi = _tail_intervals(exponents)
    # spellings inside T's intervals that are not in T: scored above, or not in O_c
    inside = [
        sp
        for s in dict.fromkeys([*om.cls.candidates.strings, *cached, *base_listed(base)])
        if (sp := parse(s)) is not None
        and not in_box(sp.value, sp.decimals)
        and _rule_writes(base.rule, sp.exponents[0])
    ]

    def tail_mass(refs: np.ndarray, density) -> float:
        mass = log_interval_mass(lo[None, :], hi[None, :], refs, density)[0] + log_pe
        total = float(np.exp(logsumexp(mass)))
        if inside:
            each = spelling_paired(inside, np.repeat(refs, len(inside), 0), density, base.precision)
            total -= float(np.exp(each).sum())
        return total

    free = tail_mass(np.zeros((1, 1)), base.free) / np.exp(base.log_z_free)
    value = free
    refs = log_refs(ctx, base.reference, base.quantity_range)
    ok, log_z_ratio = base._ratio_rows(refs)
    if ok[0] and base.ratio is not None:
        ratio = tail_mass(refs, base.ratio) / np.exp(log_z_ratio[0])
        value = (1 - base.lam) * free + base.lam * ratio
    _, log_z = om._known_and_z(ctx)
    _, log_rest = om._kappa(cache, 1)
    return float(np.exp(log_rest[0]) * base.eta * value / np.exp(log_z[0]))


def base_listed(base: ValueBase) -> list[str]:
    """The spellings an "except" rule leaves out (round numbers, years), which lie among the
    integers T's intervals cover; none for the other rules."""
    return [spell(sp.value, 0, sp.comma) for sp in base.listed] if base.rule == "except" else []


def _rule_writes(rule: str, e: int) -> bool:
    """Whether the class's rule keeps spellings written at step 10^e: "decimals" only e < 0,
    "except" (integers but some) only e ≥ 0, "all" every e; "only" (a listed set, all
    inside the box or scored) none in the tail."""
    return {"all": True, "decimals": e < 0, "except": e >= 0, "only": False}[rule]


def _tail_intervals(exponents: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per rounding step 10^e, the interval its multiples outside the box tile: from the
    first multiple at or above the box's bound (every multiple, for decimals the box does
    not list) to the last below CAP, each ± half a step."""
    lo, hi = [], []
    for e in exponents:
        step = 10.0**e
        decimals = max(0, -e)
        if decimals >= len(BOX):
            first = 0.0
        else:
            bound = BOX[decimals]
            first = max(np.ceil(bound / step - 1e-9) * step, step)
        lo.append(first - step / 2 if first > 0 else 0.0)
        hi.append(CAP - step / 2)
    return np.array(lo), np.array(hi)
