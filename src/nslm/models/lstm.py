"""The stacked-LSTM backbone: embeddings → dropout → LSTM layers → dropout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import torch
from torch import Tensor, nn

from nslm.models.grounding import input_width, make_embedding

State = tuple[Tensor, Tensor] | None


class StepIntervention(Protocol):
    """A change to a one-layer LSTM at every step of its recurrence (ablating units, clamping
    them, steering the state: the byte LM's interventions), which then runs the steps itself.

    The fused ``nn.LSTM`` hides the cell state between steps, so an intervention computes
    them: ``run_steps(lstm, emb, state)`` runs ``lstm`` over ``emb`` (T, B, E) from
    ``state`` and returns (hidden states (T, B, H), cell states (T, B, H), (h, c) each
    (1, B, H)), float32. An ``empty`` one changes nothing and is never run: the backbone keeps
    its own fused path.
    """

    @property
    def empty(self) -> bool: ...

    def run_steps(
        self, lstm: nn.LSTM, emb: Tensor, state: State
    ) -> tuple[Tensor, Tensor, tuple[Tensor, Tensor]]: ...


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
        # what changes the LSTM at every step (set from outside the model); None: nothing
        self.intervention: StepIntervention | None = None
        # Small uniform embedding init, as in the classic Zaremba et al. recipe.
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)

    def forward(self, x: Tensor, state: State = None) -> tuple[Tensor, State]:
        iv = self.intervention
        if iv is not None and not iv.empty:
            hs, _, state = iv.run_steps(self.lstm, self.drop(self.embed(x)), state)
            return self.drop(hs), state
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

    ``nn.LSTM`` returns the hidden state of every step but the cell state of the last one
    only, so the fused LSTM runs one step at a time over the whole batch and the cell state
    is read after each step: exactly the model's own computation, and the batch dimension
    keeps each step's matrix product large (docs/history.md, "Reading every cell state").
    """
    lstm = backbone.lstm
    if backbone.locked or lstm.num_layers != 1 or lstm.bidirectional or lstm.proj_size:
        raise ValueError("per-step cell states need a one-layer, unidirectional nn.LSTM")
    zeros = torch.zeros(1, x.shape[1], lstm.hidden_size)
    state = (zeros, zeros.clone())
    iv = getattr(backbone, "intervention", None)
    for t0 in range(0, x.shape[0], chunk):
        emb = backbone.embed(x[t0 : t0 + chunk]).float()
        if iv is not None and not iv.empty:  # the model with its units ablated, clamped, …
            hs, cs, state = iv.run_steps(lstm, emb, state)
            yield t0, hs, cs
            continue
        hs = torch.empty(len(emb), x.shape[1], lstm.hidden_size)
        cs = torch.empty_like(hs)
        for t in range(len(emb)):
            _, state = lstm(emb[t : t + 1], state)
            hs[t], cs[t] = state[0][0], state[1][0]
        yield t0, hs, cs
