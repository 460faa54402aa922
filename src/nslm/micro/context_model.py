"""The context-aware micro-model of a class: its components, mixed by a gate on the LM's h.

Components (:func:`grid_components`): the K best cells of the class's grid search, each a
fitted micro-model rebuilt from ``micro.json`` (no refitting), and, for the selected cell
when its metric compares a token with the context (``diff``, ``euclidean``), its restricted
parts (:class:`~nslm.micro.gated.Restricted`: later / earlier / other than the previous
value or place). The gate (:class:`~nslm.micro.gated.GatedMixture`) reads the LM's hidden
state at the position and weighs them:

    P(w | c, ctx, h) = Σ_k g_k(h) · P_k(w | c, ctx_k)

Each component keeps its own context reading (``class`` or ``family``), so ``ctx`` is read
once per mode. With the gate's W = 0 and b pinned to one component it is that micro-model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.classdata import ClassData
from nslm.micro.context import Context
from nslm.micro.gated import RESTRICTIONS, GatedMixture, Restricted, compares_with_context
from nslm.micro.model import MicroModel, log_prob_at
from nslm.micro.pdfs import Pdf

Component = MicroModel | Restricted


def component_name(component: Component) -> str:
    if isinstance(component, Restricted):
        return f"{component.name} [{component.model.context}]"
    return f"{component.metric.name}+{component.pdf.name} [{component.context}]"


def _mode(component: Component) -> str:
    return component.model.context if isinstance(component, Restricted) else component.context


def grid_components(entry: dict[str, Any], cls: ClassData, k: int = 3,
                    restricted: bool = True) -> list[Component]:  # fmt: skip
    """The ``k`` best fitted cells of a class's ``micro.json`` entry (the selected one first),
    plus the selected cell's restricted parts when its metric compares with the context."""
    selected = MicroModel.from_json(entry["selected"], cls)
    out: list[Component] = [selected]
    seen = {(selected.metric.name, selected.context, selected.pdf.name)}
    alpha = entry["selected"]["unigram_alpha"]
    cells = [c for c in entry.get("grid", []) if c.get("pdf_params") and c.get("valid_ppl")]
    for cell in sorted(cells, key=lambda c: c["valid_ppl"]):
        key = (cell["metric"], cell["context"], cell["pdf"])
        if len(out) >= k or key in seen:
            continue
        seen.add(key)
        out.append(MicroModel(cls, cell["metric"], Pdf.from_params(cell["pdf_params"]),
                              context=cell["context"], epsilon=cell["epsilon"],
                              unigram_alpha=alpha))  # fmt: skip
    if restricted and compares_with_context(selected):
        out += [Restricted(selected, keep) for keep in RESTRICTIONS]
    return out


class ContextMicroModel:
    """A class's components and the gate that mixes them by the LM's hidden state."""

    def __init__(self, cls: ClassData, components: list[Component], dim: int) -> None:
        if not components:
            raise NslmError(f"<{cls.name}>: a context micro-model needs a component")
        self.cls, self.components = cls, components
        self.gate = GatedMixture(len(components), dim)

    @property
    def names(self) -> list[str]:
        return [component_name(c) for c in self.components]

    def contexts(self, split: Split, positions: np.ndarray) -> dict[str, Context]:
        """The context of each position, once per reading the components use."""
        modes = {_mode(c) for c in self.components}
        return {m: self.cls.context(split, positions, m) for m in modes}

    # -- scores ------------------------------------------------------------------------------

    def component_log_probs(self, contexts: dict[str, Context]) -> np.ndarray:
        """(B, K, |V_c|): every component's distribution over V_c at every row."""
        return np.stack([c.log_prob(contexts[_mode(c)]) for c in self.components], axis=1)

    def log_prob(self, contexts: dict[str, Context], H: np.ndarray) -> np.ndarray:
        """(B, |V_c|): the mixture at rows with hidden states H (B, D)."""
        return self.gate.log_prob(H, self.component_log_probs(contexts))

    def component_targets(self, split: Split) -> tuple[np.ndarray, np.ndarray]:
        """(positions, (N, K) log P_k of each position's target) for the class's positions."""
        positions, index = self.cls.positions(split)
        contexts = self.contexts(split, positions)
        n = len(self.cls.candidates)
        cols = [log_prob_at(c.log_prob, contexts[_mode(c)], index, n) for c in self.components]
        return positions, np.stack(cols, axis=1) if cols else np.zeros((0, 0))

    def log_prob_targets(self, split: Split, H: np.ndarray) -> np.ndarray:
        """Per-position array (NaN off the class): log of the mixture at each target, with
        ``H`` the LM's hidden states at the class's positions (in ``positions`` order)."""
        out = np.full(len(split), np.nan)
        positions, targets = self.component_targets(split)
        if len(H) != len(positions):
            raise NslmError(f"<{self.cls.name}>: {len(H)} hidden states for "
                            f"{len(positions)} positions")  # fmt: skip
        out[positions] = self.gate.log_prob(H, targets)
        return out

    # -- fitting -----------------------------------------------------------------------------

    def fit(self, train: Split, H_train: np.ndarray, valid: Split, H_valid: np.ndarray
            ) -> ContextMicroModel:  # fmt: skip
        """Fit the gate (the components stay as fitted) on the train positions; λ on valid."""
        _, L = self.component_targets(train)
        _, Lv = self.component_targets(valid)
        self.gate.fit(H_train, L, H_valid, Lv)
        return self

    # -- parameters --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Everything but the gate's tensors (:meth:`GatedMixture.tensors`, for safetensors)."""
        parts = []
        for c in self.components:
            if isinstance(c, Restricted):
                parts.append({"name": component_name(c), "restrict": c.keep,
                              "model": c.model.to_json()})  # fmt: skip
            else:
                parts.append({"name": component_name(c), "model": c.to_json()})
        return {"class": self.cls.name, "components": parts, "gate": self.gate.get_params()}

    @classmethod
    def from_json(cls, data: dict[str, Any], class_data: ClassData,
                  tensors: dict[str, np.ndarray]) -> ContextMicroModel:  # fmt: skip
        components: list[Component] = []
        for part in data["components"]:
            model = MicroModel.from_json(part["model"], class_data)
            components.append(Restricted(model, part["restrict"]) if "restrict" in part
                              else model)  # fmt: skip
        gate = GatedMixture.from_saved(data["gate"], tensors)
        out = cls(class_data, components, gate.dim)
        out.gate = gate
        return out
