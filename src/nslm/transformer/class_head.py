"""P(c | h): which class, if any, the next word belongs to, read from the Transformer's
hidden state.

A linear softmax over "none" and the corpus's classes, on the frozen Transformer's final
hidden state at every token position: the label of position i is the class of the corpus
token whose first Transformer token is x_i, "none" where no class token starts. This is
the class factor of the NSLM (Demeter & Downey 2020, Eq. 4: P(c | w_<t)), with the
Transformer in place of the LSTM's top-level softmax; it is fitted by cross-entropy with
Adam on a prefix of WikiText-2 train (the size is in RUN/transformer.json).

The head may also read what the Transformer itself says about the next word: for each
class c, log P_T(the next token begins a member of V_c | h), the mass its own softmax puts
on the first tokens of V_c's members (:class:`StartMass`). Those K numbers join h as
inputs to the same linear softmax,

    P(c | h) = softmax_c(W·h + A·log m(h) + b),

so the head learns from train how far to trust the Transformer's "a number comes next"
(at "founded in 2046 and dissolved in" its mass on digits is high while a head on h alone
may miss it); whether it does better than the head on h alone is chosen on valid
(:func:`nslm.transformer.fit.fit_head`).
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


MASS_FLOOR = -20.0  # log start masses are clipped here: the head reads their logs linearly


class StartMass:
    """log P_T(the next token is one of ``starts[k]`` | h) for each of K token sets: the
    Transformer's own softmax (its output layer ``output``, (V, D)) on a hidden state, summed
    over the tokens that begin a class's members, clipped below at :data:`MASS_FLOOR`."""

    def __init__(self, output: Any, starts: np.ndarray) -> None:
        import torch

        self.output = torch.as_tensor(output).detach().float()  # (V, D)
        self.starts = np.asarray(starts, dtype=bool)  # (K, V)
        self._columns = torch.as_tensor(self.starts.T.astype(np.float32))  # (V, K)
        self._last: tuple[np.ndarray, np.ndarray] | None = None  # the last text's masses

    @classmethod
    def of(cls, bundle: Any, members: Any, names: Sequence[str]) -> StartMass:
        """The start masses of the classes ``names`` under a loaded Transformer ``bundle``
        (its output layer), their members spelt as ``members`` spells them."""
        size = int(bundle.checkpoint.config["vocab_size"])
        return cls(bundle.model.lm_head.weight, start_token_sets(members, names, size))

    def __call__(self, hidden: np.ndarray, chunk: int = 1024) -> np.ndarray:
        """(N, K) float64 log masses of ``hidden`` (N, D); a text scored again (the same
        array) is not recomputed."""
        import torch

        if self._last is not None and self._last[0] is hidden:
            return self._last[1]
        out = np.empty((len(hidden), self.starts.shape[0]), dtype=np.float64)
        with torch.inference_mode():
            for a in range(0, len(hidden), chunk):
                h = torch.as_tensor(np.asarray(hidden[a : a + chunk], dtype=np.float32))
                probs = (h @ self.output.T).softmax(-1)
                mass = (probs @ self._columns).double().clamp_min(1e-300).log()
                out[a : a + chunk] = mass.clamp_min(MASS_FLOOR).numpy()
        self._last = (hidden, out)
        return out


def start_token_sets(members: Any, names: Sequence[str], vocab_size: int) -> np.ndarray:
    """(K, V) bool: for each class in ``names``, the tokens that begin one of its members,
    spelt with a space before or without (``members``: the run's
    :class:`~nslm.transformer.candidates.Members`)."""
    out = np.zeros((len(names), vocab_size), dtype=bool)
    for k, name in enumerate(names):
        index = members.classes.get(name)
        if index is None:
            continue
        for spelling in (members.spaced, members.bare):
            first = spelling.tokens[index, 0]
            out[k, first[first >= 0]] = True
    return out


class ClassHead:
    """A linear softmax W·h + b over {none} ∪ classes (numpy at use, torch to fit), reading
    the Transformer's start masses beside h where it was fitted with them."""

    def __init__(
        self,
        weight: np.ndarray,
        bias: np.ndarray,
        names: Sequence[str],
        mass_weight: np.ndarray | None = None,
        start_mass: StartMass | None = None,
    ) -> None:
        self.weight = np.ascontiguousarray(weight, dtype=np.float32)  # (C + 1, D)
        self.bias = np.ascontiguousarray(bias, dtype=np.float32)  # (C + 1,)
        self.names = tuple(names)  # the classes, without "none"
        # (C + 1, K): the weight of each of the K log start masses, where the head reads them
        self.mass_weight = (
            None if mass_weight is None else np.ascontiguousarray(mass_weight, np.float64)
        )
        self.start_mass = start_mass
        if (mass_weight is None) != (start_mass is None):
            raise ValueError("a head reads start masses with both their weights and sets")

    @property
    def reads_start_mass(self) -> bool:
        return self.start_mass is not None

    def log_probs(self, hidden: np.ndarray, chunk: int = 65536) -> np.ndarray:
        """(N, C + 1) log P(none | h), log P(c | h) for each class, float64."""
        masses = self.start_mass(hidden) if self.start_mass is not None else None
        out = np.empty((len(hidden), len(self.bias)), dtype=np.float64)
        for a in range(0, len(hidden), chunk):
            logits = hidden[a : a + chunk].astype(np.float32) @ self.weight.T + self.bias
            logits = logits.astype(np.float64)
            if masses is not None:
                logits += masses[a : a + chunk] @ self.mass_weight.T
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
        start_mass: StartMass | None = None,
        epochs: int = 300,
        lr: float = 0.01,
        weight_decay: float = 1e-3,
        seed: int = 0,
    ) -> ClassHead:
        """Full-batch Adam on the cross-entropy of ``labels`` (0 none, 1… the classes); with
        ``start_mass``, its K log masses are inputs beside h."""
        import torch

        torch.manual_seed(seed)
        inputs = np.asarray(hidden, dtype=np.float32)
        if start_mass is not None:
            inputs = np.concatenate([inputs, start_mass(hidden).astype(np.float32)], axis=1)
        x = torch.as_tensor(inputs)
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
        weight = layer.weight.detach().numpy()
        width = hidden.shape[1]
        if start_mass is None:
            return cls(weight, layer.bias.detach().numpy(), names)
        return cls(
            weight[:, :width], layer.bias.detach().numpy(), names, weight[:, width:], start_mass
        )

    def nll(self, hidden: np.ndarray, labels: np.ndarray) -> float:
        """Mean cross-entropy (nats) of ``labels`` under the head."""
        log_p = self.log_probs(hidden)
        return float(-np.mean(log_p[np.arange(len(labels)), labels]))

    def tensors(self) -> dict[str, Any]:
        import torch

        out = {"weight": torch.from_numpy(self.weight), "bias": torch.from_numpy(self.bias)}
        if self.start_mass is not None:
            out["mass_weight"] = torch.from_numpy(self.mass_weight)
            out["start_tokens"] = torch.from_numpy(self.start_mass.starts.astype(np.uint8))
        return out

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, Any], names: Sequence[str], output: Any = None
    ) -> ClassHead:
        """The head kept by :meth:`tensors`; ``output``: the backbone's output layer (V, D),
        needed where the head reads start masses."""
        weight, bias = tensors["weight"].numpy(), tensors["bias"].numpy()
        if "mass_weight" not in tensors:
            return cls(weight, bias, names)
        if output is None:
            raise ValueError("this head reads start masses: give the backbone's output layer")
        starts = tensors["start_tokens"].numpy().astype(bool)
        return cls(weight, bias, names, tensors["mass_weight"].numpy(), StartMass(output, starts))
