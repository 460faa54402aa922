"""The one scoring pass: a split in, exact per-position log-probabilities of every part out.

Every consumer goes through :class:`Scorer`: the tables and their extra columns (cache,
CRNN, n-gram NSLM, rarity), validation during training, the increment experiment, the
cost benchmark, and — through :meth:`Scorer.distribution` — ``predict`` and generation.

The stream layout is training's (:func:`nslm.batches.make_streams`: parallel streams cut at
article starts, TBPTT windows, state carried), so a split scores the same wherever it is
scored. Every array is float64, aligned with ``split.token_ids``: entry t is the natural log
of the probability of the token actually at t given w_<t, NaN where unscored (position 0).
Where P(c | h) comes from (the HNLM's top level, or the single-task sum over V_c) is the
run's :class:`~nslm.scores.classes.ClassFactor`, not a branch here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from nslm.batches import make_streams
from nslm.data.corpus import Split
from nslm.micro.model import MicroModel
from nslm.micro.pipeline import micro_log_probs
from nslm.models.lm import LanguageModel
from nslm.scores.classes import ClassFactor, NeuralOnly
from nslm.scores.distribution import FullDistribution
from nslm.scores.mixture import nslm_log_probs
from nslm.scores.split_scores import SplitScores


def use_threads(threads: int) -> None:
    """Set torch's CPU threads (0 = leave the default). On a shared machine more threads than
    free cores make torch's OpenMP workers spin, which slows a small model down by orders of
    magnitude (docs/history.md, "Threads on a shared machine")."""
    if threads > 0:
        torch.set_num_threads(threads)


def head_of(split: Split, max_tokens: int) -> Split:
    """The first ``max_tokens`` positions of a split (0 = all): quick looks and tests."""
    if max_tokens <= 0 or max_tokens >= len(split):
        return split
    names = ("token_ids", "rule_class_ids", "values", "coords", "convert_targets", "article_ids")
    return replace(split, **{k: getattr(split, k)[:max_tokens] for k in names})


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's weights are (the scoring pass moves each window there)."""
    return next(model.parameters()).device


@torch.no_grad()
def feature_batches(
    model: LanguageModel, split: Split, *, batch_size: int = 16, bptt: int = 70
) -> Iterator[tuple[Tensor, Tensor, Tensor, np.ndarray]]:
    """(features, targets, classes, split positions) for every scored position, in windows.

    Always float32, also for a model trained under bf16 autocast: a reported perplexity
    must not depend on the training precision. The tensors are on the model's device.
    """
    n = len(split)
    batch_size = max(1, min(batch_size, n // 2))
    streams = make_streams(split.token_ids, split.class_ids, split.article_ids, batch_size)
    device = model_device(model)
    was_training = model.training
    model.eval()
    state = None
    try:
        for _, (x, y, c, pos) in streams.batches(bptt):
            x_in = torch.from_numpy(x).to(device).long()
            with torch.autocast(device.type, enabled=False):
                h, state = model.features(x_in, state)
            keep = pos.reshape(-1) >= 0
            hv = h.reshape(-1, h.shape[-1])[torch.from_numpy(keep).to(device)].float()
            yield (
                hv,
                torch.from_numpy(y.reshape(-1)[keep]).to(device).long(),
                torch.from_numpy(c.reshape(-1)[keep]).to(device).long(),
                pos.reshape(-1)[keep],
            )
    finally:
        model.train(was_training)


class Scorer:
    """A model, its class factor and the evaluation stream settings; scores splits.

    Full passes (every part the run has) are memoised per split name and length, so the
    run's columns, the cache's hidden states and the CRNN's P(c | h) share one backbone pass.
    """

    def __init__(
        self,
        model: LanguageModel,
        classes: ClassFactor | None = None,
        *,
        batch_size: int = 16,
        bptt: int = 70,
        keep_features: bool = False,
        accuracy: bool = False,
    ) -> None:
        self.model = model
        self.classes = classes if classes is not None else NeuralOnly(model)
        self.batch_size, self.bptt = batch_size, bptt
        self.keep_features = keep_features
        # the argmax of the NNLM's full distribution at each position: one more pass over
        # the output layer (cheap for 256 bytes, not for a 33k-word softmax), so on request
        self.accuracy = accuracy
        self._memo: dict[tuple[str, int], SplitScores] = {}

    def batches(self, split: Split) -> Iterator[tuple[Tensor, Tensor, Tensor, np.ndarray]]:
        return feature_batches(self.model, split, batch_size=self.batch_size, bptt=self.bptt)

    @torch.no_grad()
    def score(
        self,
        split: Split,
        parts: Sequence[str] | None = None,
        features: bool | np.ndarray = False,
    ) -> SplitScores:
        """The asked ``parts`` of :data:`nslm.scores.classes.PARTS` (default: all the run
        has, memoised) for ``split``; with ``features``, the backbone states too (all of
        them, or with a (N,) bool mask only those rows; the others stay zero)."""
        keep = True if self.keep_features else features
        if parts is None:
            key = (split.name, len(split))
            if key not in self._memo or (keep is not False and self._memo[key].features is None):
                self._memo[key] = self._run(split, self.classes.parts, keep)
            return self._memo[key]
        return self._run(split, tuple(parts), keep)

    def _run(
        self, split: Split, parts: tuple[str, ...], keep_features: bool | np.ndarray
    ) -> SplitScores:
        self.classes.check(parts)
        n = len(split)
        out = {p: np.full(n, np.nan) for p in parts}
        rows = None
        if keep_features is not False:  # writing only the rows asked for is ~1 s on a test split
            rows = np.ones(n, dtype=bool) if keep_features is True else keep_features
        feats = torch.zeros(n, self.model.backbone.out_dim) if rows is not None else None
        correct = np.full(n, np.nan) if self.accuracy else None
        for hv, yv, cv, where in self.batches(split):
            for part, lp in self.classes.target_scores(self.model, hv, yv, cv, parts).items():
                out[part][where] = lp.cpu().numpy()
            if feats is not None:
                hit = rows[where]
                feats[torch.from_numpy(where[hit])] = hv[torch.from_numpy(hit)].cpu()
            if correct is not None:
                best = self.model.heads["nnlm"].log_dist(hv).argmax(dim=-1)
                correct[where] = (best == yv).cpu().numpy()
        return SplitScores(**out, features=feats, correct=correct)

    def nslm(
        self, split: Split, micro: dict[str, MicroModel], parts: Sequence[str] | None = None
    ) -> SplitScores:
        """:meth:`score` plus the micro-models' P_MM and the NSLM of Eq. 4 (``pure``); the
        backbone states are kept when a micro-model reads them (a context-aware one)."""
        reading = [m for m in micro.values() if m.needs_features]
        rows = np.zeros(len(split), dtype=bool)  # the states a context micro-model reads
        for m in reading:
            rows |= m.cls.target_mask(split)
        got = self.score(split, parts, features=rows if reading else False)
        mm = micro_log_probs(micro, split, got.features)
        return replace(got, micro=mm, pure=nslm_log_probs(got.top, split.class_ids, mm, got.neural))

    @torch.no_grad()
    def distribution(
        self,
        h: Tensor,
        micro: dict[str, MicroModel],
        class_names: tuple[str, ...],
        micro_rows: dict[str, np.ndarray],
    ) -> FullDistribution:
        """The NSLM's full next-token distribution for features ``h`` (N, D)."""
        return self.classes.distribution(self.model, h, micro, class_names, micro_rows)

    @torch.no_grad()
    def distribution_at(
        self,
        split: Split,
        positions: np.ndarray,
        micro: dict[str, MicroModel],
        class_names: tuple[str, ...],
    ) -> FullDistribution:
        """The NSLM's distribution over every type at ``positions`` of ``split`` (sorted,
        unique), from the same states as :meth:`score` (the sum-to-one checks)."""
        positions = np.asarray(positions, dtype=np.int64)
        feats = self.features_at(split, positions)
        rows = {}
        for name, mm in micro.items():
            rows[name] = mm.log_prob(mm.cls.context(split, positions, mm.context), feats)
        return self.distribution(feats, micro, class_names, rows)

    @torch.no_grad()
    def features_at(self, split: Split, positions: np.ndarray) -> Tensor:
        """(len(positions), D) backbone states at ``positions`` of ``split`` (sorted,
        unique), row i the one that predicted the token at ``positions[i]``: one pass, only
        the asked rows kept (a context micro-model's training rows)."""
        positions = np.asarray(positions, dtype=np.int64)
        wanted = np.zeros(len(split), dtype=bool)
        wanted[positions] = True
        feats = torch.zeros(len(positions), self.model.backbone.out_dim)
        for hv, _, _, where in self.batches(split):
            hit = wanted[where]
            if hit.any():
                rows = torch.from_numpy(np.searchsorted(positions, where[hit]))
                feats[rows] = hv[torch.from_numpy(hit)].cpu()
        return feats

    @torch.no_grad()
    def last_features(self, history: Sequence[int]) -> Tensor:
        """The backbone state after reading ``history`` (type ids) from a fresh state: (1, D)."""
        return self.last_states([history])

    @torch.no_grad()
    def last_states(self, histories: Sequence[Sequence[int]]) -> Tensor:
        """The backbone state after reading each history from a fresh state: (B, D), in one
        pass. Shorter histories are padded at the end, which the causal backbone never
        reads back: each row is taken at its own history's last token."""
        lengths = [len(h) for h in histories]
        if not lengths or min(lengths) == 0:
            raise ValueError("a history needs at least one token")
        x = torch.zeros(max(lengths), len(histories), dtype=torch.long)
        for b, history in enumerate(histories):
            x[: lengths[b], b] = torch.as_tensor(list(history), dtype=torch.long)
        was_training = self.model.training
        if was_training:  # a loaded run is in eval mode already: no walk over its modules
            self.model.eval()
        try:
            h, _ = self.model.features(x, None)
        finally:
            if was_training:
                self.model.train()
        ends = torch.as_tensor(lengths) - 1
        return h.reshape(max(lengths), len(histories), -1)[ends, torch.arange(len(lengths))].float()

    def time_eval(self, split: Split, micro: dict[str, MicroModel], lam: float) -> dict:
        """Wall time of an NNLM-only evaluation and of the NSLM evaluations, side by side.

        NNLM-only: backbone + NNLM head. NSLM (the reported ensemble): backbone + NNLM head
        + P(c | h) + micro-models + the mixture; with ``hnlm_top = "shared"`` the NNLM head
        and the top level are one pass over the same logits. NSLM-pure (Eq. 4 alone):
        backbone + P(c | h) + micro-models. The HNLM's within-class softmax is needed by
        neither and is not computed.
        """
        t0 = time.perf_counter()
        self.score(split, ("nnlm",))
        t_nnlm = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.nslm(split, micro, ("nnlm", "top")).ensemble(lam)
        t_nslm = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.nslm(split, micro, ("top",))
        t_pure = time.perf_counter() - t0
        return {
            "nnlm_seconds": t_nnlm,
            "nslm_seconds": t_nslm,
            "nslm_pure_seconds": t_pure,
            "ratio": t_nslm / t_nnlm,
            "ratio_pure": t_pure / t_nnlm,
        }


@torch.no_grad()
def next_token_log_probs(model: LanguageModel, history: Sequence[int]) -> dict[str, np.ndarray]:
    """Every head's full next-token distribution after ``history`` (type ids): {head: (V,)}.

    With an HNLM head, ``"hnlm_classes"`` adds log P(tag c | history) for every class c (NaN
    for c = 0 and for classes without a tag).
    """
    last = Scorer(model).last_features(history)
    result = {name: head.log_dist(last)[0].double().numpy() for name, head in model.heads.items()}
    if "hnlm" in model.heads:
        head = model.heads["hnlm"]
        top = head.top.log_prob(last)[0].double().numpy()
        tags = head.layout.top_of_tag
        result["hnlm_classes"] = np.where(tags >= 0, top[np.maximum(tags, 0)], np.nan)
    return result
