"""The stacked-LSTM backbone: embeddings → dropout → LSTM layers → dropout."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nslm.models.grounding import input_width, make_embedding

State = tuple[Tensor, Tensor] | None


def locked_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout with one mask per sequence, shared over time steps (Gal & Ghahramani 2016).

    x is (T, B, D); the mask is (1, B, D). Besides regularising recurrent nets well, it draws
    T times fewer random numbers than ordinary dropout, a visible cost on CPU.
    """
    if not training or p == 0.0:
        return x
    mask = torch.empty(1, x.shape[1], x.shape[2], dtype=x.dtype).bernoulli_(1 - p)
    return x * mask.div_(1 - p)


class LSTMBackbone(nn.Module):
    """A stacked LSTM over (T, B) token ids, returning features (T, B, hidden) and its state.

    The state is carried from one TBPTT window to the next by the training loop, which
    detaches it; ``state=None`` starts from zeros. With ``locked=True`` the layers run one
    by one with locked dropout between them; otherwise one cuDNN/oneDNN call runs them all
    with ordinary dropout.
    """

    def __init__(
        self,
        vocab_size: int,
        emb_size: int,
        hidden_size: int,
        num_layers: int,
        dropout: float,
        locked: bool = False,
        grounded: bool = False,
        sparse_embedding: bool = False,
    ) -> None:
        super().__init__()
        # grounded: fixed value/coordinate dimensions after the learnt ones (paper Table 6)
        self.embed = make_embedding(vocab_size, emb_size, grounded, sparse_embedding)
        emb_size = input_width(emb_size, grounded)
        self.p = dropout
        self.locked = locked
        self.drop = nn.Dropout(dropout)
        if locked:
            sizes = [emb_size] + [hidden_size] * num_layers
            self.layers = nn.ModuleList(nn.LSTM(sizes[i], sizes[i + 1]) for i in range(num_layers))
        else:
            self.lstm = nn.LSTM(
                emb_size, hidden_size, num_layers, dropout=dropout if num_layers > 1 else 0.0
            )
        self.out_dim = hidden_size
        # Small uniform embedding init, as in the classic Zaremba et al. recipe.
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    def forward(self, x: Tensor, state: State = None) -> tuple[Tensor, State]:
        if not self.locked:
            out, state = self.lstm(self.drop(self.embed(x)), state)
            return self.drop(out), state
        out = locked_dropout(self.embed(x), self.p, self.training)
        hs, cs = [], []
        for i, layer in enumerate(self.layers):
            prev = None if state is None else (state[0][i : i + 1], state[1][i : i + 1])
            out, (h, c) = layer(out, prev)
            out = locked_dropout(out, self.p, self.training)
            hs.append(h)
            cs.append(c)
        return out, (torch.cat(hs), torch.cat(cs))
