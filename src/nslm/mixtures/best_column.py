"""``nslm eval RUN --best``: the strongest proper model of a run, "NSLM-best".

A linear interpolation of every model the evaluation has at hand and of three caches,

    P_best(w_t | h) = Σ_k π_k · P_k(w_t | h),   Σ_k π_k = 1, π_k ≥ 0

with P_k among the NNLM (paper Eq. 2), the NSLM of Eq. 4 with the plain micro-models
(NSLM-pure) and with the context-aware ones (NSLM-context's Eq. 4), the 5-gram and the
5-gram NSLM (:mod:`nslm.ngram.columns`), and three caches: the neural cache
(Grave et al. 2017, Eq. 2), the class cache and the unigram cache
(:mod:`nslm.mixtures.long_caches`), which reach further back at a fraction of its cost.
Each component is a distribution over the same outcomes at every position, and the weights
do not depend on the word, so the mixture is one too. The weights may depend on the
history's bucket, a probability that a class token comes next (:mod:`~nslm.evaluation.
mixture_weights`: the LM's own P(class | h), or how often the last token precedes a class
token in training), so where a number is likely the caches and micro-models of class tokens
may weigh more than elsewhere. Where a cache's window is still empty (a split's first
positions), its weight is spread over the others in proportion.

The weights are the maximum-likelihood mixture on validation, found by EM
(:mod:`nslm.mixtures.mixture_weights`). Each cache's window (and θ) is chosen on the same
positions by grid, one EM per grid point, one cache after the other (neural, class,
unigram), each with the ones before it fixed and one weight vector for every history; the
buckets' own weights are fitted last, for each signal the run has, and kept (with the signal)
only where they beat the pooled weights. As for every λ of the tables, the tuning positions
are the table's aggregate (or Global with ``--lambda-objective global``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from nslm.data.corpus import Split
from nslm.evaluation.columns import ColumnSource
from nslm.evaluation.context_column import ContextSource
from nslm.mixtures.cache_column import CacheGrid, CacheSource
from nslm.mixtures.long_caches import class_cache_probs, unigram_cache_probs
from nslm.mixtures.mixture_weights import (
    EDGES,
    SIGNALS,
    blend_by_bucket,
    blend_log_probs,
    fit_bucket_weights,
    fit_weights,
    history_buckets,
    previous_rates,
)
from nslm.perplexity import perplexity
from nslm.scores.passes import Scorer

COLUMN = "NSLM-best"
CACHE, CLASS_CACHE, UNIGRAM_CACHE = "cache", "class cache", "unigram cache"
# The columns that are models of their own (ensembles and "+cache" columns are mixtures of
# these, so the EM would only find them again); NSLM-context's Eq. 4 comes from its source.
MODELS = ("NNLM", "NSLM-pure", "5-gram", "5-gram NSLM", "CRNN")
CONTEXT = "NSLM-context-pure"
# The neural cache's windows stop at 500: its cost grows with the window, and NSLM-best is
# held to 1.6 NNLM passes, which a window of 1,000 overran; the class and unigram caches,
# cheaper per position, reach further (BENCHMARKS.md, "The best NSLM", has the timings).
BEST_GRID = CacheGrid(windows=(250, 500), thetas=(0.25, 0.5, 0.75, 1.0))
CLASS_GRID = CacheGrid(windows=(2000, 5000, 10000, 20000), thetas=(0.25, 0.5, 0.75, 1.0))
UNIGRAM_WINDOWS = (1000, 3000, 10000)


def _log(p: np.ndarray) -> np.ndarray:
    """log p, with log 0 = −inf (a word a cache's window has not seen)."""
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(p, dtype=np.float64))


@dataclass(frozen=True)
class BestChoice:
    components: tuple[str, ...]  # in the order of ``weights``; the caches last
    weights: tuple[float, ...]
    window: int  # the neural cache's
    theta: float
    class_window: int
    class_theta: float
    unigram_window: int
    valid_ppl: float  # on the tuning positions
    valid_ppl_components: dict[str, float]  # each model alone, same positions
    valid_ppl_by_window: dict[int, float] = field(default_factory=dict)  # neural, best θ
    valid_ppl_by_class_window: dict[int, float] = field(default_factory=dict)
    # per history bucket of ``bucket_by`` (a mixture_weights.SIGNALS; "": none, ``weights``
    # everywhere), the weights in ``components`` order; on the tuning positions, the
    # perplexity with ``weights`` alone ("pooled") and with each signal's buckets
    bucket_by: str = ""
    bucket_weights: tuple[tuple[float, ...], ...] = ()
    bucket_edges: tuple[float, ...] = EDGES
    valid_ppl_by_buckets: dict[str, float] = field(default_factory=dict)

    def caches(self, split: Split, hidden: torch.Tensor, neural: np.ndarray) -> dict:
        """The three caches' p(w_t) at every position of ``split``, given the neural one
        and the backbone's states (``hidden[i]`` predicted w_{i+1})."""
        tokens = torch.from_numpy(split.token_ids.astype(np.int64))
        every = np.arange(1, len(split))
        grid = class_cache_probs(
            hidden, tokens, split.class_ids > 0, [self.class_window], [self.class_theta], every
        )
        in_class = np.full(len(split), math.nan)
        in_class[1:] = grid[(self.class_window, self.class_theta)]
        unigram = np.full(len(split), math.nan)
        unigram[1:] = unigram_cache_probs(split.token_ids, self.unigram_window, every)
        return {CACHE: neural, CLASS_CACHE: in_class, UNIGRAM_CACHE: unigram}

    def mix(
        self, models: dict[str, np.ndarray], caches: dict[str, np.ndarray], signal=None
    ) -> np.ndarray:
        """log P_best(w_t | h) per position, from the models' scores, the caches' p and,
        with bucket weights, each position's ``bucket_by`` probability (:func:`bucket_signal`)."""
        parts = {**models, **{n: _log(p) for n, p in caches.items()}}
        stacked = np.stack([parts[c] for c in self.components])
        if not self.bucket_weights:
            return blend_log_probs(stacked, np.array(self.weights))
        if signal is None:
            raise ValueError(f"{COLUMN}'s weights depend on {self.bucket_by}: pass it")
        buckets = history_buckets(signal, self.bucket_edges)
        return blend_by_bucket(stacked, buckets, np.array(self.bucket_weights))

    def recipe(self) -> str:
        parts = [f"{w:.3f}·{n}" for n, w in zip(self.components, self.weights, strict=True)]
        return (
            " + ".join(parts)
            + (
                f" (cache window {self.window}, θ {self.theta:g}; class cache window "
                f"{self.class_window}, θ {self.class_theta:g}; unigram cache window "
                f"{self.unigram_window})"
            )
            + (
                f"; weights per history bucket, {len(self.bucket_weights)} buckets of "
                f"{self.bucket_by}"
                if self.bucket_weights
                else ""
            )
        )


def bucket_signal(by: str, split: Split, rates: np.ndarray | None, class_mass) -> np.ndarray:
    """Every position's probability of a class token next, as signal ``by`` reads it
    (:data:`~nslm.mixtures.mixture_weights.SIGNALS`): from the training split's rates
    r(v), or from the scoring pass's ``class_mass`` (log Σ_c P(c | h))."""
    if by == "r(w_prev)" and rates is not None:
        return previous_rates(split.token_ids, rates)
    if by == "P(class|h)" and class_mass is not None:
        return np.exp(class_mass)
    raise ValueError(f"no {by} for {split.name}: the run lacks what it is read from")


def _best_of(models_at: np.ndarray, options: dict) -> tuple[Any, np.ndarray, float, dict]:
    """The option (a key of ``options``: log p of one more component at the tuning
    positions) whose EM mixture with ``models_at`` is likeliest: (key, weights, ppl, the best
    ppl per window)."""
    best, by_window = None, {}
    for key, log_p in options.items():
        mixed = np.vstack([models_at, log_p[None, :]])
        weights = fit_weights(mixed)
        ppl = perplexity(blend_log_probs(mixed, weights))
        window = key[0] if isinstance(key, tuple) else key
        by_window[window] = min(ppl, by_window.get(window, math.inf))
        if best is None or ppl < best[2]:
            best = (key, weights, ppl)
    assert best is not None
    return (*best, by_window)


class BestSource(ColumnSource):
    """Adds the "NSLM-best" column: :meth:`fit` tunes the mixture of a table on valid,
    :meth:`score` applies it. ``context`` is the run's NSLM-context source, whose Eq. 4 it mixes in;
    ``rates``, r(v) of every vocabulary id (:func:`class_next_rates` of the run's training
    split), gives the r(w_prev) buckets; a run whose scoring pass has ``class_mass`` gives
    the P(class|h) ones."""

    def __init__(
        self,
        scorer: Scorer,
        context: ContextSource | None = None,
        grid: CacheGrid = BEST_GRID,
        rates: np.ndarray | None = None,
    ) -> None:
        self.cache = CacheSource(scorer, grid)
        self.context = context
        self.rates = rates
        self.choices: dict[str, BestChoice] = {}
        # per table, the tuning positions and NSLM-best's log-probabilities there
        self.valid_scores: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def components(self, name: str, split: Split, columns: dict[str, np.ndarray]) -> dict:
        """The models to mix, by name: per-position log-probabilities on ``split``."""
        found = {m: columns[m] for m in MODELS if m in columns}
        if self.context is not None:
            found[CONTEXT] = self.context.scores(name, split).pure
        return found

    def fit(
        self, table: str, valid: Split, columns: dict[str, np.ndarray], mask: np.ndarray | None
    ) -> dict:
        self.choices.pop(table, None)
        self._tune(table, valid, self.components("valid", valid, columns), mask)
        return {}  # nothing after NSLM-best reads its validation column

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict:
        models = self.components(name, split, columns)
        choice = self.choices.get(table)
        if choice is None:  # no validation position of this table to tune on
            return {}
        neural = self.cache.probs(name, split, choice.window, choice.theta).numpy()
        hidden, _ = self.cache.states(split)
        caches = choice.caches(split, hidden, neural)
        by, class_mass = choice.bucket_by, self.cache.scorer.score(split).class_mass
        signal = bucket_signal(by, split, self.rates, class_mass) if by else None
        return {COLUMN: choice.mix(models, caches, signal)}

    def signals(self, split: Split) -> dict[str, np.ndarray]:
        """The bucket signals this run has, by name, at every position of ``split``."""
        class_mass = self.cache.scorer.score(split).class_mass
        sources = {"r(w_prev)": self.rates, "P(class|h)": class_mass}
        return {
            by: bucket_signal(by, split, self.rates, class_mass)
            for by in SIGNALS
            if sources[by] is not None
        }

    def _tune(
        self, table: str, split: Split, models: dict[str, np.ndarray], mask: np.ndarray | None
    ) -> None:
        names = tuple(models)
        stacked = np.stack([models[n] for n in names])
        usable = np.all(np.isfinite(stacked), axis=0)
        if mask is not None:
            usable &= mask
        positions = np.flatnonzero(usable)
        positions = positions[positions >= 2]  # where the neural cache has a memory
        if positions.size == 0:  # e.g. a --prefix-tokens prefix without the table's classes
            return
        at = stacked[:, positions]
        alone = {n: perplexity(at[i]) for i, n in enumerate(names)}
        neural = {k: _log(p.numpy()) for k, p in self.cache.probs_at(split, positions).items()}
        (window, theta), _, _, by_window = _best_of(at, neural)
        at = np.vstack([at, neural[(window, theta)][None, :]])
        hidden, tokens = self.cache.states(split)
        grid = class_cache_probs(
            hidden, tokens, split.class_ids > 0, CLASS_GRID.windows, CLASS_GRID.thetas, positions
        )
        (class_window, class_theta), _, _, by_class = _best_of(
            at, {k: _log(p) for k, p in grid.items()}
        )
        at = np.vstack([at, _log(grid[(class_window, class_theta)])[None, :]])
        unigram = {
            w: _log(unigram_cache_probs(split.token_ids, w, positions)) for w in UNIGRAM_WINDOWS
        }
        unigram_window, weights, ppl, _ = _best_of(at, unigram)
        at = np.vstack([at, unigram[unigram_window][None, :]])
        # the buckets' own weights, last, for each signal; kept where they beat the pooled
        by, per_bucket, mixed = "", (), blend_log_probs(at, weights)
        by_buckets = {"pooled": ppl}
        for name, signal in self.signals(split).items():
            buckets = history_buckets(signal[positions])
            fitted = fit_bucket_weights(at, buckets, weights)
            bucketed = blend_by_bucket(at, buckets, fitted)
            by_buckets[name] = perplexity(bucketed)
            if by_buckets[name] < ppl:
                ppl, by, mixed = by_buckets[name], name, bucketed
                per_bucket = tuple(tuple(map(float, w)) for w in fitted)
        self.valid_scores[table] = (positions, mixed)
        self.choices[table] = BestChoice(
            (*names, CACHE, CLASS_CACHE, UNIGRAM_CACHE),
            tuple(map(float, weights)),
            window,
            theta,
            class_window,
            class_theta,
            unigram_window,
            ppl,
            alone,
            by_window,
            by_class,
            by,
            per_bucket,
            EDGES,
            by_buckets,
        )

    def describe(self, table: str, entry: dict[str, Any]) -> dict[str, Any]:
        choice = self.choices.get(table)
        if choice is None:
            return {}
        note = f"{COLUMN} = {choice.recipe()}, tuned on valid (EM)"
        return {
            "best": asdict(choice) | {"recipe": choice.recipe()},
            "notes": [*entry.get("notes", []), note],
        }
