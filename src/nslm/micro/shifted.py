"""A context-shifted micro-model: the selected micro-model tilted by the LM's hidden state.

    P(w | c, ctx, h) ∝ P_MM(w | c, ctx) · exp(s_{bin(m(w, ctx))}(h) + t_{vbin(v(w))}(h))
    s(h) = A·z(h) + a,      t(h) = B·z(h) + b

``m`` is the micro-model's own metric (``diff``, ``euclidean``, …), ``bin`` one of a few bins
of its value (quantile bins of the training targets' values, with the previous value itself,
m = 0, in a bin of its own), and z(h) the LM state standardised on the train rows. The fitted
symbolic PDF stays the base; the LM only moves mass between bins of the metric: after "died
in" it can raise every positive year difference, after a list of places lower distance 0.

For a number class the member's own value v(w) has bins too (``value_bins``, quantiles of
the train targets' values; a member without a value in none): the state says which era or
magnitude the text is about ("in the 1990s", "a population of"), which the metric against
one previous value cannot, and which also reaches rows with no previous value.

This is the continuous form of the paper's future work beside the gated mixture
(:mod:`nslm.micro.gated`): a PDF whose parameters depend on h. With A, a, B, b = 0 it is
P_MM exactly; a row without context (the metric cannot be computed) has no metric shift.

Fitting: the LM frozen, the mean negative log-likelihood of the train targets plus λ‖A‖²,
minimised by L-BFGS (torch autograd through the normaliser over V_c), for each λ of a grid,
the λ best on valid kept.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import torch

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.gated import as_rows, compares_with_context, standard_scale, standardise
from nslm.micro.history import Context
from nslm.micro.logspace import log_normalise
from nslm.micro.model import MicroModel, metric_matrix

L2_GRID = (1e-4, 1e-3, 1e-2, 1e-1)
ZERO = 1e-9  # half-width of the bin of m = 0 (the previous value or place itself)


class ShiftedMicroModel:
    """A micro-model whose metric bins are shifted by a linear function of the LM's state."""

    needs_features = True

    def __init__(self, model: MicroModel, dim: int, n_bins: int = 8, value_bins: int = 0) -> None:
        if not compares_with_context(model):
            raise NslmError(
                f"<{model.cls.name}>: a shift needs a continuous metric of the "
                f"context, not {model.metric.name!r}"
            )
        self.model, self.dim, self.n_bins = model, int(dim), int(n_bins)
        self.cls, self.context = model.cls, model.context
        self.edges = np.array([-ZERO, ZERO])
        self.A = np.zeros((len(self.edges) + 1, self.dim))
        self.a = np.zeros(len(self.edges) + 1)
        values = self.cls.candidates.values
        # value bins only where members have values (a number class), else none at all
        self.value_bins = int(value_bins) if np.isfinite(values).mean() >= 0.5 else 0
        self.value_edges = np.zeros(0)
        self.B, self.b = np.zeros((0, self.dim)), np.zeros(0)
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
        values = f", {len(self.b)} value bins" if len(self.b) else ""
        return f"{self.model.label} shifted by h ({len(self.a)} bins{values})"

    def bin_names(self) -> list[str]:
        bounds = [-np.inf, *self.edges.tolist(), np.inf]
        return [
            f"{self.metric.name} = 0"
            if lo >= -ZERO and hi <= ZERO
            else f"{self.metric.name} in ({lo:.3g}, {hi:.3g}]"
            for lo, hi in itertools.pairwise(bounds)
        ]

    def value_bin_names(self) -> list[str]:
        bounds = [-np.inf, *self.value_edges.tolist(), np.inf]
        return [f"value in ({lo:.4g}, {hi:.4g}]" for lo, hi in itertools.pairwise(bounds)]

    def member_value_bins(self) -> np.ndarray:
        """(|V_c|,) each member's value bin; len(b) (a bin of zero tilt) without a value."""
        values = self.cls.candidates.values
        out = np.full(len(values), len(self.b), dtype=np.int64)
        finite = np.isfinite(values)
        out[finite] = np.searchsorted(self.value_edges, values[finite], side="left")
        return out

    # -- scores ------------------------------------------------------------------------------

    def _parts(self, ctx: Context, base: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """log P_MM (B, |V_c|) (``base`` when the caller has it) and each row's metric bin
        of every member (B, |V_c|): a row without context has every member in bin len(a),
        which has no shift."""
        base = self.model.log_prob(ctx) if base is None else base
        bins = np.full(base.shape, len(self.a), dtype=np.int64)
        ok = np.flatnonzero(self.metric.available(ctx))
        if len(ok):
            values = metric_matrix(self.metric, self.cls, ctx.rows(ok))
            bins[ok] = np.searchsorted(self.edges, values, side="left")
        return base, bins

    def _z(self, H: Any) -> np.ndarray:
        return standardise(H, self.mean, self.scale)

    def shifts(self, H: Any) -> np.ndarray:
        """s(h) (B, metric bins) for LM states H (B, D)."""
        return self._z(H) @ self.A.T + self.a

    def value_shifts(self, H: Any) -> np.ndarray:
        """t(h) (B, value bins) for LM states H (B, D)."""
        return self._z(H) @ self.B.T + self.b

    def log_prob(self, ctx: Context, H: Any = None, base: np.ndarray | None = None) -> np.ndarray:
        """(B, |V_c|): the shifted distribution at the rows of ``ctx`` with LM states H;
        ``base``: P_MM's log-probabilities there when the caller has them (not modified)."""
        if H is None:
            raise NslmError(f"<{self.cls.name}>'s shifted micro-model needs the LM's states")
        base, bins = self._parts(ctx, base)
        return self._tilt(base, bins, self._z(H))

    def _tilt(self, base: np.ndarray, bins: np.ndarray, z: np.ndarray) -> np.ndarray:
        """log P_MM + s_bin(h) + t_vbin(h), normalised over V_c, for standardised states z;
        the last column of each shift is the zero of a row without context or a member
        without a value."""
        s = np.concatenate([z @ self.A.T + self.a, np.zeros((len(z), 1))], axis=1)
        tilted = base + np.take_along_axis(s, bins, axis=1)
        if len(self.b):
            t = np.concatenate([z @ self.B.T + self.b, np.zeros((len(z), 1))], axis=1)
            tilted += t[:, self.member_value_bins()]
        return log_normalise(tilted, axis=1)

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
        bounded chunks of rows. P_MM and the metric bins are computed once per distinct
        context (rows after the same previous year share them); only the tilt is per row."""
        positions, index = self.cls.positions(split)
        out = np.empty(len(positions))
        if not len(positions):
            return out
        distinct, which = self.cls.context(split, positions, self.context).unique()
        base, bins = self._parts(distinct)
        z = self._z(H)
        for chunk in np.array_split(np.arange(len(positions)), max(1, len(positions) // 2048)):
            rows = self._tilt(base[which[chunk]], bins[which[chunk]], z[chunk])
            out[chunk] = rows[np.arange(len(chunk)), index[chunk]]
        return out

    def explain(self, H: Any) -> list[dict[str, Any]]:
        """What the state did at each row of H (B, D): each bin's factor exp(s_b(h)) (metric
        bins, then value bins), largest first."""
        parts = []
        for s, names in (
            (self.shifts(H), self.bin_names()),
            (self.value_shifts(H), self.value_bin_names()),
        ):
            order = np.argsort(-s, axis=1, kind="stable")
            factors = np.exp(np.take_along_axis(s, order, axis=1)).tolist()
            parts.append(
                [
                    [{"bin": names[i], "factor": f} for i, f in zip(o, fs, strict=True)]
                    for o, fs in zip(order.tolist(), factors, strict=True)
                ]
            )
        return [{"shift": a, "value_shift": b} for a, b in zip(*parts, strict=True)]

    # -- fitting -----------------------------------------------------------------------------

    def _rows(self, split: Split, H: Any) -> tuple[torch.Tensor, ...]:
        """The class's positions: base log-probs, metric bins, value bins, targets, states.
        Without value bins only the rows with context can move, so only they are kept."""
        positions, index = self.cls.positions(split)
        ctx = self.cls.context(split, positions, self.context)
        base, bins = self._parts(ctx)
        keep = np.arange(len(base)) if len(self.b) else np.flatnonzero(bins[:, 0] < len(self.a))
        return (
            torch.as_tensor(base[keep], dtype=torch.float32),
            torch.as_tensor(bins[keep]).long(),
            torch.as_tensor(self.member_value_bins()).long(),
            torch.as_tensor(index[keep]).long(),
            torch.as_tensor(self._z(H)[keep], dtype=torch.float32),
        )

    def fit(
        self, train: Split, H_train: Any, valid: Split, H_valid: Any, max_iter: int = 100
    ) -> ShiftedMicroModel:
        """Fit the bins, then A, a, B, b for each λ; keep the λ best on valid. ``H_*``: the
        LM's states at the class's positions of each split, in order."""
        train_values = self.model.target_metric(train)
        inner = np.quantile(train_values, np.linspace(0, 1, self.n_bins + 1)[1:-1])
        self.edges = np.unique(np.concatenate([inner, [-ZERO, ZERO]]))
        n_bins, n_value = len(self.edges) + 1, 0
        if self.value_bins:
            values = self.cls.candidates.values[self.cls.positions(train)[1]]
            quantiles = np.linspace(0, 1, self.value_bins + 1)[1:-1]
            self.value_edges = np.unique(np.quantile(values[np.isfinite(values)], quantiles))
            n_value = len(self.value_edges) + 1
        self.a, self.b = np.zeros(n_bins), np.zeros(n_value)  # sizes _rows reads
        self.mean, self.scale = standard_scale(as_rows(H_train))
        train_rows, valid_rows = self._rows(train, H_train), self._rows(valid, H_valid)
        if len(train_rows[3]) == 0 or len(valid_rows[3]) == 0:
            raise NslmError(f"<{self.cls.name}>: no train or valid positions with context")
        best = None
        for l2 in L2_GRID:
            params = [
                torch.zeros(n_bins, self.dim, requires_grad=True),
                torch.zeros(n_bins, requires_grad=True),
                torch.zeros(n_value, self.dim, requires_grad=True),
                torch.zeros(n_value, requires_grad=True),
            ]
            opt = torch.optim.LBFGS(params, max_iter=max_iter, line_search_fn="strong_wolfe")

            def closure(params=params, l2=l2, opt=opt) -> torch.Tensor:
                opt.zero_grad()
                A, _, B, _ = params
                loss = _nll(params, *train_rows) + l2 * ((A * A).sum() + (B * B).sum())
                loss.backward()
                return loss

            opt.step(closure)
            with torch.no_grad():
                valid_nll = float(_nll(params, *valid_rows))
            if best is None or valid_nll < best[0]:
                best = (valid_nll, l2, [p.detach().double().numpy() for p in params])
        self.valid_nll_, self.l2_, (self.A, self.a, self.B, self.b) = best
        return self

    # -- parameters --------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.cls.name,
            "kind": "shifted",
            "model": self.model.to_json(),
            "dim": self.dim,
            "n_bins": self.n_bins,
            "edges": self.edges.tolist(),
            "value_bins": self.value_bins,
            "value_edges": self.value_edges.tolist(),
            "l2": self.l2_,
            "fit_valid_nll": self.valid_nll_,
        }

    def tensors(self) -> dict[str, np.ndarray]:
        return {
            name: getattr(self, name).astype(np.float32)
            for name in ("A", "a", "B", "b", "mean", "scale")
        }

    @classmethod
    def from_json(
        cls, data: dict[str, Any], class_data, tensors: dict[str, np.ndarray]
    ) -> ShiftedMicroModel:
        out = cls(
            MicroModel.from_json(data["model"], class_data),
            data["dim"],
            data["n_bins"],
            data.get("value_bins", 0),
        )
        out.edges = np.asarray(data["edges"], np.float64)
        out.value_edges = np.asarray(data.get("value_edges", []), np.float64)
        bins, values = len(out.edges) + 1, len(out.value_edges) + 1 if out.value_bins else 0
        shapes = {
            "A": (bins, out.dim),
            "a": (bins,),
            "B": (values, out.dim),
            "b": (values,),
            "mean": (out.dim,),
            "scale": (out.dim,),
        }
        # a model fitted before value bins existed has no B, b: none of them
        tensors = {"B": np.zeros((0, out.dim)), "b": np.zeros(0), **tensors}
        for name, shape in shapes.items():
            value = np.asarray(tensors[name], np.float64)
            if value.shape != shape:
                raise NslmError(f"shift tensor {name} {value.shape} is not {shape}")
            setattr(out, name, value)
        out.l2_, out.valid_nll_ = data.get("l2"), data.get("fit_valid_nll")
        return out


def _nll(
    params: list[torch.Tensor],
    base: torch.Tensor,
    bins: torch.Tensor,
    value_bins: torch.Tensor,
    target: torch.Tensor,
    z: torch.Tensor,
) -> torch.Tensor:
    """Mean −log P(target) of the tilted rows (float32; rows at once); the last column of
    each shift is the zero of a row without context or a member without a value."""
    A, a, B, b = params
    zero = torch.zeros(len(z), 1)
    s = torch.cat([z @ A.T + a, zero], dim=1)  # (N, bins + 1)
    tilted = base + torch.gather(s, 1, bins)
    if len(b):
        tilted = tilted + torch.cat([z @ B.T + b, zero], dim=1)[:, value_bins]
    picked = tilted.gather(1, target.unsqueeze(1)).squeeze(1)
    return (torch.logsumexp(tilted, dim=1) - picked).mean()
