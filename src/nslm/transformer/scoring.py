"""A scored text's columns: the Transformer alone and with micro-models, token by token.

:func:`mixture_log_probs` joins the pieces for one :class:`nslm.transformer.passes.TextPass`:
the walk over the members' trie (:func:`nslm.transformer.mixture.walk`), the class head's
P(c | h) at each root, and each class's micro-model at the corpus token that starts there
(its previous class token found as :mod:`nslm.micro.history` finds it, never across an
article), into the per-token log-probabilities of :func:`nslm.transformer.mixture.score`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from scipy.special import logsumexp

from nslm.data.corpus import PreparedCorpus
from nslm.errors import NslmError
from nslm.transformer.candidates import Members, build_members
from nslm.transformer.class_head import ClassHead, position_labels
from nslm.transformer.mixture import Scored, score, walk
from nslm.transformer.passes import TextPass


def members_for(bundle: Any, corpus: PreparedCorpus, names: list[str] | None = None) -> Members:
    """Every class's V_c (or ``names``'), spelt by the Transformer's tokenizer, in V_c's
    order (the order of the micro-models' candidates)."""
    names = list(corpus.class_names[1:]) if names is None else names
    strings = {n: [corpus.vocab.itos[i] for i in corpus.class_vocab(n)] for n in names}
    size = int(bundle.checkpoint.config["vocab_size"])
    return build_members(bundle.checkpoint.tokenizer, size, strings)


def labels_of(text_pass: TextPass) -> np.ndarray:
    """The class head's label at each Transformer position (rule classes: an OOV year is
    still a year to the head)."""
    classes = text_pass.text.split.rule_class_ids.astype(np.int64)
    return position_labels(text_pass.tokens, text_pass.ranges, classes)


def corpus_index_at(text_pass: TextPass, positions: np.ndarray) -> np.ndarray:
    """For each Transformer position, the corpus token that starts there or next after it
    (the word a micro-model at that root would score)."""
    starts = text_pass.ranges[:, 0]
    spelt = np.flatnonzero(starts >= 0)
    at = np.searchsorted(starts[spelt], positions)
    return spelt[np.minimum(at, len(spelt) - 1)] if len(spelt) else np.zeros_like(positions)


def check_members(members: Members, models: Mapping[str, Any], corpus: PreparedCorpus) -> None:
    for name, model in models.items():
        if name not in members.classes:
            raise NslmError(f"micro-model <{name}> has no members here")
        if len(model.cls.candidates) != len(members.classes[name]):
            raise NslmError(f"micro-model <{name}> was fitted on another V_c")


def _contexts(text_pass: TextPass, models: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Each class's previous-class-token index at every corpus position."""
    from nslm.micro.history import previous_index

    split = text_pass.text.split
    out = {}
    for name, model in models.items():
        mask = model.cls.context_mask(split, getattr(model, "context", "class"))
        out[name] = previous_index(mask, split.article_ids)
    return out


def micro_log_probs_at(
    text_pass: TextPass, models: Mapping[str, Any], roots: np.ndarray, contexts=None
) -> dict[str, np.ndarray]:
    """log P_MM(· | c, w_prev^(c)) over each V_c at each root: {class: (B, K_c)}. A
    context-aware micro-model reads the Transformer's hidden state at the root."""
    from nslm.micro.history import Context

    contexts = _contexts(text_pass, models) if contexts is None else contexts
    split = text_pass.text.split
    at = corpus_index_at(text_pass, roots)
    out = {}
    for name, model in models.items():
        ctx = Context.at(split, at, contexts[name])
        states = text_pass.scores.hidden[roots].astype(np.float32) if model.needs_features else None
        out[name] = model.log_prob(ctx, states)
    return out


def combine(
    members: Members,
    class_names: tuple[str, ...],
    head_log_probs: np.ndarray,
    log_mm: Mapping[str, np.ndarray],
    lams: Mapping[str, float],
) -> np.ndarray:
    """log Q(w) = log Σ_c λ_c · P(c | h) · P_MM(w | c) over the members: (B, W)."""
    out = np.full((len(head_log_probs), len(members.strings)), -np.inf)
    for name, table in log_mm.items():
        lam = float(lams.get(name, 0.0))
        if lam <= 0:
            continue
        c = class_names.index(name)
        rows = np.log(lam) + head_log_probs[:, c][:, None] + table
        cols = members.classes[name]
        out[:, cols] = np.logaddexp(out[:, cols], rows)
    return out


def gate(
    head_log_probs: np.ndarray, class_names: tuple[str, ...], lams: Mapping[str, float]
) -> np.ndarray:
    """log G at every position: log Σ_c λ_c · P(c | h)."""
    weights = np.zeros(head_log_probs.shape[1])
    for name, lam in lams.items():
        weights[class_names.index(name)] = lam
    with np.errstate(divide="ignore"):
        return np.log(np.exp(head_log_probs) @ weights)


class MixtureParts:
    """What the mixture of one text needs, computed once: the walk, P(c | h) everywhere and
    (``cache=True``) every micro-model at every walked root, so that trying weights λ_c
    (:func:`fit_lambdas`) costs only the walk's arithmetic. With ``functions`` (a fitted
    :class:`nslm.functions.FunctionModel`), also where they fire and the walk over their
    roots' members (:mod:`nslm.transformer.functions`)."""

    def __init__(
        self,
        text_pass: TextPass,
        members: Members,
        models: Mapping[str, Any],
        head: ClassHead,
        class_names: tuple[str, ...],
        *,
        cache: bool = False,
        functions: Any = None,
    ) -> None:
        from nslm.transformer.sites import roots, text_sites

        self.text_pass, self.members, self.models = text_pass, members, models
        self.class_names = class_names
        self.segments = walk(members, text_pass.ids, text_pass.offsets, text_pass.plain)
        self.sites = {}
        self.function_segments = self.segments
        if functions is not None:
            text = text_pass.text
            self.sites = text_sites(
                functions, members, text.strings, text.split.article_ids, text_pass.ranges
            )
            every = {name: 1.0 for name in functions.functions}  # the walk needs the members
            anywhere = np.ones(len(text_pass.ids))
            self.function_segments = walk(
                members,
                text_pass.ids,
                text_pass.offsets,
                text_pass.plain,
                roots(self.sites, every, anywhere),
            )
        self.head_log_probs = head.log_probs(text_pass.scores.hidden)
        self.contexts = _contexts(text_pass, models)
        walked = {s.root for s in self.segments if s.how != 0}
        walked.update(s.root for s in self.function_segments if s.how != 0)
        self.roots = np.array(sorted(walked), dtype=np.int64)
        self.cached = (
            micro_log_probs_at(text_pass, models, self.roots, self.contexts) if cache else None
        )

    def log_q(self, lams: Mapping[str, float]):
        def at(roots: np.ndarray) -> np.ndarray:
            rows = np.searchsorted(self.roots, roots)
            known = self.cached is not None and len(self.roots) > 0
            if known and (rows < len(self.roots)).all() and (self.roots[rows] == roots).all():
                log_mm = {k: v[rows] for k, v in self.cached.items()}
            else:
                log_mm = micro_log_probs_at(self.text_pass, self.models, roots, self.contexts)
            return combine(self.members, self.class_names, self.head_log_probs[roots], log_mm, lams)

        return at

    def function_roots(self, function_weights: Mapping[str, float] | None) -> dict:
        from nslm.transformer.sites import number_mass, roots

        number = number_mass(self.head_log_probs, self.class_names)
        return roots(self.sites, function_weights or {}, number)

    def segments_for(self, function_weights: Mapping[str, float] | None) -> list:
        on = function_weights and any(v > 0 for v in function_weights.values())
        return self.function_segments if on and self.sites else self.segments

    def score(
        self,
        lams: Mapping[str, float] | None,
        function_weights: Mapping[str, float] | None = None,
    ) -> Scored:
        """Per-token log-probabilities with weights ``lams`` (None or all 0: the Transformer)
        and the functions at weights λ_f = ``function_weights`` (None: without them)."""
        scores = self.text_pass.scores
        functions = self.function_roots(function_weights)
        segments = self.segments_for(function_weights)
        if not functions and (not lams or not any(v > 0 for v in lams.values())):
            return score(segments, scores.log_probs, scores.set_log_probs, self.members)
        lams = lams or {}
        return score(
            segments,
            scores.log_probs,
            scores.set_log_probs,
            self.members,
            log_gate=gate(self.head_log_probs, self.class_names, lams),
            member_log_q=self.log_q(lams),
            functions=functions,
        )


LAMBDA_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9)


def coordinate_search(
    names: list[str], grid: tuple[float, ...], total: Callable[[dict], float], rounds: int = 2
) -> tuple[dict[str, float], float]:
    """Weights per name, each from ``grid``, by coordinate search from all 0 on ``total``
    (the text's log-probability with those weights); returns them and their total."""
    weights = {name: 0.0 for name in names}
    best = total(weights)
    for _ in range(rounds):
        moved = False
        for name in names:
            for value in grid:
                if value == weights[name]:
                    continue
                trial = {**weights, name: value}
                t = total(trial)
                if t > best + 1e-9:
                    best, weights, moved = t, trial, True
        if not moved:
            break
    return weights, best


def fit_lambdas(parts: MixtureParts, rounds: int = 2) -> tuple[dict[str, float], float]:
    """λ_c per class by coordinate search over :data:`LAMBDA_GRID` on the text's total
    log-probability (valid); returns the weights and that total (nats)."""
    return coordinate_search(
        list(parts.models),
        LAMBDA_GRID,
        lambda lams: float(parts.score(lams).log_probs.sum()),
        rounds,
    )


def sums_to_one(
    parts: MixtureParts,
    rows: np.ndarray,
    lams: Mapping[str, float],
    positions: int = 0,
    function_weights: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The whole next-token distribution of the mixture at every step of the walk over the
    text's first ``len(rows)`` tokens (``rows``: the Transformer's full log-distributions
    there, :func:`nslm.transformer.backbone.full_log_probs`): the largest |Σ − 1| and the
    largest gap between the distribution's value at the text's token and the walk's."""
    from nslm.transformer.mixture import MEMBER, node_distribution

    text_pass, members = parts.text_pass, parts.members
    n = min(len(rows), text_pass.tokens)
    rows = rows[:n] - logsumexp(rows[:n], axis=1, keepdims=True)  # float32 → float64 exact
    walked = parts.score(lams, function_weights)
    functions = parts.function_roots(function_weights)
    with np.errstate(divide="ignore"):
        log_keep = np.log1p(-np.exp(gate(parts.head_log_probs, parts.class_names, lams)))
    ids = text_pass.ids
    q_of = parts.log_q(lams)

    def root_at(i: int):
        """(members, spelling, log Q', log(1 − G')) of a root at position ``i``."""
        q = q_of(np.array([i]))[0]
        keep = float(log_keep[i])
        here = members
        if i in functions:
            here, q, keep = functions[i].members, functions[i].log_q(q), functions[i].log_keep(keep)
        start = int(text_pass.offsets[i][0])
        spelling = here.spelling(text_pass.plain[start - 1] if start else None)
        return here, spelling, q, keep

    worst, gap, count, on_trie = 0.0, 0.0, 0, 0
    for seg in parts.segments_for(function_weights):
        if seg.root >= n or (positions and count >= positions):
            break
        here, spelling, q, keep = root_at(seg.root)
        match = seg.match if seg.match is not None else np.zeros(len(here.strings), np.int64)
        prefix = 0.0
        for d in range(seg.depth + 1):
            i = seg.root + d
            if i >= n:
                break
            if d == 0 and seg.after is not None:  # checked as the end of the word before
                prefix += rows[i][ids[i]]
                continue
            following = None
            if seg.how == MEMBER and d == seg.depth:
                after = (seg.spelling, seg.member)
                nxt, nxt_spelling, q_next, keep_next = root_at(i)
                none = np.zeros(len(nxt.strings), np.int64)
                following = node_distribution(
                    rows[i], nxt, nxt_spelling, none, 0, 0.0, keep_next, q_next, after
                )
            dist = node_distribution(
                rows[i], here, spelling, match, d, prefix, keep, q, seg.after, following
            )
            worst = max(worst, abs(float(np.exp(dist).sum()) - 1.0))
            gap = max(gap, abs(float(dist[ids[i]]) - float(walked.log_probs[i])))
            count += 1
            on_trie += d > 0
            prefix += rows[i][ids[i]]
    return {"positions": count, "on_trie": on_trie, "max_error": worst, "max_gap": gap}
