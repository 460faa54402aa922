"""Open-vocabulary scores: every token of a text counts, none is dropped as out-of-vocabulary.

Two conventions, side by side in every open table (docs/nslm.md, "Open vocabulary"):

* **adjusted** (Ueberla 1994; the convention of Spithourakis & Riedel 2018): a token a
  model maps to ``<unk>`` is charged P(``<unk>`` | h) / |U|, U the distinct
  out-of-vocabulary types of the scored text, so a model cannot gain by predicting
  ``<unk>``; every token counts, class rows are by the rules' class (``rule_class_ids``);
* **in-vocabulary**: only the tokens in the training vocabulary, as the closed tables count.

The open-vocabulary NSLM (NSLM-open) scores an out-of-vocabulary class token w of class c
by Eq. 4 with the open micro-model of :mod:`nslm.micro.open_vocab`:
P(c | h) · β_c · q_c(w | ctx), and an in-vocabulary one by P(c | h) · (1 − β_c) · P_MM.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from nslm.data.corpus import Split
from nslm.data.vocab import UNK
from nslm.micro.history import Context
from nslm.micro.logspace import logsumexp
from nslm.micro.open_vocab import OpenClass
from nslm.scores.distribution import FullDistribution
from nslm.scores.mixture import ensemble_log_probs
from nslm.scores.passes import Scorer
from nslm.scores.split_scores import SplitScores


def oov_type_count(strings: Sequence[str], oov: np.ndarray) -> int:
    """|U|: the distinct out-of-vocabulary types of the scored text (at least 1)."""
    return max(1, len({strings[i] for i in np.flatnonzero(oov)}))


def adjusted(log_probs: np.ndarray, oov: np.ndarray, n_types: int) -> np.ndarray:
    """log P with P(<unk> | h) spread evenly over the |U| = ``n_types`` unknown types."""
    out = np.array(log_probs, dtype=np.float64, copy=True)
    out[oov] -= math.log(n_types)
    return out


def open_routes(
    scorer: Scorer,
    split: Split,
    strings: Sequence[str],
    open_classes: dict[str, OpenClass],
    class_names: Sequence[str],
) -> np.ndarray:
    """log P(c | h) + log q_c(w | ctx) at the out-of-vocabulary tokens of every class with an
    open model (the class route before β_c), NaN elsewhere, −inf for a string outside the
    class's open set.

    P(c | h) is the run's top level at those positions: the split is scored once more with
    the rules' classes kept where the token is ``<unk>`` (``unk_id = -1`` keeps them).
    """
    out = np.full(len(split), np.nan)
    wanted = {class_names.index(name): oc for name, oc in open_classes.items()}
    rows = split.oov_class_mask & np.isin(split.rule_class_ids, list(wanted))
    if not rows.any():
        return out
    top = scorer.score(replace(split, unk_id=-1), ("top",)).top
    for cid, oc in wanted.items():
        pos = np.flatnonzero(rows & (split.rule_class_ids == cid))
        if len(pos):
            ctx = oc.cls.context(split, pos, oc.micro.context)
            out[pos] = top[pos] + oc.log_q([strings[p] for p in pos], ctx)
    return out


@dataclass
class OpenScores:
    """One split's scores under both conventions (module docstring).

    ``closed`` is the run's usual scoring pass (NNLM, NSLM-pure, …); ``route`` the class
    route log P(c | h) + log q_c at out-of-vocabulary class tokens (:func:`open_routes`);
    ``escapes`` β_c of each open class by class id, ``rule`` the rules' class per token.

    An unseen class token has two readings, as a type of two classes has in the full
    distribution (:mod:`nslm.scores.distribution`): the ``<unk>`` word, charged
    P(<unk> | h)/|U| as for a closed model, and the class route P(c | h) · β_c · q_c(w); its
    probability is their sum. Both readings are parts of one proper distribution: the
    ``<unk>`` word's mass is spread over U, the class's β_c over its new members.
    """

    closed: SplitScores
    route: np.ndarray
    rule: np.ndarray
    escapes: dict[int, float]
    oov: np.ndarray  # the token is outside the vocabulary (<unk>)
    n_oov_types: int

    def nnlm(self) -> np.ndarray:
        return adjusted(self.closed.nnlm, self.oov, self.n_oov_types)

    def beta(self) -> np.ndarray:
        """β_c of each token's class (0 for a word or a class without an open model)."""
        out = np.zeros(len(self.rule))
        for cid, escape in self.escapes.items():
            out[self.rule == cid] = escape
        return out

    def pure(self, open_vocab: bool = True) -> np.ndarray:
        """Eq. 4, adjusted; with ``open_vocab``, in-vocabulary class tokens pay log(1 − β_c)
        and unseen ones add the class route to their ``<unk>`` reading (class docstring)."""
        out = adjusted(self.closed.pure, self.oov, self.n_oov_types)
        if not open_vocab:
            return out
        beta = self.beta()
        seen = (beta > 0) & ~self.oov
        out[seen] += np.log1p(-beta[seen])
        new = (beta > 0) & np.isfinite(self.route)
        out[new] = np.logaddexp(out[new], np.log(beta[new]) + self.route[new])
        return out

    def ensemble(self, lam: float, open_vocab: bool = True) -> np.ndarray:
        """λ·P_NNLM + (1 − λ)·P_NSLM, both adjusted (the paper's ensemble, open or not)."""
        return ensemble_log_probs(self.nnlm(), self.pure(open_vocab), lam)

    @property
    def scored_open(self) -> np.ndarray:
        """Out-of-vocabulary class tokens an open micro-model scored."""
        return np.isfinite(self.route) & (self.beta() > 0)

    def with_escapes(self, escapes: dict[int, float]) -> OpenScores:
        return replace(self, escapes={**self.escapes, **escapes})


ESCAPE_GRID = (1e-5, 1e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.2, 0.3, 0.5)


def tune_escapes(scores: OpenScores) -> dict[int, float]:
    """β_c of each open class that maximises the likelihood of the class's tokens (every one,
    adjusted) under NSLM-open on ``scores`` (validation): β_c only moves mass between a
    class's known and new members, so each class is tuned alone; the Good-Turing estimate
    it starts from competes in the grid."""
    closed = adjusted(scores.closed.pure, scores.oov, scores.n_oov_types)
    out = {}
    for cid, start in scores.escapes.items():
        if start <= 0:
            continue  # no new member to escape to
        mine = (scores.rule == cid) & ~np.isnan(closed)
        n_seen = int((mine & ~scores.oov).sum())
        new = mine & scores.oov
        unk, route = closed[new], scores.route[new]

        def log_lik(b: float, unk=unk, route=route, n_seen=n_seen) -> float:
            return n_seen * np.log1p(-b) + float(np.logaddexp(unk, np.log(b) + route).sum())

        out[cid] = max((start, *ESCAPE_GRID), key=log_lik)
    return out


def open_scores(
    scorer: Scorer,
    split: Split,
    strings: Sequence[str],
    micro: dict,
    open_classes: dict[str, OpenClass],
    class_names: Sequence[str],
) -> OpenScores:
    """:class:`OpenScores` of ``split`` (``strings``: its token strings, which the ids of
    unknown tokens lose) with ``micro`` for the in-vocabulary part (plain or context-aware)
    and ``open_classes`` for the rest."""
    if len(strings) != len(split):
        raise ValueError(f"{len(strings)} strings for a split of {len(split)} tokens")
    # outside the vocabulary: a <unk> that stands for another string (WikiText's literal
    # "<unk>" tokens are the vocabulary's own and are scored as such)
    oov = (split.token_ids == split.unk_id) & (np.asarray(strings, dtype=object) != UNK)
    return OpenScores(
        closed=scorer.nslm(split, micro),
        route=open_routes(scorer, split, strings, open_classes, class_names),
        rule=split.rule_class_ids,
        escapes={class_names.index(n): oc.escape for n, oc in open_classes.items()},
        oov=oov,
        n_oov_types=oov_type_count(strings, oov),
    )


def open_total_mass(
    full: FullDistribution,
    open_classes: dict[str, OpenClass],
    class_names: Sequence[str],
    contexts: dict[str, Context],
) -> np.ndarray:
    """Σ P over the vocabulary and every open member, per row of ``full`` (N,): the words,
    then each class's P(c | h) · [(1 − β_c) · Σ_{V_c} P_MM + β_c · Σ_{O_c \\ V_c} q_c], the
    new members enumerated or summed in closed form (``contexts``: each open class's
    context at the rows). 1 up to rounding for a proper NSLM-open."""
    total = np.exp(logsumexp(full.word, axis=1))
    for c, (_, logp) in full.within.items():
        inside = np.exp(logsumexp(logp, axis=1))
        oc = open_classes.get(class_names[c])
        if oc is not None:
            new = oc.new_mass(contexts[class_names[c]])
            inside = (1 - oc.escape) * inside + oc.escape * new
        total += np.exp(full.tag[:, c]) * inside
    return total


def open_marginal(
    full: FullDistribution, open_classes: dict[str, OpenClass], class_names: Sequence[str]
) -> np.ndarray:
    """log P_NSLM-open(w | h) over the vocabulary (N, V): the word part plus every class's
    pairs, an open class's scaled by (1 − β_c) (its new members lie outside the vocabulary)."""
    out = full.word.copy()
    for c, joint in full.class_parts().items():
        oc = open_classes.get(class_names[c])
        members = full.within[c][0]
        scaled = joint + oc.log_keep if oc is not None else joint
        out[:, members] = np.logaddexp(out[:, members], scaled)
    return out
