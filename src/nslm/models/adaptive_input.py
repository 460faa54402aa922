"""Input embeddings tied to the output softmax (Press & Wolf 2017; Inan et al. 2017).

With a full softmax the input table *is* the output matrix (V × D). With an adaptive softmax
(Grave et al. 2017) the input side becomes an adaptive input (Baevski & Auli 2019) built from
the softmax's own tensors, so nothing is duplicated:

* a shortlist word w (the softmax head's first ``shortlist`` outputs) reads row w of the
  head's weight, a D-vector;
* a word of tail cluster k reads row (w − lo_k) of the cluster's output matrix, a
  D / div^(k+1)-vector, mapped back to D by the cluster's input projection, transposed:
  e(w) = O_k[w − lo_k] · P_k, where the tail computes logits O_k · (P_k · h).

Rare words get fewer dimensions, as in Baevski & Auli's adaptive input; the input and output
sides share every tensor, so a gradient from either reaches both. The softmax stays an exact
distribution: it is the same ``nn.AdaptiveLogSoftmaxWithLoss``, only its weights are shared.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nslm.models.grounding import GroundedEmbedding
from nslm.models.softmax import SoftmaxLayer


class TiedInput(nn.Module):
    """Token ids (any shape) → embeddings (…, D) read from the output ``softmax``'s weights.

    ``weight`` is the full softmax's matrix, or the adaptive head's weight; the softmax is a
    registered submodule, so the shared tensors are saved once (:func:`nslm.runs.files.
    model_tensors` drops the second name).
    """

    def __init__(self, softmax: SoftmaxLayer) -> None:
        super().__init__()
        self.softmax = softmax
        if softmax.kind == "adaptive":
            a = softmax.adaptive
            self.shortlist = a.shortlist_size
            self.bounds = list(zip(a.cutoffs[:-1], a.cutoffs[1:], strict=True))
            self.dim = a.in_features
        else:
            self.shortlist, self.bounds = softmax.n_out, []
            self.dim = softmax.linear.in_features

    @property
    def weight(self) -> Tensor:
        """The shortlist's (or the whole vocabulary's) D-dimensional rows."""
        if self.softmax.kind == "adaptive":
            return self.softmax.adaptive.head.weight
        return self.softmax.linear.weight

    def forward(self, x: Tensor) -> Tensor:
        if not self.bounds:
            return F.embedding(x, self.weight)
        flat = x.reshape(-1)
        out = torch.empty(len(flat), self.dim, dtype=self.weight.dtype, device=x.device)
        head = flat < self.shortlist
        out[head] = F.embedding(flat[head], self.weight)
        for k, (lo, hi) in enumerate(self.bounds):
            inside = (flat >= lo) & (flat < hi)
            if not inside.any():
                continue
            project, output = self.softmax.adaptive.tail[k]  # Linear(D, d_k), Linear(d_k, |k|)
            rows = F.embedding(flat[inside] - lo, output.weight) @ project.weight
            out[inside] = rows.to(out.dtype)  # a bf16 product under autocast
        return out.reshape(*x.shape, self.dim)


def tie_input_to_output(backbone: nn.Module, softmax: SoftmaxLayer) -> None:
    """Replace ``backbone.embed`` by a :class:`TiedInput` on ``softmax``.

    A grounded embedding keeps its fixed dimensions: only its trainable part becomes the
    tied input (paper Table 6 grounding on a tied model). The learnt width must be the
    softmax's input width (emb_size = hidden_size for an LSTM, checked by the config).
    """
    tied = TiedInput(softmax)
    grounded = isinstance(backbone.embed, GroundedEmbedding)
    learnt = backbone.embed.trainable if grounded else backbone.embed
    if learnt.embedding_dim != tied.dim:
        raise ValueError(f"tied embeddings need emb_size = {tied.dim} (the softmax's input)")
    if grounded:
        backbone.embed.trainable = tied
    else:
        backbone.embed = tied
