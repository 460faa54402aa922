"""One backbone, several heads: the multi-task language model that ``nslm train`` fits."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from nslm.config import TrainConfig
from nslm.models.heads import HNLMHead, HNLMLayout, NNLMHead


def build_backbone(cfg: TrainConfig, vocab_size: int) -> nn.Module:
    if cfg.model == "lstm":
        from nslm.models.lstm import LSTMBackbone

        return LSTMBackbone(
            vocab_size, cfg.emb_size, cfg.hidden_size, cfg.num_layers, cfg.dropout,
            locked=cfg.locked_dropout, grounded=cfg.grounded,
        )  # fmt: skip
    if cfg.model == "awd":
        from nslm.models.awd import AWDBackbone

        return AWDBackbone(vocab_size, cfg)
    if cfg.model == "fixed-window":
        from nslm.models.fixed_window import FixedWindowBackbone

        return FixedWindowBackbone(
            vocab_size, cfg.emb_size, cfg.hidden_size, cfg.context, cfg.dropout
        )
    from nslm.models.transformer import TransformerBackbone

    return TransformerBackbone(vocab_size, cfg)


class LanguageModel(nn.Module):
    """A backbone with an NNLM head (Eq. 2) and/or an HNLM head (Eq. 3), trained together.

    ``forward`` computes the multi-task training loss so that DistributedDataParallel sees
    every parameter used in one call: loss = mean NLL(NNLM) + hnlm_weight · mean NLL(HNLM).
    """

    def __init__(self, cfg: TrainConfig, vocab_size: int, layout: HNLMLayout | None) -> None:
        super().__init__()
        self.head_names = list(cfg.heads)
        self.backbone = build_backbone(cfg, vocab_size)
        dim = self.backbone.out_dim
        heads: dict[str, nn.Module] = {}
        for name in self.head_names:
            if name == "nnlm":
                heads[name] = NNLMHead(dim, vocab_size, cfg.softmax, cfg.cutoffs, cfg.div_value)
            else:
                if layout is None:
                    raise ValueError("the HNLM head needs an HNLMLayout")
                heads[name] = HNLMHead(dim, layout, cfg.softmax, cfg.cutoffs, cfg.div_value)
        self.heads = nn.ModuleDict(heads)
        self.weights = {"nnlm": 1.0, "hnlm": cfg.hnlm_weight}
        tie = getattr(self.backbone, "tie_target", None)
        if cfg.tie_weights and "nnlm" in heads and tie is not None:
            softmax = heads["nnlm"].softmax
            if softmax.kind != "full":
                raise ValueError("tie_weights needs softmax = 'full'")
            softmax.linear.weight = tie.weight

    def features(self, x: Tensor, state: Any = None) -> tuple[Tensor, Any]:
        """Backbone features (T, B, D) for inputs x (T, B), and the state to carry on."""
        return self.backbone(x, state)

    def forward(
        self, x: Tensor, y: Tensor, classes: Tensor, mask: Tensor, state: Any = None
    ) -> tuple[Tensor, Tensor, Any]:
        """Training step: (loss, per-head [sum NLL, count] as a (H, 2) tensor, new state)."""
        h, state = self.features(x, state)
        flat = mask.reshape(-1)
        hv = h.reshape(-1, h.shape[-1])[flat]
        yv = y.reshape(-1)[flat]
        cv = classes.reshape(-1)[flat]
        loss = h.new_zeros((), dtype=torch.float32)
        stats = []
        count = max(int(flat.sum()), 1)
        for name in self.head_names:
            nll = self.heads[name].nll(hv, yv, cv)
            total = nll.sum()
            loss = loss + self.weights[name] * total / count
            stats.append(torch.stack([total.detach(), torch.tensor(float(len(yv)))]))
        return loss, torch.stack(stats), state
