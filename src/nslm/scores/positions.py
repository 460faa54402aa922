"""The evaluation API: exact, normalised per-position log-probabilities for every head.

This is what the evaluator (:mod:`nslm.evaluation.perplexity`) and the micro-models consume.
Every array is float64, aligned with ``split.token_ids``; entry t is the natural log of the
probability the model gives the token actually at t given w_<t, and NaN where unscored
(position 0, and positions beyond ``max_tokens`` when a prefix is scored).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nslm.batches.streams import make_streams
from nslm.models.lm import LanguageModel


@dataclass
class PositionScores:
    """Per-position log-probabilities of one split (None for a head the model lacks).

    * ``nnlm`` — log P_NNLM(w_t | w_<t)  (Eq. 2)
    * ``hnlm`` — log P_HNLM(w_t | w_<t) = log P(c_t | h) + log P_C(w_t | c_t, h)  (Eq. 3)
      at class positions, log P_top(w_t | h) at word positions
    * ``class_log_prob`` — log P(c_t | h), the HNLM's top-level probability of the target's
      class tag at class positions and of the word itself at word positions; the NSLM
      (Eq. 4) multiplies it by the micro-model's P_MM(w_t | c_t).
    """

    nnlm: np.ndarray | None
    hnlm: np.ndarray | None
    class_log_prob: np.ndarray | None

    def perplexity(self, head: str) -> float:
        values = getattr(self, head)
        return float(math.exp(-np.nanmean(values)))


@torch.no_grad()
def score_arrays(
    model: LanguageModel,
    token_ids: np.ndarray,
    class_ids: np.ndarray,
    article_ids: np.ndarray,
    *,
    batch_size: int = 16,
    bptt: int = 70,
    max_tokens: int = 0,
    bf16: bool = False,
) -> PositionScores:
    """Score a token stream with every head of ``model`` (see :class:`PositionScores`).

    The stream is cut into ``batch_size`` parallel streams at article starts, as in
    training; a stream's first target is predicted from the token before it with a fresh
    state, every later one from the whole stream so far.
    """
    n = len(token_ids)
    used = n if max_tokens <= 0 else min(n, max_tokens)
    batch_size = max(1, min(batch_size, used // 2))
    streams = make_streams(
        token_ids[:used], class_ids[:used].astype(np.int64), article_ids[:used], batch_size
    )
    out = {name: np.full(n, np.nan) for name in ("nnlm", "hnlm", "class_log_prob")}
    was_training = model.training
    model.eval()
    state = None
    try:
        for _, (x, y, c, pos) in streams.batches(bptt):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                h, state = model.features(torch.from_numpy(x), state)
            keep = pos.reshape(-1) >= 0
            hv = h.reshape(-1, h.shape[-1])[torch.from_numpy(keep)].float()
            yv = torch.from_numpy(y.reshape(-1)[keep])
            cv = torch.from_numpy(c.reshape(-1)[keep])
            where = pos.reshape(-1)[keep]
            parts = tuple(model.heads) + (("top",) if "hnlm" in model.heads else ())
            for name, lp in model.target_log_probs(hv, yv, cv, parts).items():
                out["class_log_prob" if name == "top" else name][where] = lp.double().numpy()
    finally:
        model.train(was_training)
    has = set(model.heads)
    return PositionScores(
        nnlm=out["nnlm"] if "nnlm" in has else None,
        hnlm=out["hnlm"] if "hnlm" in has else None,
        class_log_prob=out["class_log_prob"] if "hnlm" in has else None,
    )


def score_split(model: LanguageModel, split, **kwargs) -> PositionScores:
    """:func:`score_arrays` on a :class:`~nslm.data.Split` (the micro-model entry point)."""
    return score_arrays(model, split.token_ids, split.class_ids, split.article_ids, **kwargs)


@torch.no_grad()
def next_token_log_probs(model: LanguageModel, history: Sequence[int]) -> dict[str, np.ndarray]:
    """Full next-token distributions after ``history`` (type ids), for ``predict``.

    Returns ``{head: log P(w | history) for every type w}`` (each sums to 1 in probability
    space) and, with an HNLM head, ``"hnlm_classes"``: log P(tag c | history) for every
    class c (NaN for c = 0 and for classes without a vocabulary).
    """
    if len(history) == 0:
        raise ValueError("next_token_log_probs needs at least one history token")
    was_training = model.training
    model.eval()
    try:
        x = torch.as_tensor(list(history), dtype=torch.long).unsqueeze(1)
        h, _ = model.features(x, None)
        last = h[-1].float()
        result = {
            name: head.log_dist(last)[0].double().numpy() for name, head in model.heads.items()
        }
        if "hnlm" in model.heads:
            head = model.heads["hnlm"]
            top = head.top.log_prob(last)[0].double().numpy()
            tags = head.layout.top_of_tag
            result["hnlm_classes"] = np.where(tags >= 0, top[np.maximum(tags, 0)], np.nan)
    finally:
        model.train(was_training)
    return result
