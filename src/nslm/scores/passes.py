"""Score a split with the NNLM, HNLM and NSLM heads of a run, per position and in full.

The stream layout is :func:`nslm.scores.positions.score_arrays`'s (parallel streams cut at article
starts, TBPTT windows, state carried), so every number here agrees with ``nslm eval``'s
global perplexities. What this adds: the NSLM of paper Eq. 4 (HNLM top-level softmax ×
micro-model), only the parts a model needs (an NNLM-only pass for the cost benchmark), and
the full next-token distribution at chosen positions (the sum-to-one checks).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from nslm.batches.streams import make_streams
from nslm.data.corpus import Split
from nslm.micro.model import MicroModel
from nslm.micro.pipeline import micro_log_probs
from nslm.models.lm import LanguageModel
from nslm.scores.mixture import (
    FullDistribution,
    ensemble_log_probs,
    full_distribution,
    nslm_log_probs,
)

PARTS = ("nnlm", "hnlm", "top")


def use_threads(threads: int) -> None:
    """Set torch's CPU threads (0 = leave the default). On a shared machine more threads than
    free cores make torch's OpenMP workers spin: a 1×32 LSTM evaluated 100× slower with 2
    threads than with 1 on the 2-core box while another job ran (measured)."""
    if threads > 0:
        torch.set_num_threads(threads)


@torch.no_grad()
def feature_batches(
    model: LanguageModel, split: Split, *, batch_size: int = 16, bptt: int = 70
) -> Iterator[tuple[Tensor, Tensor, Tensor, np.ndarray]]:
    """(features, targets, classes, split positions) for every scored position, in windows."""
    n = len(split)
    batch_size = max(1, min(batch_size, n // 2))
    streams = make_streams(
        split.token_ids, split.class_ids.astype(np.int64), split.article_ids, batch_size
    )
    was_training = model.training
    model.eval()
    state = None
    try:
        for _, (x, y, c, pos) in streams.batches(bptt):
            h, state = model.features(torch.from_numpy(x), state)
            keep = pos.reshape(-1) >= 0
            hv = h.reshape(-1, h.shape[-1])[torch.from_numpy(keep)].float()
            yield (
                hv,
                torch.from_numpy(y.reshape(-1)[keep]),
                torch.from_numpy(c.reshape(-1)[keep]),
                pos.reshape(-1)[keep],
            )
    finally:
        model.train(was_training)


@torch.no_grad()
def score_parts(
    model: LanguageModel, split: Split, parts: tuple[str, ...] = PARTS, **kwargs
) -> dict[str, np.ndarray]:
    """Per-position log-probabilities of the asked ``parts`` (NaN = unscored).

    ``nnlm``: Eq. 2; ``hnlm``: Eq. 3; ``top``: log P(c_t | h) at class positions and
    log P_top(w_t | h) at word positions (the NSLM's neural factor, Eq. 4).
    """
    if "top" in parts and "hnlm" not in model.heads:  # single-task P(c | h) (Table 8)
        from nslm.scores.single_task import score_single_task

        if "hnlm" in parts:
            raise ValueError("this model has no HNLM head")
        got = score_single_task(model, split, {}, **kwargs)
        return {p: getattr(got, p) for p in parts}
    out = {p: np.full(len(split), np.nan) for p in parts}
    for hv, yv, cv, where in feature_batches(model, split, **kwargs):
        for name, lp in model.target_log_probs(hv, yv, cv, parts).items():
            out[name][where] = lp.double().numpy()
    return out


@dataclass
class NSLMScores:
    """Per-position log-probabilities of one split for every column of the tables."""

    nnlm: np.ndarray
    hnlm: np.ndarray | None
    top: np.ndarray
    micro: np.ndarray  # log P_MM at covered class positions, NaN elsewhere
    pure: np.ndarray  # Eq. 4

    def ensemble(self, lam: float) -> np.ndarray:
        return ensemble_log_probs(self.nnlm, self.pure, lam)

    def columns(self, lam: float) -> dict[str, np.ndarray]:
        cols = {"NNLM": self.nnlm}
        if self.hnlm is not None:
            cols["HNLM"] = self.hnlm
        cols["NSLM"] = self.ensemble(lam)
        cols["NSLM-pure"] = self.pure
        return cols


def score_nslm(
    model: LanguageModel,
    split: Split,
    micro: dict[str, MicroModel],
    *,
    with_hnlm: bool = True,
    **kwargs,
) -> NSLMScores:
    """Score ``split`` with the NNLM, (optionally) the HNLM and the NSLM (Eq. 4)."""
    if "hnlm" not in model.heads:  # single-task NSLM: P(c | h) from the NNLM (Table 8)
        from nslm.scores.single_task import score_single_task

        return score_single_task(model, split, micro, **kwargs)
    parts = ("nnlm", "hnlm", "top") if with_hnlm else ("nnlm", "top")
    got = score_parts(model, split, parts, **kwargs)
    mm = micro_log_probs(micro, split)
    pure = nslm_log_probs(got["top"], split.class_ids, mm, got.get("hnlm"))
    return NSLMScores(got["nnlm"], got.get("hnlm"), got["top"], mm, pure)


def neural_within(model: LanguageModel, h: Tensor, cls: int) -> np.ndarray:
    """The HNLM's within-class log-softmax over V_c (Eq. 3's P_C) for features h: (N, K)."""
    head = model.heads["hnlm"]
    rows = head._rows[cls]  # the output rows of V_c's members (HNLMHead keeps them)
    logits = F.linear(h, head.within.weight[rows], head.within.bias[rows]).float()
    return F.log_softmax(logits, dim=-1).double().numpy()


def micro_part(
    mm: MicroModel, members: np.ndarray, rows: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], str]:
    """Class c's within-class part of the NSLM distribution from its micro-model (Eq. 4's
    P_MM rows over V_c) and the name of the pair that produced it."""
    if not np.array_equal(mm.cls.candidates.vocab_ids, members):
        raise ValueError(f"<{mm.cls.name}>: the micro-model's V_c differs from the LM's")
    return (members, rows), f"{mm.metric.name}+{mm.pdf.name}"


@torch.no_grad()
def distribution_from_features(
    model: LanguageModel,
    h: Tensor,
    micro: dict[str, MicroModel],
    class_names: tuple[str, ...],
    micro_rows: dict[str, np.ndarray],
) -> FullDistribution:
    """The NSLM's full next-token distribution for features ``h`` (N, D).

    ``micro_rows[class]`` holds log P_MM over V_c for each of the N rows (the micro-model's
    context differs per position, so the caller builds it); a tagged class without a
    micro-model uses the HNLM's neural within-class softmax.
    """
    if "hnlm" not in model.heads:  # single-task NSLM: P(c | h) from the NNLM (Table 8)
        from nslm.scores.single_task import distribution

        return distribution(model, h, micro, class_names, micro_rows)
    head = model.heads["hnlm"]
    layout = head.layout
    top = head.top.log_prob(h).double().numpy()
    within: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    source: dict[int, str] = {}
    for c in np.flatnonzero(layout.top_of_tag >= 0).tolist():
        name = class_names[c]
        members = layout.members[c]
        if name in micro:
            within[c], source[c] = micro_part(micro[name], members, micro_rows[name])
        else:
            within[c] = (members, neural_within(model, h, c))
            source[c] = "neural"
    return full_distribution(top, layout.top_of_word, layout.top_of_tag, within, source)


@torch.no_grad()
def full_distribution_at(
    model: LanguageModel,
    split: Split,
    positions: np.ndarray,
    micro: dict[str, MicroModel],
    class_names: tuple[str, ...],
    **kwargs,
) -> FullDistribution:
    """The NSLM's distribution over every type at ``positions`` of ``split`` (sorted, unique),
    with the same states as :func:`score_nslm` (the per-position scores must agree with it)."""
    positions = np.asarray(positions, dtype=np.int64)
    wanted = np.zeros(len(split), dtype=bool)
    wanted[positions] = True
    feats = torch.zeros(len(positions), model.backbone.out_dim)
    for hv, _, _, where in feature_batches(model, split, **kwargs):
        hit = wanted[where]
        if hit.any():
            feats[torch.from_numpy(np.searchsorted(positions, where[hit]))] = hv[
                torch.from_numpy(hit)
            ]
    rows = {}
    for name, mm in micro.items():
        ctx = mm.cls.context(split, positions, mm.context)
        rows[name] = mm.log_prob(ctx)
    return distribution_from_features(model, feats, micro, class_names, rows)


def time_eval(
    model: LanguageModel, split: Split, micro: dict[str, MicroModel], lam: float, **kwargs
) -> dict[str, float]:
    """Wall time of an NNLM-only evaluation and of the NSLM evaluations, side by side.

    NNLM-only: backbone + NNLM head. NSLM (the reported ensemble, SPEC §9): backbone + NNLM
    head + the HNLM's top level + micro-models + the mixture; with ``hnlm_top = "shared"``
    the NNLM head and the top level are one pass over the same logits. NSLM-pure (Eq. 4 alone):
    backbone + the HNLM's top level + micro-models. The HNLM's neural within-class softmax
    is needed by neither and is not computed.
    """
    t0 = time.perf_counter()
    score_parts(model, split, ("nnlm",), **kwargs)
    t_nnlm = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores = score_nslm(model, split, micro, with_hnlm=False, **kwargs)
    scores.ensemble(lam)
    t_nslm = time.perf_counter() - t0
    t0 = time.perf_counter()
    top = score_parts(model, split, ("top",), **kwargs)["top"]
    nslm_log_probs(top, split.class_ids, micro_log_probs(micro, split))
    t_pure = time.perf_counter() - t0
    return {
        "nnlm_seconds": t_nnlm,
        "nslm_seconds": t_nslm,
        "nslm_pure_seconds": t_pure,
        "ratio": t_nslm / t_nnlm,
        "ratio_pure": t_pure / t_nnlm,
    }
