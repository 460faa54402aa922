"""The softmax layer every output head is built of: full, or adaptive (Grave et al. 2017).

An adaptive softmax is itself a normalised distribution over all its outputs, so the same
module serves fast training and exact evaluation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SoftmaxLayer(nn.Module):
    """A softmax over ``n_out`` outputs: full, or adaptive with frequency-ordered clusters."""

    def __init__(
        self,
        in_dim: int,
        n_out: int,
        kind: str = "full",
        cutoffs: list[int] | None = None,
        div_value: float = 4.0,
    ) -> None:
        super().__init__()
        # Cutoffs beyond the output size make no cluster; drop them (tiny test vocabularies).
        usable = [c for c in (cutoffs or []) if 0 < c < n_out - 1]
        self.kind = kind if usable else "full"
        self.n_out = n_out
        if self.kind == "adaptive":
            # The last tail cluster projects to in_dim / div^k dimensions; keep that ≥ 1.
            while div_value > 1.0 and in_dim // div_value ** len(usable) < 1:
                div_value = max(1.0, div_value / 2)
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(
                in_dim, n_out, cutoffs=usable, div_value=div_value
            )
        else:
            self.linear = nn.Linear(in_dim, n_out)

    # PyTorch's adaptive softmax mixes the dtypes of its clusters under bf16 autocast
    # (index_copy_ of bf16 into float32), so it runs in float32 whatever the caller's
    # autocast; the shared top level (shared_top.py) reads its logits itself and keeps bf16.

    def nll(self, h: Tensor, targets: Tensor) -> Tensor:
        """−log P(target | h) per row; exact for both kinds."""
        if self.kind == "adaptive":
            with torch.autocast(h.device.type, enabled=False):
                return -self.adaptive(h.float(), targets).output
        return F.cross_entropy(self.linear(h).float(), targets, reduction="none")

    def log_prob(self, h: Tensor) -> Tensor:
        """log P(k | h) for every output k: shape (N, n_out), rows sum to 1 in prob space."""
        if self.kind == "adaptive":
            with torch.autocast(h.device.type, enabled=False):
                return self.adaptive.log_prob(h.float())
        return F.log_softmax(self.linear(h).float(), dim=-1)
