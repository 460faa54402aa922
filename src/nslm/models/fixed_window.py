"""The fixed-window neural LM backbone (Bengio, Ducharme, Vincent & Jauvin 2003, "A Neural
Probabilistic Language Model", JMLR 3):

    e = [E x_{t-n+2}; …; E x_t]        concatenated embeddings of the previous n−1 words
    h = tanh(W e + b1)                  hidden layer
    ŷ = softmax(U h + b2)               the output layer is the shared NNLM/HNLM head

It has the same interface as the LSTM backbone, so the same training loop (stateful TBPTT)
and the same heads and evaluator serve it. Its "state" is the last n−2 input ids of the
previous window, so a window's first positions still see n−1 words of history; positions
before the start of a stream see a padding id whose embedding is fixed at zero. (Bengio et
al.'s optional direct embedding-to-output connections are left out.)
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

State = tuple[Tensor] | None


class FixedWindowBackbone(nn.Module):
    """Features (T, B, hidden) for input ids (T, B), each from the last ``context`` ids."""

    def __init__(
        self, vocab_size: int, emb_size: int, hidden_size: int, context: int, dropout: float
    ) -> None:
        super().__init__()
        if context < 1:
            raise ValueError("the window needs at least one word of context")
        self.context = context
        self.pad = vocab_size  # the id of "nothing before the stream start"
        self.embed = nn.Embedding(vocab_size + 1, emb_size, padding_idx=self.pad)
        self.drop = nn.Dropout(dropout)
        self.hidden = nn.Linear(context * emb_size, hidden_size)
        self.out_dim = hidden_size
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        with torch.no_grad():
            self.embed.weight[self.pad].zero_()

    def forward(self, x: Tensor, state: State = None) -> tuple[Tensor, State]:
        steps, batch = x.shape
        keep = self.context - 1
        full = x
        if keep:
            # the previous window's last ids, or padding at the start of a stream
            before = x.new_full((keep, batch), self.pad) if state is None else state[0]
            full = torch.cat([before.to(x.dtype), x], dim=0)  # (keep + T, B)
        # windows[t, b] = full[t : t + context, b]: the ids x_{t-n+2} … x_t
        windows = full.unfold(0, self.context, 1)  # (T, B, context)
        e = self.embed(windows).reshape(steps, batch, -1)
        h = torch.tanh(self.hidden(self.drop(e)))
        new_state = (full[-keep:].detach().clone(),) if keep else None
        return self.drop(h), new_state
