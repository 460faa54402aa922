"""The context-aware micro-model of a class: its components, mixed by a gate on the LM's h.

Components (:func:`grid_components`): the K best cells of the class's grid search that read
the same context as the selected cell (``class`` or ``family``), each a fitted micro-model
rebuilt from ``micro.json`` (no refitting), and, when the selected cell's metric compares a
token with the context (``diff``, ``euclidean``), its restricted parts
(:class:`~nslm.micro.gated.Restricted`: later / earlier / other than the previous value or
place). The gate (:class:`~nslm.micro.gated.GatedMixture`) reads the LM's hidden state at
the position and weighs them:

    P(w | c, ctx, h) = Σ_k g_k(h) · P_k(w | c, ctx)

One context reading for all components keeps the model a drop-in for a
:class:`~nslm.micro.model.MicroModel`: every caller finds ``ctx`` as it does for the plain
one and passes the LM's states beside it. With the gate's W = 0 and b pinned to one
component it is that micro-model (docs/context-micro-models.md).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.classdata import ClassData
from nslm.micro.gated import (
    RESTRICTIONS,
    GatedMixture,
    Restricted,
    as_rows,
    compares_with_context,
)
from nslm.micro.history import Context
from nslm.micro.model import MicroModel, log_prob_at
from nslm.micro.pdfs import Pdf

Component = Any  # a MicroModel, a Restricted part, or a ShiftedMicroModel (reads h itself)


def component_name(component: Component) -> str:
    if isinstance(component, Restricted):
        return component.name
    return component.label


def _reads_h(component: Component) -> bool:
    return getattr(component, "needs_features", False)


def grid_components(
    entry: dict[str, Any], cls: ClassData, k: int = 3, restricted: bool = True
) -> list[Component]:
    """The ``k`` best fitted cells of a class's ``micro.json`` entry that read the selected
    cell's context (the selected one first), plus the selected cell's restricted parts when
    its metric compares with the context."""
    selected = MicroModel.from_json(entry["selected"], cls)
    out: list[Component] = [selected]
    seen = {(selected.metric.name, selected.pdf.name)}
    alpha = entry["selected"]["unigram_alpha"]
    cells = [
        c
        for c in entry.get("grid", [])
        if c.get("pdf_params") and c.get("valid_ppl") and c["context"] == selected.context
    ]
    for cell in sorted(cells, key=lambda c: c["valid_ppl"]):
        key = (cell["metric"], cell["pdf"])
        if len(out) >= k or key in seen:
            continue
        seen.add(key)
        out.append(
            MicroModel(
                cls,
                cell["metric"],
                Pdf.from_params(cell["pdf_params"]),
                context=cell["context"],
                epsilon=cell["epsilon"],
                unigram_alpha=alpha,
            )
        )
    if restricted and compares_with_context(selected):
        out += [Restricted(selected, keep) for keep in RESTRICTIONS]
    return out


class ContextMicroModel:
    """A class's components and the gate that mixes them by the LM's hidden state."""

    needs_features = True

    def __init__(self, cls: ClassData, components: list[Component], dim: int) -> None:
        if not components:
            raise NslmError(f"<{cls.name}>: a context micro-model needs a component")
        modes = {_mode(c) for c in components}
        if len(modes) != 1:
            raise NslmError(f"<{cls.name}>: components read different contexts {modes}")
        self.cls, self.components = cls, components
        self.context = modes.pop()
        self.gate = GatedMixture(len(components), dim)

    @property
    def selected(self) -> MicroModel:
        """The grid's selected micro-model (component 0): what the tables' Metric/PDF show."""
        first = self.components[0]
        return first.model if isinstance(first, Restricted) or _reads_h(first) else first

    @property
    def metric(self):  # the selected metric: what a prediction's context line describes
        return self.selected.metric

    @property
    def pdf(self) -> Pdf:
        return self.selected.pdf

    @property
    def label(self) -> str:
        return f"gated mixture of {len(self.components)} ({self.selected.label} first)"

    @property
    def names(self) -> list[str]:
        return [component_name(c) for c in self.components]

    # -- scores ------------------------------------------------------------------------------

    def component_log_probs(self, ctx: Context, H: Any = None) -> np.ndarray:
        """(B, K, |V_c|): every component's distribution over V_c at every row (a shifted
        component reads the rows' LM states H as well)."""
        return np.stack(self._rows(ctx, self.components, H), axis=1)

    def _rows(self, ctx: Context, components: list[Component], H: Any = None) -> list[np.ndarray]:
        """Each component's (B, |V_c|) at ``ctx``. A plain micro-model is scored once however
        many components build on it: the selected one, its restricted parts and its shifted
        form all start from the same P_MM rows."""
        plain: dict[int, np.ndarray] = {}

        def base(model: MicroModel) -> np.ndarray:
            if id(model) not in plain:
                plain[id(model)] = model.log_prob(ctx)
            return plain[id(model)]

        out = []
        for c in components:
            if isinstance(c, MicroModel):
                out.append(base(c))
            elif isinstance(c, Restricted):
                out.append(c.log_prob(ctx, base(c.model)))
            else:  # a shifted micro-model
                out.append(c.log_prob(ctx, H, base(c.model)))
        return out

    def gate_weights(self, H: Any) -> np.ndarray:
        """g(h) (B, K) at rows with LM states H (B, D): which component the context chose."""
        return np.exp(self.gate.log_gate(as_rows(H)))

    def explain(self, H: Any) -> list[dict[str, Any]]:
        """The gate at each row of H (B, D): each component's weight, largest first, and the
        factors of a shifted component when there is one."""
        weights, names = self.gate_weights(H), self.names
        order = np.argsort(-weights, axis=1, kind="stable")
        ranked = np.take_along_axis(weights, order, axis=1).tolist()
        out = [
            {"gate": [{"component": names[i], "weight": w} for i, w in zip(o, ws, strict=True)]}
            for o, ws in zip(order.tolist(), ranked, strict=True)
        ]
        shifted = [c for c in self.components if _reads_h(c)]
        if shifted:
            for row, factors in zip(out, shifted[0].explain(H), strict=True):
                row.update(factors)
        return out

    def log_prob(self, ctx: Context, H: Any = None) -> np.ndarray:
        """(B, |V_c|): the mixture at the rows of ``ctx``, whose LM states are H (B, D)."""
        if H is None:
            raise NslmError(f"<{self.cls.name}>'s context micro-model needs the LM's states")
        return self.gate.log_prob(as_rows(H), self.component_log_probs(ctx, H))

    def component_targets(self, split: Split, H: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """(positions, (N, K) log P_k of each position's target) for the class's positions;
        ``H``, their LM states, is read by shifted components only."""
        positions, index = self.cls.positions(split)
        ctx = self.cls.context(split, positions, self.context)
        if not len(positions):
            return positions, np.empty((0, len(self.components)))
        n = len(self.cls.candidates)
        fixed = [c for c in self.components if not _reads_h(c)]  # the rows do not read h

        def stacked(sub: Context) -> np.ndarray:
            return np.stack(self._rows(sub, fixed), axis=1)

        at = log_prob_at(stacked, ctx, index, n * len(fixed)) if fixed else None
        cols, k = [], 0
        for c in self.components:
            if _reads_h(c):
                cols.append(c.class_log_probs(split, H))
            else:
                cols.append(at[:, k])
                k += 1
        return positions, np.stack(cols, axis=1)

    def log_prob_targets(self, split: Split, features: Any = None) -> np.ndarray:
        """Per-position array (NaN off the class): log of the mixture at each target, with
        ``features`` (N, D) the LM's states at every position of ``split`` (row t the one
        that predicted w_t, as :class:`nslm.scores.split_scores.SplitScores` keeps them)."""
        if features is None or len(features) != len(split):
            got = "none" if features is None else len(features)
            raise NslmError(f"<{self.cls.name}>: {got} LM states for {len(split)} positions")
        out = np.full(len(split), np.nan)
        positions, _ = self.cls.positions(split)
        H = features[positions]
        _, targets = self.component_targets(split, H)
        out[positions] = self.gate.log_prob(as_rows(H), targets)
        return out

    # -- fitting -----------------------------------------------------------------------------

    def fit(self, train: Split, H_train: Any, valid: Split, H_valid: Any) -> ContextMicroModel:
        """Fit the gate (the components stay as fitted) on the train positions, λ on valid;
        ``H_*`` are the LM's states at the class's positions of each split, in order."""
        _, L = self.component_targets(train, H_train)
        _, Lv = self.component_targets(valid, H_valid)
        self.gate.fit(as_rows(H_train), L, as_rows(H_valid), Lv)
        return self

    # -- parameters --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """Everything but the tensors (:meth:`tensors`, for safetensors)."""
        parts = []
        for c in self.components:
            if isinstance(c, Restricted):
                parts.append(
                    {"name": component_name(c), "restrict": c.keep, "model": c.model.to_json()}
                )
            elif _reads_h(c):
                parts.append({"name": component_name(c), "shifted": c.to_json()})
            else:
                parts.append({"name": component_name(c), "model": c.to_json()})
        return {
            "class": self.cls.name,
            "kind": "mixture",
            "components": parts,
            "gate": self.gate.get_params(),
        }

    def tensors(self) -> dict[str, np.ndarray]:
        """The gate's tensors and, as ``c{k}.NAME``, those of shifted component k."""
        out = self.gate.tensors()
        for k, c in enumerate(self.components):
            if _reads_h(c):
                out.update({f"c{k}.{n}": v for n, v in c.tensors().items()})
        return out

    @classmethod
    def from_json(
        cls, data: dict[str, Any], class_data: ClassData, tensors: dict[str, np.ndarray]
    ) -> ContextMicroModel:
        from nslm.micro.shifted import ShiftedMicroModel

        components: list[Component] = []
        # one object per distinct micro-model: the selected one, its restricted parts and its
        # shifted form then share their P_MM rows in a prediction (see _rows)
        models: dict[str, MicroModel] = {}

        def model_of(params: dict[str, Any]) -> MicroModel:
            key = json.dumps(params, sort_keys=True)
            if key not in models:
                models[key] = MicroModel.from_json(params, class_data)
            return models[key]

        for k, part in enumerate(data["components"]):
            if "shifted" in part:
                own = {n[len(f"c{k}.") :]: v for n, v in tensors.items() if n.startswith(f"c{k}.")}
                shifted = ShiftedMicroModel.from_json(part["shifted"], class_data, own)
                shifted.model = model_of(part["shifted"]["model"])
                components.append(shifted)
                continue
            model = model_of(part["model"])
            components.append(Restricted(model, part["restrict"]) if "restrict" in part else model)
        gate = GatedMixture.from_saved(data["gate"], tensors)
        out = cls(class_data, components, gate.dim)
        out.gate = gate
        return out

    def __repr__(self) -> str:
        return f"ContextMicroModel(<{self.cls.name}>, {self.names})"


def _mode(component: Component) -> str:
    return component.model.context if isinstance(component, Restricted) else component.context
