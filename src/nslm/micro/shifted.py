"""A context-shifted micro-model: the selected micro-model tilted by the LM's hidden state.

    P(w | c, ctx, h) ∝ P_MM(w | c, ctx) · exp(s_{bin(m(w, ctx))}(h)),      s(h) = A·z(h) + a

``m`` is the micro-model's own metric (``diff``, ``euclidean``, …), ``bin`` one of a few bins
of its value (quantile bins of the training targets' values, with the previous value itself,
m = 0, in a bin of its own), and z(h) the LM state standardised on the train rows. The fitted
symbolic PDF stays the base; the LM only moves mass between bins of the metric: after "died
in" it can raise every positive year difference, after a list of places lower distance 0.
This is the continuous form of the paper's future work beside the gated mixture
(:mod:`nslm.micro.gated`): a PDF whose parameters depend on h. With A = 0 and a = 0 it is
P_MM exactly; a row without context (the metric cannot be computed) keeps P_MM.

Fitting: the LM frozen, the mean negative log-likelihood of the train targets plus λ‖A‖²,
minimised by L-BFGS (torch autograd through the normaliser over V_c), for each λ of a grid,
the λ best on valid kept.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch
from scipy.special import logsumexp

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.context import Context
from nslm.micro.gated import as_rows, compares_with_context, standard_scale
from nslm.micro.model import MicroModel, metric_matrix

L2_GRID = (1e-4, 1e-3, 1e-2)
ZERO = 1e-9  # half-width of the bin of m = 0 (the previous value or place itself)


class ShiftedMicroModel:
    """A micro-model whose metric bins are shifted by a linear function of the LM's state."""

    needs_features = True

    def __init__(self, model: MicroModel, dim: int, n_bins: int = 8) -> None:
        if not compares_with_context(model):
            raise NslmError(f"<{model.cls.name}>: a shift needs a continuous metric of the "
                            f"context, not {model.metric.name!r}")  # fmt: skip
        self.model, self.dim, self.n_bins = model, int(dim), int(n_bins)
        self.cls, self.context = model.cls, model.context
        self.edges = np.array([-ZERO, ZERO])
        self.A = np.zeros((len(self.edges) + 1, self.dim))
        self.a = np.zeros(len(self.edges) + 1)
        self.mean, self.scale = np.zeros(self.dim), np.ones(self.dim)
        self.l2_: float | None = None
        self.valid_nll_: float | None = None

    @property
    def metric(self):  # what a prediction's context line describes
        return self.model.metric

    @property
    def pdf(self):
        return self.model.pdf

    @property
    def label(self) -> str:
        return f"{self.model.label} shifted by h ({len(self.a)} bins)"

    def bin_names(self) -> list[str]:
        bounds = [-np.inf, *self.edges.tolist(), np.inf]
        return [f"{self.metric.name} = 0" if lo >= -ZERO and hi <= ZERO
                else f"{self.metric.name} in ({lo:.3g}, {hi:.3g}]"
                for lo, hi in itertools.pairwise(bounds)]  # fmt: skip

    # -- scores ------------------------------------------------------------------------------

    def _parts(self, ctx: Context) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log P_MM (B, |V_c|), the rows with context, and their bin of every member."""
        base = self.model.log_prob(ctx)
        ok = np.flatnonzero(self.metric.available(ctx))
        values = metric_matrix(self.metric, self.cls, ctx.rows(ok)) if len(ok) else None
        bins = np.searchsorted(self.edges, values, side="left") if values is not None else None
        return base, ok, bins

    def shifts(self, H: Any) -> np.ndarray:
        """s(h) (B, bins) for LM states H (B, D)."""
        return ((as_rows(H) - self.mean) / self.scale) @ self.A.T + self.a

    def log_prob(self, ctx: Context, H: Any = None) -> np.ndarray:
        """(B, |V_c|): the shifted distribution at the rows of ``ctx`` with LM states H."""
        if H is None:
            raise NslmError(f"<{self.cls.name}>'s shifted micro-model needs the LM's states")
        base, ok, bins = self._parts(ctx)
        if len(ok):
            s = self.shifts(H)[ok]
            tilted = base[ok] + np.take_along_axis(s, bins, axis=1)
            base[ok] = tilted - logsumexp(tilted, axis=1, keepdims=True)
        return base

    def log_prob_targets(self, split: Split, features: Any = None) -> np.ndarray:
        """Per-position array (NaN off the class), ``features`` the states at every position."""
        if features is None or len(features) != len(split):
            got = "none" if features is None else len(features)
            raise NslmError(f"<{self.cls.name}>: {got} LM states for {len(split)} positions")
        out = np.full(len(split), np.nan)
        positions, _ = self.cls.positions(split)
        out[positions] = self.class_log_probs(split, features[positions])
        return out

    def class_log_probs(self, split: Split, H: Any) -> np.ndarray:
        """log P of each target at the class's positions of ``split`` (their states H), in
        bounded chunks of rows."""
        positions, index = self.cls.positions(split)
        out = np.empty(len(positions))
        for chunk in np.array_split(np.arange(len(positions)), max(1, len(positions) // 2048)):
            ctx = self.cls.context(split, positions[chunk], self.context)
            rows = self.log_prob(ctx, H[chunk])
            out[chunk] = rows[np.arange(len(chunk)), index[chunk]]
        return out

    def explain(self, H: Any) -> dict[str, Any]:
        """What the state did at one row: each bin's factor exp(s_b(h)), largest first."""
        s = self.shifts(H)[0]
        order = np.argsort(-s, kind="stable")
        names = self.bin_names()
        return {"shift": [{"bin": names[i], "factor": float(np.exp(s[i]))} for i in order]}

    # -- fitting -----------------------------------------------------------------------------

    def _rows(self, split: Split, H: Any) -> tuple[torch.Tensor, ...]:
        """The class's positions with context: base log-probs, bins, targets, states."""
        positions, index = self.cls.positions(split)
        ctx = self.cls.context(split, positions, self.context)
        base, ok, bins = self._parts(ctx)
        z = (as_rows(H)[ok] - self.mean) / self.scale
        bins = bins if bins is not None else np.zeros((0, base.shape[1]), dtype=np.int64)
        return (
            torch.as_tensor(base[ok], dtype=torch.float32),
            torch.as_tensor(bins).long(),
            torch.as_tensor(index[ok]).long(),
            torch.as_tensor(z, dtype=torch.float32),
        )

    def fit(self, train: Split, H_train: Any, valid: Split, H_valid: Any, max_iter: int = 100
            ) -> ShiftedMicroModel:  # fmt: skip
        """Fit the bins, then A and a for each λ; keep the λ best on valid. ``H_*``: the LM's
        states at the class's positions of each split, in order."""
        train_values = self.model.target_metric(train)
        inner = np.quantile(train_values, np.linspace(0, 1, self.n_bins + 1)[1:-1])
        self.edges = np.unique(np.concatenate([inner, [-ZERO, ZERO]]))
        self.mean, self.scale = standard_scale(as_rows(H_train))
        train_rows, valid_rows = self._rows(train, H_train), self._rows(valid, H_valid)
        if len(train_rows[2]) == 0 or len(valid_rows[2]) == 0:
            raise NslmError(f"<{self.cls.name}>: no train or valid positions with context")
        n_bins, best = len(self.edges) + 1, None
        for l2 in L2_GRID:
            A = torch.zeros(n_bins, self.dim, requires_grad=True)
            a = torch.zeros(n_bins, requires_grad=True)
            opt = torch.optim.LBFGS([A, a], max_iter=max_iter, line_search_fn="strong_wolfe")

            def closure(A=A, a=a, l2=l2, opt=opt) -> torch.Tensor:
                opt.zero_grad()
                loss = _nll(A, a, *train_rows) + l2 * (A * A).sum()
                loss.backward()
                return loss

            opt.step(closure)
            with torch.no_grad():
                valid_nll = float(_nll(A, a, *valid_rows))
            if best is None or valid_nll < best[0]:
                best = (valid_nll, l2, A.detach().double().numpy(), a.detach().double().numpy())
        self.valid_nll_, self.l2_, self.A, self.a = best
        return self

    # -- parameters --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls.name, "kind": "shifted", "model": self.model.to_json(),
                "dim": self.dim, "n_bins": self.n_bins, "edges": self.edges.tolist(),
                "l2": self.l2_, "fit_valid_nll": self.valid_nll_}  # fmt: skip

    def tensors(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name).astype(np.float32)
                for name in ("A", "a", "mean", "scale")}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any], class_data, tensors: dict[str, np.ndarray]
                  ) -> ShiftedMicroModel:  # fmt: skip
        out = cls(MicroModel.from_json(data["model"], class_data), data["dim"], data["n_bins"])
        out.edges = np.asarray(data["edges"], np.float64)
        bins = len(out.edges) + 1
        shapes = {"A": (bins, out.dim), "a": (bins,), "mean": (out.dim,), "scale": (out.dim,)}
        for name, shape in shapes.items():
            value = np.asarray(tensors[name], np.float64)
            if value.shape != shape:
                raise NslmError(f"shift tensor {name} {value.shape} is not {shape}")
            setattr(out, name, value)
        out.l2_, out.valid_nll_ = data.get("l2"), data.get("fit_valid_nll")
        return out


def _nll(A: torch.Tensor, a: torch.Tensor, base: torch.Tensor, bins: torch.Tensor,
         target: torch.Tensor, z: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """Mean −log P(target) of the tilted rows (float32; rows at once)."""
    s = z @ A.T + a  # (N, bins)
    tilted = base + torch.gather(s, 1, bins)
    picked = tilted.gather(1, target.unsqueeze(1)).squeeze(1)
    return (torch.logsumexp(tilted, dim=1) - picked).mean()
