"""One backbone pass per split, shared by the run's own columns, the cache and the CRNN.

``nslm eval RUN --cache --crnn`` needs, besides the heads' scores, the backbone's hidden
states (the neural cache's keys and queries) and the HNLM's top level (the CRNN's P(c | h)).
Running the backbone once per extra would double the evaluation's cost; this pass computes
all of them in the stream layout of :func:`nslm.scores.passes.feature_batches`, so
the scores are exactly :func:`~nslm.scores.passes.score_nslm`'s.

A single-task run (no HNLM head, paper Table 8) keeps its own scorer, which also gives
P(c | h); the hidden states then take a second, backbone-only pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from nslm.data.corpus import Split
from nslm.micro.model import MicroModel
from nslm.micro.pipeline import micro_log_probs
from nslm.runs.load import LoadedRun
from nslm.scores.mixture import nslm_log_probs
from nslm.scores.passes import NSLMScores, feature_batches, score_nslm


@dataclass
class SplitPass:
    """Per-position outputs of one split (NaN = unscored, i.e. position 0)."""

    nnlm: np.ndarray  # log P_NNLM(w_t | h) (Eq. 2)
    hnlm: np.ndarray | None  # log P_HNLM(w_t | h) (Eq. 3); None for a single-task run
    top: np.ndarray  # log P(c_t | h) at class positions, log P_top(w_t | h) at words
    features: torch.Tensor | None  # (N, D) float32: row t is the state that predicted w_t


class SharedPass:
    """Memoised :class:`SplitPass` per split (by name and length: ``--max-tokens`` prefixes)."""

    def __init__(self, loaded: LoadedRun, *, keep_features: bool = False) -> None:
        self.loaded = loaded
        self.keep_features = keep_features
        self._memo: dict[tuple[str, int], SplitPass] = {}
        self._single: dict[tuple[str, int], NSLMScores] = {}  # single-task runs' own scores

    @torch.no_grad()
    def get(self, name: str, split: Split) -> SplitPass:
        key = (name, len(split))
        if key not in self._memo:
            self._memo[key] = self._run(name, split)
        return self._memo[key]

    def _run(self, name: str, split: Split) -> SplitPass:
        model, cfg = self.loaded.model, self.loaded.cfg
        kw = {"batch_size": cfg.eval_batch_size, "bptt": cfg.bptt}
        if "hnlm" not in model.heads:  # single-task: P(c | h) from the NNLM (Table 8)
            got = self._single.get((name, len(split))) or score_nslm(model, split, {}, **kw)
            feats = None
            if self.keep_features:
                feats = torch.zeros(len(split), model.backbone.out_dim)
                for hv, _, _, where in feature_batches(model, split, **kw):
                    feats[torch.from_numpy(where)] = hv
            return SplitPass(got.nnlm, None, got.top, feats)
        n = len(split)
        out = {p: np.full(n, np.nan) for p in ("nnlm", "hnlm", "top")}
        feats = torch.zeros(n, model.backbone.out_dim) if self.keep_features else None
        batches = feature_batches(model, split, **kw)
        for hv, yv, cv, where in batches:
            for part, lp in model.target_log_probs(hv, yv, cv).items():
                out[part][where] = lp.double().numpy()
            if feats is not None:
                feats[torch.from_numpy(where)] = hv
        return SplitPass(out["nnlm"], out["hnlm"], out["top"], feats)

    def nslm_scores(self, name: str, split: Split, micro: dict[str, MicroModel]) -> NSLMScores:
        """What :func:`~nslm.scores.passes.score_nslm` returns, from the shared pass."""
        if "hnlm" not in self.loaded.model.heads:
            cfg = self.loaded.cfg
            scores = score_nslm(
                self.loaded.model, split, micro, batch_size=cfg.eval_batch_size, bptt=cfg.bptt
            )
            self._single[(name, len(split))] = scores
            return scores
        got = self.get(name, split)
        mm = micro_log_probs(micro, split)
        pure = nslm_log_probs(got.top, split.class_ids, mm, got.hnlm)
        return NSLMScores(got.nnlm, got.hnlm, got.top, mm, pure)
