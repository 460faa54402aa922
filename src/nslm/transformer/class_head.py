"""P(c | h): which class, if any, the next word belongs to, read from the Transformer's
hidden state.

A linear softmax over "none" and the corpus's classes, on the frozen Transformer's final
hidden state at every token position: the label of position i is the class of the corpus
token whose first Transformer token is x_i, "none" where no class token starts. This is
the class factor of the NSLM (Demeter & Downey 2020, Eq. 4: P(c | w_<t)), with the
Transformer in place of the LSTM's top-level softmax; it is fitted by cross-entropy with
Adam on a prefix of WikiText-2 train (the size is in RUN/transformer.json).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def position_labels(n_tokens: int, ranges: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """(N,) label per Transformer position: 0 (none) or the class id (1…) of the corpus
    token that starts there. ``ranges`` (T, 2) and ``classes`` (T,) per corpus token."""
    labels = np.zeros(n_tokens, dtype=np.int64)
    spelt = (ranges[:, 0] >= 0) & (classes > 0)
    labels[ranges[spelt, 0]] = classes[spelt]
    return labels


class ClassHead:
    """A linear softmax W·h + b over {none} ∪ classes (numpy at use, torch to fit)."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, names: Sequence[str]) -> None:
        self.weight = np.asarray(weight, dtype=np.float32)  # (C + 1, D)
        self.bias = np.asarray(bias, dtype=np.float32)  # (C + 1,)
        self.names = tuple(names)  # the classes, without "none"

    def log_probs(self, hidden: np.ndarray, chunk: int = 65536) -> np.ndarray:
        """(N, C + 1) log P(none | h), log P(c | h) for each class, float64."""
        out = np.empty((len(hidden), len(self.bias)), dtype=np.float64)
        for a in range(0, len(hidden), chunk):
            logits = hidden[a : a + chunk].astype(np.float32) @ self.weight.T + self.bias
            logits = logits.astype(np.float64)
            logits -= logits.max(axis=1, keepdims=True)
            out[a : a + chunk] = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return out

    @classmethod
    def fit(
        cls,
        hidden: np.ndarray,
        labels: np.ndarray,
        names: Sequence[str],
        *,
        epochs: int = 300,
        lr: float = 0.01,
        weight_decay: float = 1e-3,
        seed: int = 0,
    ) -> ClassHead:
        """Full-batch Adam on the cross-entropy of ``labels`` (0 none, 1… the classes)."""
        import torch

        torch.manual_seed(seed)
        x = torch.as_tensor(np.asarray(hidden, dtype=np.float32))
        y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
        layer = torch.nn.Linear(x.shape[1], len(names) + 1)
        with torch.no_grad():  # start at the label frequencies: the bias is the log prior
            counts = torch.bincount(y, minlength=len(names) + 1).double() + 1.0
            layer.weight.zero_()
            layer.bias.copy_((counts / counts.sum()).log().float())
        optimiser = torch.optim.Adam(layer.parameters(), lr=lr, weight_decay=weight_decay)
        for _ in range(epochs):
            optimiser.zero_grad()
            loss = torch.nn.functional.cross_entropy(layer(x), y)
            loss.backward()
            optimiser.step()
        return cls(layer.weight.detach().numpy(), layer.bias.detach().numpy(), names)

    def tensors(self) -> dict[str, Any]:
        import torch

        return {"weight": torch.from_numpy(self.weight), "bias": torch.from_numpy(self.bias)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any], names: Sequence[str]) -> ClassHead:
        return cls(tensors["weight"].numpy(), tensors["bias"].numpy(), names)
