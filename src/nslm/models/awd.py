"""An AWD-LSTM-style backbone (Merity et al. 2018): weight drop, embedding dropout, locked
dropout and optionally tied input/output embeddings (the paper's Table 8 variant)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from nslm.config import TrainConfig
from nslm.models.grounding import input_width, make_embedding
from nslm.models.lstm import State, locked_dropout


def embedding_dropout(embed: nn.Module, x: Tensor, p: float, training: bool) -> Tensor:
    """Drop whole word types: every occurrence of a dropped type gets a zero vector.

    The mask is drawn per type and applied to the looked-up rows (the same as masking the
    table's rows), so any embedding module works: a grounded one (a type is dropped whole,
    its fixed dimensions included) or one tied to the softmax.
    """
    if not training or p == 0.0:
        return embed(x)
    n_types = int(x.max()) + 1
    keep = torch.empty(n_types, 1, device=x.device).bernoulli_(1 - p) / (1 - p)
    return embed(x) * F.embedding(x, keep)


class AWDBackbone(nn.Module):
    """Stacked single-layer LSTMs with DropConnect on each hidden-to-hidden matrix.

    With ``tie_weights`` the last layer has ``emb_size`` units so the NNLM head's output
    matrix can be the input embedding (``tie_target``).
    """

    def __init__(self, vocab_size: int, cfg: TrainConfig) -> None:
        super().__init__()
        self.embed = make_embedding(vocab_size, cfg.emb_size, cfg.grounded)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        last = cfg.emb_size if cfg.tie_weights else cfg.hidden_size
        first = input_width(cfg.emb_size, cfg.grounded)
        sizes = [first] + [cfg.hidden_size] * (cfg.num_layers - 1) + [last]
        self.layers = nn.ModuleList(nn.LSTM(sizes[i], sizes[i + 1]) for i in range(cfg.num_layers))
        self.p = cfg.dropout
        self.p_embed = cfg.embed_dropout
        self.p_weight = cfg.weight_drop
        self.out_dim = last
        # Tying a full softmax shares the learnt table only (GroundedEmbedding.weight is its
        # trainable part); an adaptive one is tied by LanguageModel (models/adaptive_input.py)
        self.tie_target = self.embed if cfg.tie_weights and cfg.softmax == "full" else None

    def _run_layer(self, layer: nn.LSTM, x: Tensor, prev: State) -> tuple[Tensor, State]:
        if not self.training or self.p_weight == 0.0:
            return layer(x, prev)
        # DropConnect: one mask on W_hh for the whole window, as in AWD-LSTM.
        dropped = F.dropout(layer.weight_hh_l0, self.p_weight, training=True)
        return functional_call(layer, {"weight_hh_l0": dropped}, (x, prev))

    def forward(self, x: Tensor, state: State = None) -> tuple[Tensor, State]:
        out = embedding_dropout(self.embed, x, self.p_embed, self.training)
        out = locked_dropout(out, self.p, self.training)
        hs, cs = [], []
        for i, layer in enumerate(self.layers):
            prev = None if state is None else (state[2 * i], state[2 * i + 1])
            out, (h, c) = self._run_layer(layer, out, prev)
            out = locked_dropout(out, self.p, self.training)
            hs.append(h)
            cs.append(c)
        # Layers may differ in width, so the state is a flat tuple (h0, c0, h1, c1, ...).
        return out, tuple(t for pair in zip(hs, cs, strict=True) for t in pair)
