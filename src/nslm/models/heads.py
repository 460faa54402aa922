"""Output heads on one backbone: the flat NNLM softmax (Eq. 2) and the hierarchical HNLM (Eq. 3).

Both heads expose the same three operations on backbone features ``h`` of shape (N, H):

* ``nll(h, targets, classes)`` — per-position negative log-probability, used for training;
* ``target_log_prob(h, targets, classes)`` — the exact, normalised log-probability of each
  target (what the evaluator consumes);
* ``log_dist(h)`` — the full log-distribution over the vocabulary, shape (N, V).

Both are built of :class:`~nslm.models.softmax.SoftmaxLayer`, full or adaptive (Grave et al.
2017): one module serves fast training and exact evaluation.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nslm.models.hnlm_layout import HNLMLayout
from nslm.models.shared_top import SharedTopLevel
from nslm.models.softmax import SoftmaxLayer


class NNLMHead(nn.Module):
    """Eq. 2: P(w_t | w_<t) = softmax over the whole vocabulary V_W."""

    def __init__(self, in_dim: int, vocab_size: int, kind: str, cutoffs: list[int], div: float):
        super().__init__()
        self.softmax = SoftmaxLayer(in_dim, vocab_size, kind, cutoffs, div)

    def nll(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.softmax.nll(h, targets)

    def target_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return -self.softmax.nll(h, targets)

    def top_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.target_log_prob(h, targets, classes)

    def log_dist(self, h: Tensor) -> Tensor:
        return self.softmax.log_prob(h)


class HNLMHead(nn.Module):
    """Eq. 3: P(w_t) = P(c | h) · P_C(w_t | c, h), and P(w_t | h) directly for plain words.

    The class of a position is given by the annotation (``classes``), not by the word's type:
    a number type may belong to several V_c. The score of a class position is therefore the
    probability of the (class, word) pair; :meth:`log_dist` marginalises over classes so the
    distribution over word types sums to 1.
    """

    def __init__(
        self,
        in_dim: int,
        layout: HNLMLayout,
        kind: str,
        cutoffs: list[int],
        div: float,
        words: SoftmaxLayer | None = None,
    ) -> None:
        super().__init__()
        self.layout = layout
        # ``words``: the NNLM's output layer, shared by the top level (hnlm_top = "shared")
        self.shared = words is not None
        if words is not None:
            self.top: nn.Module = SharedTopLevel(in_dim, words, layout)
        else:
            self.top = SoftmaxLayer(in_dim, layout.n_top, kind, cutoffs, div)
        union = np.unique(np.concatenate([np.zeros(0, np.int64), *layout.members]))
        n_union = max(len(union), 1)
        # One output row per class type; class c's softmax uses only the rows of V_c.
        self.within = nn.Linear(in_dim, n_union)
        self.register_buffer("top_of_word", torch.as_tensor(layout.top_of_word), persistent=False)
        self.register_buffer("top_of_tag", torch.as_tensor(layout.top_of_tag), persistent=False)
        rows = [
            torch.as_tensor(np.searchsorted(union, m), dtype=torch.long) for m in layout.members
        ]
        self._rows = rows  # union-row index of each member of V_c
        # position of type w inside V_c, or −1: a (C, V) table (small: C ≈ 11)
        inside = np.full((layout.n_classes, layout.vocab_size), -1, dtype=np.int64)
        for c, m in enumerate(layout.members):
            inside[c, m] = np.arange(len(m))
        self.register_buffer("inside", torch.as_tensor(inside), persistent=False)

    def _top_targets(self, targets: Tensor, classes: Tensor) -> Tensor:
        return torch.where(classes > 0, self.top_of_tag[classes], self.top_of_word[targets])

    def within_log_dist(self, h: Tensor, cls: int) -> Tensor:
        """log P_C(w | c, h) over every w of V_c, in V_c's order: (N, |V_c|) (Eq. 3)."""
        rows = self._rows[cls]
        logits = F.linear(h, self.within.weight[rows], self.within.bias[rows]).float()
        return F.log_softmax(logits, dim=-1)

    def within_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        """log P_C(w | c, h) at class positions (0 at word positions)."""
        out = torch.zeros(h.shape[0], dtype=torch.float32, device=h.device)
        for c in torch.unique(classes[classes > 0]).tolist():
            idx = torch.nonzero(classes == c).squeeze(1)
            rows = self._rows[c]
            logits = F.linear(h[idx], self.within.weight[rows], self.within.bias[rows]).float()
            logp = F.log_softmax(logits, dim=-1)
            where = self.inside[c, targets[idx]]
            picked = logp.gather(1, where.clamp(min=0).unsqueeze(1)).squeeze(1)
            out[idx] = torch.where(where >= 0, picked, torch.full_like(picked, -torch.inf))
        return out

    def top_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        """log P(c | h) at class positions, log P_top(w | h) at word positions."""
        if self.shared:
            return self.top.joint(h, targets, classes)[1]
        top = self._top_targets(targets, classes)
        valid = top >= 0
        lp = -self.top.nll(h, top.clamp(min=0))
        return torch.where(valid, lp, torch.full_like(lp, -torch.inf))

    def target_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.top_log_prob(h, targets, classes) + self.within_log_prob(h, targets, classes)

    def nll(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return -self.target_log_prob(h, targets, classes)

    def log_dist(self, h: Tensor) -> Tensor:
        """The HNLM's distribution over word types, marginalised over classes: (N, V)."""
        top = self.top.log_prob(h)
        n = h.shape[0]
        out = torch.full((n, self.layout.vocab_size), -torch.inf, device=h.device)
        words = torch.nonzero(self.top_of_word >= 0).squeeze(1)
        out[:, words] = top[:, self.top_of_word[words]]
        for c, members in enumerate(self.layout.members):
            tag = int(self.layout.top_of_tag[c])
            if c == 0 or tag < 0:
                continue
            rows = self._rows[c]
            logits = F.linear(h, self.within.weight[rows], self.within.bias[rows]).float()
            joint = top[:, tag : tag + 1] + F.log_softmax(logits, dim=-1)
            m = torch.as_tensor(members, device=h.device)
            out[:, m] = torch.logaddexp(out[:, m], joint)
        return out
