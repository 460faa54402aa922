"""A split's scores: per-position log-probabilities of every part of the scoring pass
(:class:`~nslm.scores.passes.Scorer`), and the figures and table columns read from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from nslm.perplexity import accuracy, bits_per_token, perplexity
from nslm.scores.mixture import ensemble_log_probs


@dataclass
class SplitScores:
    """Per-position log-probabilities of one split (None: not asked, or not in this run).

    * ``nnlm`` — log P_NNLM(w_t | h) (Eq. 2)
    * ``hnlm`` — log P_HNLM(w_t | h) (Eq. 3); None for a single-task run
    * ``top`` — log P(c_t | h) at class positions, the word's top-level score at words
    * ``class_mass`` — log Σ_c P(c | h): how likely any class token is next (an HNLM with
      a shared top level; NSLM-best's history buckets)
    * ``neural`` — a class position's score when its class has no micro-model
    * ``micro`` — log P_MM(w_t | c_t, w_prev) at covered class positions, NaN elsewhere
    * ``pure`` — the NSLM, Eq. 4: ``top`` + ``micro`` (``neural`` where uncovered)
    * ``features`` — (N, D) float32 backbone states, row t the one that predicted w_t
    * ``numeral`` — log P(w_t | h) of a numeral model (Spithourakis & Riedel 2018), the
      numeral vocabulary's <unk_num> a token of its own
    * ``correct`` — 1.0 where the NNLM's most probable next token is w_t, else 0.0 (NaN
      where unscored): next-token accuracy, asked with ``Scorer(accuracy=True)``
    """

    nnlm: np.ndarray | None = None
    hnlm: np.ndarray | None = None
    top: np.ndarray | None = None
    class_mass: np.ndarray | None = None
    neural: np.ndarray | None = None
    micro: np.ndarray | None = None
    pure: np.ndarray | None = None
    features: Tensor | None = None
    correct: np.ndarray | None = None
    numeral: np.ndarray | None = None  # a numeral model's own head (numerals/model.py)

    def perplexity(self, part: str) -> float:
        return perplexity(getattr(self, part))

    def head_figures(self, heads: Sequence[str]) -> dict[str, float]:
        """``ppl_<head>`` for each head and, when accuracy was read (byte LMs),
        ``bits_per_byte`` and ``accuracy`` of the NNLM head: what eval.json and
        results.json report of a split."""
        out = {f"ppl_{h}": self.perplexity(h) for h in heads}
        if self.correct is not None:
            out["bits_per_byte"] = bits_per_token(self.nnlm)
            out["accuracy"] = accuracy(self.correct)
        return out

    def ensemble(self, lam: float) -> np.ndarray:
        """The reported NSLM: λ·P_NNLM + (1 − λ)·P_NSLM (the paper's ensemble)."""
        return ensemble_log_probs(self.nnlm, self.pure, lam)

    def columns(self, lam: float) -> dict[str, np.ndarray]:
        """The run's own table columns: NNLM, HNLM (if any), NSLM (λ-ensemble), NSLM-pure."""
        cols = {"NNLM": self.nnlm}
        if self.hnlm is not None:
            cols["HNLM"] = self.hnlm
        cols["NSLM"] = self.ensemble(lam)
        cols["NSLM-pure"] = self.pure
        return cols
