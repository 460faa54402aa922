"""Interventions inside a running one-layer LSTM: ablate units, clamp them, steer the state.

An :class:`Intervention` acts at every step of the recurrence, so what it changes feeds the
next step, the output layer and every reader of the states (probes, generation, scoring):

- **ablation** sets chosen units' cell and hidden values to 0 or to their mean (the test
  Donnelly & Roegiest 2019 ask of a "sentiment neuron": does removing it change anything?);
- **clamping** fixes chosen units' cell values, as Radford et al. (2017) fix the sentiment
  unit to steer reviews; the hidden state follows from the clamped cell (h = o ⊙ tanh c);
- **steering** adds α·d at every step to the cell state, the hidden state, or the
  pre-activation of the cell's candidate g (activation addition, Turner et al. 2023).

The cell is written out (Hochreiter & Schmidhuber 1997, with PyTorch's gate order i, f, g,
o) because the fused ``nn.LSTM`` hides c between steps and the gates altogether. An empty
intervention is never run through it: :meth:`LSTMBackbone.forward` and
:func:`nslm.models.lstm.lstm_state_chunks` keep the model's own fused path, so "no
intervention" is bit-identical to the plain model.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

PLACES = ("cell", "hidden", "candidate")


@dataclass
class Intervention:
    """What to change in the LSTM at every step; units index the H hidden/cell dimensions.

    ``ablate``: units whose cell and hidden values become ``ablate_cell`` / ``ablate_hidden``
    (zeros by default: zero-ablation; the units' means: mean-ablation). ``clamp``: unit →
    cell value. ``steer``: place (cell, hidden, candidate) → direction (H,), added times
    ``alpha``.
    """

    ablate: tuple[int, ...] = ()
    ablate_cell: Tensor | None = None  # (len(ablate),) values; None: zeros
    ablate_hidden: Tensor | None = None
    clamp: dict[int, float] = field(default_factory=dict)
    steer: dict[str, Tensor] = field(default_factory=dict)
    alpha: float = 1.0

    def __post_init__(self) -> None:
        for place in self.steer:
            if place not in PLACES:
                raise ValueError(f"steering acts on {', '.join(PLACES)}, not {place!r}")

    @property
    def empty(self) -> bool:
        """Whether it changes nothing (no units, and steering by α = 0 or not at all)."""
        return not self.ablate and not self.clamp and (not self.steer or self.alpha == 0)

    def check(self, hidden: int) -> None:
        units = [*self.ablate, *self.clamp]
        bad = [u for u in units if not 0 <= u < hidden]
        if bad:
            raise ValueError(f"unit {bad[0]} is out of range: the LSTM has {hidden} units")
        for place, d in self.steer.items():
            if tuple(d.shape) != (hidden,):
                raise ValueError(f"a {place} direction needs {hidden} numbers, not {d.numel()}")

    def run_steps(self, lstm: nn.LSTM, emb: Tensor, state):
        """:func:`intervened_steps` with this intervention: what the LSTM backbone calls
        (:class:`nslm.models.lstm.StepIntervention`)."""
        return intervened_steps(lstm, emb, state, self)


def intervened_steps(lstm: nn.LSTM, emb: Tensor, state, iv: Intervention):
    """Run the one-layer ``lstm`` over ``emb`` (T, B, E) with ``iv`` at every step.

    Returns (hidden states (T, B, H), cell states (T, B, H), (h, c) each (1, B, H)), float32.
    """
    H = lstm.hidden_size
    T, B = emb.shape[0], emb.shape[1]
    w_hh = lstm.weight_hh_l0.float()
    # the input's share of the gates for every step at once: one matrix product, not T
    x_gates = emb.float() @ lstm.weight_ih_l0.float().T + lstm.bias_ih_l0 + lstm.bias_hh_l0
    if state is None:
        h, c = emb.new_zeros(B, H, dtype=torch.float32), emb.new_zeros(B, H, dtype=torch.float32)
    else:
        h, c = state[0][0].float(), state[1][0].float()
    units = torch.tensor(iv.ablate, dtype=torch.long)
    zeros = torch.zeros(len(iv.ablate))
    ablate_c = zeros if iv.ablate_cell is None else iv.ablate_cell.float()
    ablate_h = zeros if iv.ablate_hidden is None else iv.ablate_hidden.float()
    clamp_units = torch.tensor(list(iv.clamp), dtype=torch.long)
    clamp_values = torch.tensor(list(iv.clamp.values()), dtype=torch.float32)
    steer = {place: iv.alpha * d.float() for place, d in iv.steer.items()}
    hs, cs = torch.empty(T, B, H), torch.empty(T, B, H)
    for t in range(T):
        i, f, g, o = (x_gates[t] + h @ w_hh.T).chunk(4, dim=1)
        if "candidate" in steer:
            g = g + steer["candidate"]
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        if "cell" in steer:
            c = c + steer["cell"]
        if len(clamp_units):
            c[:, clamp_units] = clamp_values
        if len(units):
            c[:, units] = ablate_c
        h = torch.sigmoid(o) * torch.tanh(c)
        if "hidden" in steer:
            h = h + steer["hidden"]
        if len(units):
            h[:, units] = ablate_h
        hs[t], cs[t] = h, c
    return hs, cs, (h.unsqueeze(0), c.unsqueeze(0))


def check_backbone(backbone: nn.Module) -> nn.LSTM:
    """The backbone's one-layer, unidirectional ``nn.LSTM``, or a ValueError."""
    lstm = getattr(backbone, "lstm", None)
    if (
        lstm is None
        or getattr(backbone, "locked", False)
        or lstm.num_layers != 1
        or lstm.bidirectional
        or lstm.proj_size
    ):
        raise ValueError("interventions need a one-layer, unidirectional LSTM (a byte LM)")
    return lstm


def set_intervention(model: nn.Module, iv: Intervention | None) -> Intervention | None:
    """From now on ``model`` (a LanguageModel or its backbone) runs with ``iv`` (None: as
    trained); returns the intervention it had."""
    backbone = getattr(model, "backbone", model)
    if iv is not None and not iv.empty:
        iv.check(check_backbone(backbone).hidden_size)
    before = getattr(backbone, "intervention", None)
    backbone.intervention = iv
    return before


@contextmanager
def intervening(model: nn.Module, iv: Intervention | None) -> Iterator[nn.Module]:
    """Within the block, ``model`` runs with ``iv``; after it, as before."""
    before = set_intervention(model, iv)
    try:
        yield model
    finally:
        set_intervention(model, before)
