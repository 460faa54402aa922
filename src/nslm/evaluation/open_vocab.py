"""Open-vocabulary scores: every token of a text counts, none is dropped as out-of-vocabulary.

Two conventions for what a model that says ``<unk>`` gets (docs/nslm.md, "Open vocabulary"):

* **proper** (the default): a spelling model (:mod:`nslm.scores.spelling`) spreads
  P(``<unk>`` | h) over every string outside the vocabulary V, so each model is one
  distribution over all strings and its scores sum to one: the token s ∉ V gets
  P(``<unk>`` | h) · P_spell(s | s ∉ V). Bits per byte compare with any other LM's.
* **adjusted** (Ueberla 1994; the convention of Spithourakis & Riedel 2018): P(``<unk>`` | h)
  / |U|, U the distinct out-of-vocabulary types of the scored text. Not a distribution (the
  literal ``<unk>`` keeps all of P(``<unk>`` | h) too): shown beside, named as such.

The in-vocabulary figure, the closed tables' count, stands beside both.

NSLM-open replaces each open class's micro-model by its open micro-model
(:mod:`nslm.micro.open_set`) over O_c ⊇ V_c: an in-vocabulary member of class c scores
P(c | h) · P_open(w | c, ctx), and an unseen token has two readings, the ``<unk>`` word
(charged as above) and its class's, P(c | h) · P_open(s | c, ctx); its probability is their sum.
A token is read as its rule's class only (the paper's per-position convention), so a number
that another class could also have written is never counted twice: a score here is never
above the model's probability of the string.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from nslm.data.corpus import Split
from nslm.data.fixed_vocab import TextSplit
from nslm.data.vocab import UNK
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.unk_share import NEW_MASS
from nslm.scores.mixture import ensemble_log_probs
from nslm.scores.passes import Scorer
from nslm.scores.spelling import SpellingModel
from nslm.scores.split_scores import SplitScores

CONVENTIONS = ("proper", "adjusted")


def oov_type_count(strings: Sequence[str], oov: np.ndarray) -> int:
    """|U|: the distinct out-of-vocabulary types of the scored text (at least 1)."""
    return max(1, len({strings[i] for i in np.flatnonzero(oov)}))


@dataclass
class OpenScores:
    """One text's scores, ready for either convention (module docstring).

    ``closed`` is the run's scoring pass; ``open_known`` log P_open(w | c, ctx) at the
    in-vocabulary tokens of each open class (NaN elsewhere); ``route`` log P(c | h) + log
    P_open(s | c, ctx) at the out-of-vocabulary tokens of an open class (NaN elsewhere, −inf
    outside O_c); ``spell`` log P_spell(s | s ∉ V) at the out-of-vocabulary tokens;
    ``new_share`` log P_new(s | c, ctx), the open model's share of its new members that s
    has, where ``route`` is finite.

    ``new_mass`` says where NSLM-open's new members take their mass from (``NEW_MASS``):
    ``escape``, the open micro-model's, from the known members; ``unk``, a share ρ_c of
    P(``<unk>`` | h) (``rho``: class id → ρ_c; :mod:`nslm.micro.unk_share`), the known members
    keeping the closed micro-model's; ``escape+unk``, both.
    """

    closed: SplitScores
    open_known: np.ndarray
    route: np.ndarray
    spell: np.ndarray
    oov: np.ndarray
    n_oov_types: int
    new_share: np.ndarray | None = None
    rule_class_ids: np.ndarray | None = None
    rho: dict[int, float] | None = None
    new_mass: str = "escape"

    def __post_init__(self) -> None:
        if self.new_mass not in NEW_MASS:
            raise ValueError(f"new_mass {self.new_mass!r}: choose {', '.join(NEW_MASS)}")
        if self.new_mass != "escape" and self.rho is None:
            raise ValueError(f"new_mass {self.new_mass!r} needs ρ per class (rho)")

    def _charge_unk(self, log_p: np.ndarray, convention: str) -> np.ndarray:
        """``log_p`` with the ``<unk>`` reading of each unseen token charged by ``convention``."""
        if convention not in CONVENTIONS:
            raise ValueError(f"convention {convention!r}: choose {' or '.join(CONVENTIONS)}")
        out = np.array(log_p, dtype=np.float64, copy=True)
        charge = self.spell[self.oov] if convention == "proper" else -math.log(self.n_oov_types)
        out[self.oov] += charge
        return out

    def nnlm(self, convention: str = "proper") -> np.ndarray:
        return self._charge_unk(self.closed.nnlm, convention)

    def pure(self, open_vocab: bool = True, convention: str = "proper") -> np.ndarray:
        """Eq. 4; with ``open_vocab``, the open micro-models' P_open at in-vocabulary class
        tokens, and the class reading added to the ``<unk>`` one at unseen tokens."""
        charged = self._charge_unk(self.closed.pure, convention)
        if not open_vocab:
            return charged
        out = charged if self.new_mass == "escape" else self._share_unk(charged)
        if self.new_mass == "unk":
            return out
        known = ~np.isnan(self.open_known) & ~np.isnan(self.closed.micro)
        out[known] += self.open_known[known] - self.closed.micro[known]
        new = np.isfinite(self.route)
        out[new] = np.logaddexp(out[new], self.route[new])
        return out

    def _share_unk(self, charged: np.ndarray) -> np.ndarray:
        """The ``<unk>`` reading of the unseen tokens shared with the classes' new members:
        P(<unk> | h) · [(1 − Σρ) · charge + ρ_c · P_new(s | c, ctx)]."""
        if self.new_share is None or self.rule_class_ids is None:
            raise ValueError("these scores were made without the new members' shares")
        log_unk = self.closed.pure[self.oov]
        charge = charged[self.oov] - log_unk
        share = np.full(len(log_unk), -np.inf)
        classes = self.rule_class_ids[self.oov]
        new = self.new_share[self.oov]
        for cid, r in self.rho.items():
            here = (classes == cid) & np.isfinite(new)
            if r > 0:
                share[here] = math.log(r) + new[here]
        out = charged.copy()
        out[self.oov] = log_unk + np.logaddexp(math.log1p(-sum(self.rho.values())) + charge, share)
        return out

    def ensemble(
        self, lam: float, open_vocab: bool = True, convention: str = "proper"
    ) -> np.ndarray:
        """λ·P_NNLM + (1 − λ)·P_NSLM, both under ``convention`` (the paper's ensemble)."""
        return ensemble_log_probs(self.nnlm(convention), self.pure(open_vocab, convention), lam)

    @property
    def scored_open(self) -> np.ndarray:
        """Out-of-vocabulary class tokens an open micro-model gave a probability."""
        return np.isfinite(self.route)


def open_scores(
    scorer: Scorer,
    text: TextSplit,
    micro: dict,
    open_models: dict[str, OpenMicroModel],
    spelling: SpellingModel,
    class_names: Sequence[str],
) -> OpenScores:
    """:class:`OpenScores` of ``text`` with ``micro`` (plain or context-aware) for the
    closed part and ``open_models`` for the open one."""
    split, strings = text.split, list(text.strings)
    if len(strings) != len(split):
        raise ValueError(f"{len(strings)} strings for a split of {len(split)} tokens")
    # outside the vocabulary: a <unk> that stands for another string (WikiText's literal
    # "<unk>" tokens are the vocabulary's own and are scored as such)
    oov = (split.token_ids == split.unk_id) & (np.asarray(strings, dtype=object) != UNK)
    spell = np.full(len(split), np.nan)
    spell[oov] = spelling.log_prob_outside([strings[i] for i in np.flatnonzero(oov)])
    closed = scorer.nslm(split, micro)
    states = gate_states(scorer, split, open_models)
    route, new_share = open_routes(scorer, split, strings, open_models, class_names, states)
    return OpenScores(
        closed=closed,
        open_known=_open_known(states, split, strings, open_models, closed, micro),
        route=route,
        spell=spell,
        oov=oov,
        n_oov_types=oov_type_count(strings, oov),
        new_share=new_share,
        rule_class_ids=np.asarray(split.rule_class_ids),
    )


class GateStates:
    """The LM's states at the positions of a text that gated open models read, from one
    backbone pass: ``at(positions)`` gives their rows."""

    def __init__(self, positions: np.ndarray, features) -> None:
        self.positions, self.features = positions, features

    def at(self, positions: np.ndarray):
        rows = np.searchsorted(self.positions, positions)
        found = rows < len(self.positions)
        if not found.all() or (self.positions[rows[found]] != positions[found]).any():
            raise ValueError("a position without a kept LM state")
        return self.features[rows]


def gate_states(scorer: Scorer, split: Split, models: dict[str, OpenMicroModel]) -> GateStates:
    """States at every token of a gated open model's class (by rule, in or out of the
    vocabulary): one pass for all of them."""
    mask = np.zeros(len(split), dtype=bool)
    for om in models.values():
        if om.needs_features:
            mask |= om.cls.context_mask(split, "class")
    positions = np.flatnonzero(mask)
    features = scorer.features_at(split, positions) if len(positions) else None
    return GateStates(positions, features)


def _open_known(
    states: GateStates,
    split: Split,
    strings: list[str],
    models: dict[str, OpenMicroModel],
    closed: SplitScores,
    micro: dict,
) -> np.ndarray:
    """log P(w | c) of NSLM-open at the in-vocabulary tokens of each open class: the open
    micro-model's P_open over plain micro-models; over context-aware ones their P_MM scaled by
    1 − P_open(new | c, ctx), so the class still spends on its new members what the open model
    would. An open model gated by the LM's state reads it at each position."""
    out = np.full(len(split), np.nan)
    for name, om in models.items():
        positions, _ = om.cls.positions(split)
        if not len(positions):
            continue
        ctx = om.cls.context(split, positions, om.micro.context)
        H = states.at(positions) if om.needs_features else None
        cache = om.text_cache(split, strings, positions)
        if micro.get(name) is not None and micro[name].needs_features:
            new = om.log_new_mass(ctx, H, cache)
            with np.errstate(divide="ignore"):
                out[positions] = closed.micro[positions] + np.log(-np.expm1(new))
        else:
            out[positions] = om.log_prob([strings[p] for p in positions], ctx, H, cache)
    return out


def rescored(
    scores: OpenScores,
    text: TextSplit,
    before: dict[str, OpenMicroModel],
    after: dict[str, OpenMicroModel],
    class_names: Sequence[str],
) -> OpenScores:
    """``scores`` (made with the open models ``before``) with the classes of ``after`` read
    by its models instead, the LM not run again: each class's known tokens' P_open, its
    unseen tokens' class reading (P(c | h) kept, P_open swapped) and new-member share. For
    ungated open models over plain micro-models (a value class's), whose reading needs no
    LM state; ``after``'s models read the class's members as ``before``'s do (one cache)."""
    split, strings = text.split, list(text.strings)
    known, route = scores.open_known.copy(), scores.route.copy()
    new_share = None if scores.new_share is None else scores.new_share.copy()
    for name, om in after.items():
        if om.needs_features or before[name].needs_features:
            raise ValueError(f"<{name}>: a gated open model reads the LM's state; score anew")
        positions, _ = om.cls.positions(split)
        if len(positions):
            ctx = om.cls.context(split, positions, om.micro.context)
            cache = om.text_cache(split, strings, positions)
            known[positions] = om.log_prob([strings[p] for p in positions], ctx, None, cache)
        unseen = split.oov_class_mask & (split.rule_class_ids == class_names.index(name))
        pos = np.flatnonzero(unseen & np.isfinite(route))
        if not len(pos):
            continue
        ctx = om.cls.context(split, pos, om.micro.context)
        words = [strings[p] for p in pos]
        cache = om.text_cache(split, strings, pos)
        old = before[name].log_prob(words, ctx, None, cache)
        log_open = om.log_prob(words, ctx, None, cache)
        route[pos] += log_open - old  # log P(c | h) + log P_open, with the new P_open
        if new_share is not None:
            with np.errstate(invalid="ignore"):
                new_share[pos] = log_open - om.log_new_mass(ctx, None, cache)
    return replace(scores, open_known=known, route=route, new_share=new_share)


def open_routes(
    scorer: Scorer,
    split: Split,
    strings: Sequence[str],
    models: dict[str, OpenMicroModel],
    class_names: Sequence[str],
    states: GateStates | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """log P(c | h) + log P_open(s | c, ctx) at the out-of-vocabulary tokens of every class
    with an open model, NaN elsewhere, −inf for a string outside the class's open set; and
    there log P_new(s | c, ctx), s's share of the new members' mass. ``states``: the LM's
    states a gated open model reads (:func:`gate_states`).

    P(c | h) is the run's top level at those positions: the split is scored once more with
    the rules' classes kept where the token is ``<unk>`` (``unk_id = -1`` keeps them)."""
    out = np.full(len(split), np.nan)
    new_share = np.full(len(split), np.nan)
    wanted = {class_names.index(name): om for name, om in models.items()}
    rows = split.oov_class_mask & np.isin(split.rule_class_ids, list(wanted))
    if not rows.any():
        return out, new_share
    top = scorer.score(replace(split, unk_id=-1), ("top",)).top
    for cid, om in wanted.items():
        pos = np.flatnonzero(rows & (split.rule_class_ids == cid))
        if len(pos):
            ctx = om.cls.context(split, pos, om.micro.context)
            states = states or gate_states(scorer, split, models)
            H = states.at(pos) if om.needs_features else None
            cache = om.text_cache(split, list(strings), pos)
            log_open = om.log_prob([strings[p] for p in pos], ctx, H, cache)
            out[pos] = top[pos] + log_open
            with np.errstate(invalid="ignore"):
                new_share[pos] = log_open - om.log_new_mass(ctx, H, cache)
    return out, new_share
