"""The stacked-LSTM backbone: embeddings → dropout → LSTM layers → dropout."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
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


@torch.no_grad()
def lstm_state_chunks(
    backbone: LSTMBackbone, x: Tensor, chunk: int = 256
) -> Iterator[tuple[int, Tensor, Tensor]]:
    """Hidden and cell states of every step of a one-layer LSTM backbone, from zero state.

    Yields ``(t0, h, c)`` for steps ``t0 .. t0 + len(h) − 1`` of the inputs x (T, B), each
    (steps, B, H) float32, ``chunk`` steps at a time so memory stays bounded on long texts.

    ``nn.LSTM`` returns the hidden state h_t of every step but the cell state c_t of the
    last one only. The fused run gives every h_t; with h_{t−1} known, the gates of all the
    chunk's steps are one matrix product, and the cell state is an elementwise recurrence
    (the LSTM equations of Hochreiter & Schmidhuber 1997 in PyTorch's ``nn.LSTM`` layout):

        [i f g o]_t = W_ih x_t + b_ih + W_hh h_{t−1} + b_hh
        c_t = σ(f_t) ⊙ c_{t−1} + σ(i_t) ⊙ tanh(g_t)

    So per-step cell states cost one fused pass, one large matrix product and a cheap loop,
    not T calls of the LSTM; the result equals stepping the LSTM one byte at a time up to
    float rounding (tests/test_byte_states.py).
    """
    lstm = backbone.lstm
    if backbone.locked or lstm.num_layers != 1 or lstm.bidirectional or lstm.proj_size:
        raise ValueError("per-step cell states need a one-layer, unidirectional nn.LSTM")
    hidden = lstm.hidden_size
    h0 = x.new_zeros((1, x.shape[1], hidden), dtype=torch.float32)
    state = (h0, h0.clone())
    for t0 in range(0, x.shape[0], chunk):
        emb = backbone.embed(x[t0 : t0 + chunk]).float()
        out, new_state = lstm(emb, state)
        previous_h = torch.cat([state[0], out[:-1]])
        gates = F.linear(emb, lstm.weight_ih_l0, lstm.bias_ih_l0)
        gates += F.linear(previous_h, lstm.weight_hh_l0, lstm.bias_hh_l0)
        i, f, g, _ = gates.chunk(4, dim=-1)
        update = torch.sigmoid(i) * torch.tanh(g)
        forget = torch.sigmoid(f)
        cells = torch.empty_like(out)
        c = state[1][0]
        for t in range(len(out)):
            c = torch.addcmul(update[t], forget[t], c)
            cells[t] = c
        yield t0, out, cells
        state = new_state
