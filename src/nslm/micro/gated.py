"""A gated mixture of micro-models: the context picks how to spread a class's probability.

The paper's future work ("the use of the full preceding context encoded as the hidden state
of a NNLM or using micro-models with multiple PDFs to allocate probability within a word
class"), as an estimator:

    P(w | c, ctx, h) = Σ_k g_k(h) · P_k(w | c, ctx),      g(h) = softmax(W·h + b)

Each component P_k is a distribution over V_c (a fitted micro-model of paper Eq. 1, or a
part of one: :class:`Restricted`), so the mixture is one too, and every component stays as
readable as a plain micro-model; the gate's weights say which one the context chose.

Fitting (:meth:`GatedMixture.fit`) needs, for the class's positions of a split, the LM's
hidden state h_t (frozen) and each component's log-probability of the target; the mean
negative log-likelihood with an L2 penalty λ‖W‖² is minimised by L-BFGS with its exact
gradient, for each λ of a grid, and the λ best on valid is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.optimize import minimize

from nslm.errors import NslmError
from nslm.micro.history import Context
from nslm.micro.logspace import log_normalise, logsumexp
from nslm.micro.model import MicroModel, metric_matrix

L2_GRID = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
L2_WIDEST = (1e-8, 1e3)  # how far a choice at a grid's edge widens it


def as_rows(H: Any) -> np.ndarray:
    """float64 rows from a numpy array or a torch tensor (the scoring pass's features)."""
    if hasattr(H, "detach"):
        H = H.detach().cpu().numpy()
    return np.asarray(H, dtype=np.float64)


def standard_scale(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The train rows' mean and scale per unit, which a state is standardised with before
    the gate or the shift reads it (a unit that never moves keeps scale 1e-6)."""
    return H.mean(axis=0), np.maximum(H.std(axis=0), 1e-6)


# A standardised unit is read as at most this many train standard deviations from its mean.
# A unit that barely moved on a class's few train rows (a scale of 1e-5) moves by 0.1 on a
# new prompt: unbounded, that read as z = 10^4 and tilted a <range> by e^8000.
Z_LIMIT = 8.0


def standardise(H: Any, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(H − mean) / scale per unit, bounded to ±``Z_LIMIT``: what the gate and the shift
    read, at fitting and at scoring alike."""
    return np.clip((as_rows(H) - mean) / scale, -Z_LIMIT, Z_LIMIT)


class GatedMixture:
    """The gate of a mixture of K components over D-dimensional hidden states.

    ``W`` (K, D) and ``b`` (K,) after :meth:`fit`; a gate with W = 0 and b = one-hot·∞ is
    exactly one component (``pinned``). The gate reads h standardised with the train rows'
    mean and scale (``mean``, ``scale``): an LSTM's units differ in spread by orders of
    magnitude, and one L2 weight then fits them all (and L-BFGS converges in far fewer steps).
    """

    def __init__(self, n_components: int, dim: int, l2_grid: Sequence[float] = L2_GRID) -> None:
        if n_components < 1 or dim < 1:
            raise NslmError("a gated mixture needs at least one component and one dimension")
        self.n_components, self.dim = int(n_components), int(dim)
        self.l2_grid = tuple(float(x) for x in l2_grid)
        self.W = np.zeros((self.n_components, self.dim))
        self.b = np.zeros(self.n_components)
        self.mean, self.scale = np.zeros(self.dim), np.ones(self.dim)

    @classmethod
    def pinned(cls, n_components: int, dim: int, component: int) -> GatedMixture:
        """A gate that always picks ``component`` (W = 0, b = 0 there and −inf elsewhere)."""
        gate = cls(n_components, dim)
        gate.b = np.full(n_components, -np.inf)
        gate.b[component] = 0.0
        return gate

    # -- the mixture -------------------------------------------------------------------------

    def log_gate(self, H: np.ndarray) -> np.ndarray:
        """log g(h) for each row of H (N, D): (N, K)."""
        H = standardise(H, self.mean, self.scale)
        return log_normalise(H @ self.W.T + self.b, axis=1)

    def log_prob(self, H: np.ndarray, component_log_probs: np.ndarray) -> np.ndarray:
        """log Σ_k g_k(h) P_k for rows H (N, D) and component log-probs (N, K, …): the
        trailing axes (e.g. every w of V_c) are kept, so (N, K, |V_c|) gives (N, |V_c|)."""
        logp = np.asarray(component_log_probs, dtype=np.float64)
        gate = self.log_gate(H).reshape(logp.shape[:2] + (1,) * (logp.ndim - 2))
        with np.errstate(invalid="ignore"):  # −inf + −inf in a pinned gate is −inf
            return logsumexp(gate + logp, axis=1)

    # -- fitting -----------------------------------------------------------------------------

    def _objective(
        self, theta: np.ndarray, H: np.ndarray, L: np.ndarray, l2: float
    ) -> tuple[float, np.ndarray]:
        K, D = self.n_components, self.dim
        W, b = theta[: K * D].reshape(K, D), theta[K * D :]
        a = log_normalise(H @ W.T + b, axis=1)  # log g
        joint = a + L
        nll = -logsumexp(joint, axis=1)
        r = np.exp(log_normalise(joint, axis=1))  # responsibilities: each component posterior
        d_logits = (np.exp(a) - r) / len(H)  # ∂ mean NLL / ∂ (W h + b)
        grad_W = d_logits.T @ H + 2 * l2 * W
        grad_b = d_logits.sum(axis=0)
        loss = float(nll.mean() + l2 * np.sum(W * W))
        return loss, np.concatenate([grad_W.ravel(), grad_b])

    def fit(
        self,
        H_train: np.ndarray,
        L_train: np.ndarray,
        H_valid: np.ndarray,
        L_valid: np.ndarray,
        max_iter: int = 200,
    ) -> GatedMixture:
        """Fit W, b on train rows (h_t, log P_k(w_t)) for every λ of the grid; keep the λ
        whose mixture has the lowest mean NLL on valid (``valid_nll_by_l2``)."""
        H, L = self._checked(H_train, L_train)
        Hv, Lv = self._checked(H_valid, L_valid)
        self.mean, self.scale = standard_scale(H)
        H = standardise(H, self.mean, self.scale)  # the objective sees what log_gate sees
        L, Lv = np.maximum(L, -1e30), np.maximum(Lv, -1e30)  # a zero component stays finite
        start = np.zeros(self.n_components * (self.dim + 1))
        start[self.n_components * self.dim :] = _log_prior(L)  # begin at the best fixed mix
        self.valid_nll_by_l2: dict[float, float] = {}
        fits: dict[float, tuple[float, np.ndarray, bool, int]] = {}
        grid = sorted(self.l2_grid)
        while True:
            for l2 in grid:
                if l2 in fits:
                    continue
                res = minimize(
                    self._objective,
                    start,
                    args=(H, L, l2),
                    jac=True,
                    method="L-BFGS-B",
                    options={"maxiter": max_iter},
                )
                self._set(res.x)
                valid = float(-self.log_prob(Hv, Lv).mean())
                self.valid_nll_by_l2[l2] = valid
                fits[l2] = (valid, res.x.copy(), bool(res.success), int(res.nit))
            best = min(grid, key=lambda l2: fits[l2][0])
            # a choice at an edge of the grid is not an estimate: widen it by a decade there
            if best == grid[-1] and best * 10 <= L2_WIDEST[1]:
                grid.append(best * 10)
            elif best == grid[0] and len(grid) > 1 and best / 10 >= L2_WIDEST[0]:
                grid.insert(0, best / 10)
            else:
                break
        self.l2_grid = tuple(grid)
        self.l2_ = best
        self.valid_nll_, theta, self.converged_, self.iterations_ = fits[best]
        self._set(theta)
        return self

    @property
    def l2_at_edge(self) -> bool:
        """Whether the chosen L2 weight is still at an edge of the (widened) grid."""
        return self.l2_ in (min(self.l2_grid), max(self.l2_grid))

    def _set(self, theta: np.ndarray) -> None:
        K, D = self.n_components, self.dim
        self.W, self.b = theta[: K * D].reshape(K, D).copy(), theta[K * D :].copy()

    def _checked(self, H: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        H, L = np.asarray(H, dtype=np.float64), np.asarray(L, dtype=np.float64)
        if H.ndim != 2 or H.shape[1] != self.dim or L.shape != (len(H), self.n_components):
            raise NslmError(
                f"expected H (N, {self.dim}) and log-probs (N, {self.n_components});"
                f" got {H.shape} and {L.shape}"
            )
        if len(H) == 0:
            raise NslmError("no rows to fit the gate on")
        return H, L

    # -- parameters --------------------------------------------------------------------------

    def get_params(self) -> dict[str, Any]:
        return {
            "n_components": self.n_components,
            "dim": self.dim,
            "l2_grid": list(self.l2_grid),
            "l2": getattr(self, "l2_", None),
            "valid_nll": getattr(self, "valid_nll_", None),
            "converged": getattr(self, "converged_", None),
            "iterations": getattr(self, "iterations_", None),
        }

    def tensors(self) -> dict[str, np.ndarray]:
        """W and b, for safetensors (the JSON holds :meth:`get_params`)."""
        return {
            name: getattr(self, name).astype(np.float32) for name in ("W", "b", "mean", "scale")
        }

    @classmethod
    def from_saved(cls, params: dict[str, Any], tensors: dict[str, np.ndarray]) -> GatedMixture:
        gate = cls(params["n_components"], params["dim"], params["l2_grid"])
        W, b = np.asarray(tensors["W"], np.float64), np.asarray(tensors["b"], np.float64)
        if W.shape != (gate.n_components, gate.dim) or b.shape != (gate.n_components,):
            raise NslmError(f"gate tensors {W.shape}, {b.shape} do not fit {params}")
        gate.W, gate.b = W, b
        for name in ("mean", "scale"):
            value = np.asarray(tensors[name], np.float64)
            if value.shape != (gate.dim,):
                raise NslmError(f"gate tensor {name} {value.shape} does not fit {params}")
            setattr(gate, name, value)
        gate.l2_, gate.valid_nll_ = params.get("l2"), params.get("valid_nll")
        gate.converged_, gate.iterations_ = params.get("converged"), params.get("iterations")
        return gate


def _log_prior(L: np.ndarray, steps: int = 50) -> np.ndarray:
    """log of the best context-free mixing weights (EM on the rows' component log-probs):
    the gate starts where the plain mixture ends."""
    log_w = np.full(L.shape[1], -np.log(L.shape[1]))
    for _ in range(steps):
        r = np.exp(log_normalise(log_w + L, axis=1))
        log_w = np.log(np.maximum(r.mean(axis=0), 1e-12))
    return log_w - log_w.max()


# which metric values a restricted component keeps: m(w, w_prev) against the context
RESTRICTIONS = {
    "after": lambda m: m > 0,  # a later year, a larger number
    "before": lambda m: m < 0,
    "other": lambda m: m != 0,  # anything but the previous value or place itself
}


def compares_with_context(model: MicroModel) -> bool:
    """Whether the model's metric measures a member against the context (``diff``,
    ``euclidean``): only then has "later", "earlier" or "other than" a meaning."""
    metric = model.metric
    return metric.kind == "continuous" and bool(metric.needs & {"prev_value", "prev_coords"})


class Restricted:
    """A micro-model restricted to the members of V_c whose metric against the context
    passes a test (:data:`RESTRICTIONS`), renormalised over them:

        P_k(w | ctx) = P_MM(w | ctx) · [test(m(w, w_prev))] / Σ_{w'} P_MM(w' | ctx) · [test(…)]

    A row without context, or where no member passes, keeps the plain micro-model: every row
    stays a distribution over V_c. "died in" can then pick the ``after`` part of the year
    model, a list of places the ``other`` part of the place model.
    """

    def __init__(self, model: MicroModel, keep: str) -> None:
        if keep not in RESTRICTIONS:
            raise NslmError(f"unknown restriction {keep!r}; choose {', '.join(RESTRICTIONS)}")
        if not compares_with_context(model):
            raise NslmError(
                f"a restriction needs a metric against the context (diff, "
                f"euclidean), not {model.metric.name!r}"
            )
        self.model, self.keep = model, keep

    @property
    def name(self) -> str:
        return f"{self.model.metric.name}+{self.model.pdf.name} ({self.keep})"

    def log_prob(self, ctx: Context, base: np.ndarray | None = None) -> np.ndarray:
        """(B, |V_c|) log-probabilities, each row a distribution over V_c; ``base``: the
        model's own log-probabilities at ``ctx`` when the caller has them (not modified)."""
        out = self.model.log_prob(ctx) if base is None else base.copy()
        ok = np.flatnonzero(self.model.metric.available(ctx))
        if not len(ok):
            return out
        values = metric_matrix(self.model.metric, self.model.cls, ctx.rows(ok))
        passes = RESTRICTIONS[self.keep](values)
        some = passes.any(axis=1)
        rows = ok[some]
        kept = np.where(passes[some], out[rows], -np.inf)
        out[rows] = log_normalise(kept, axis=1)
        return out
