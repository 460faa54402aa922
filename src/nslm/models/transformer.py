"""A small causal Transformer backbone with a one-window token memory.

The TBPTT "state" of a Transformer is the previous window's tokens: each window attends to
itself and to the window before it (causally), so context reaches up to 2 × bptt tokens
back without attention over the whole history. Longer inputs are processed window by window.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nslm.config import TrainConfig


class TransformerBackbone(nn.Module):
    def __init__(self, vocab_size: int, cfg: TrainConfig) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.window = cfg.bptt
        self.embed = nn.Embedding(vocab_size, d)
        self.pos = nn.Embedding(2 * cfg.bptt, d)
        layer = nn.TransformerEncoderLayer(
            d, cfg.n_heads, cfg.ff_size, cfg.dropout, batch_first=False, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.drop = nn.Dropout(cfg.dropout)
        self.out_dim = d
        self.tie_target = None
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def _window(self, x: Tensor, memory: Tensor | None) -> Tensor:
        inp = x if memory is None else torch.cat([memory, x])
        n = inp.shape[0]
        pos = torch.arange(n, device=x.device)
        h = self.drop(self.embed(inp) + self.pos(pos).unsqueeze(1))
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=x.device)
        h = self.encoder(h, mask=mask, is_causal=True)
        return self.norm(h[n - x.shape[0] :])

    def forward(self, x: Tensor, state: tuple[Tensor, ...] | None = None):
        memory = None if state is None else state[0]
        outs = []
        for start in range(0, x.shape[0], self.window):
            chunk = x[start : start + self.window]
            outs.append(self._window(chunk, memory))
            memory = chunk
        return self.drop(torch.cat(outs)), (memory,)
