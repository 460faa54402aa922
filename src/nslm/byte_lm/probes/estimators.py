"""The probes as scikit-learn estimators, saved as JSON (never pickle).

- :class:`L1Probe`: standardise the neurons, then an L1-penalised logistic regression; two
  classes give one classifier, more give one binary classifier per class (one-vs-rest, as
  Carvalho's POS probes), each optionally restricted to a few neurons (the top-k tables).
- :class:`NeuronThreshold`: one neuron, one threshold fitted on train (the sentiment neuron).
- :func:`fit_on_dev`: the regularisation C of an :class:`L1Probe` chosen on a dev split.

Standardising first is what makes the L1 fit fast (liblinear on raw cell states took minutes
per C) and makes |weight| comparable across neurons, which the "best neuron" relies on.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from nslm.errors import NslmError
from nslm.files.atomic import write_json_atomic

C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0)


def _l1_logistic(C: float, max_iter: int) -> LogisticRegression:
    # l1_ratio=1 is the pure L1 penalty (scikit-learn 1.8 deprecates penalty="l1")
    return LogisticRegression(
        C=C, l1_ratio=1.0, solver="liblinear", tol=1e-3, max_iter=max_iter, random_state=0
    )


class L1Probe(ClassifierMixin, BaseEstimator):
    """Standardised features → L1 logistic regression (binary, or one-vs-rest per class).

    ``neurons``: None to use every feature, or per classifier (one for two classes, one per
    class otherwise) the feature indices it may use; the weights of the others stay 0.
    Weights are on the standardised scale, so ``|coef_|`` ranks neurons.
    """

    def __init__(
        self, C: float = 0.1, neurons: Sequence[Sequence[int]] | None = None, max_iter: int = 200
    ) -> None:
        self.C = C
        self.neurons = neurons
        self.max_iter = max_iter

    def fit(self, X: np.ndarray, y: np.ndarray) -> L1Probe:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise NslmError(f"a probe needs two labels at least; the training data has {y[:1]}")
        self.mean_ = X.mean(axis=0)
        std = X.std(axis=0)
        self.scale_ = np.where(std > 1e-12, std, 1.0)  # a constant neuron stays 0
        Z = (X - self.mean_) / self.scale_
        targets = [self.classes_[1]] if len(self.classes_) == 2 else list(self.classes_)
        n_features = X.shape[1]
        self.coef_ = np.zeros((len(targets), n_features))
        self.intercept_ = np.zeros(len(targets))
        with warnings.catch_warnings():
            # a capped fit is still a fit; the dev/test accuracy says how good it is
            warnings.simplefilter("ignore", ConvergenceWarning)
            for row, target in enumerate(targets):
                cols = np.arange(n_features) if self.neurons is None else self.neurons[row]
                cols = np.asarray(cols, dtype=np.int64)
                binary = (y == target).astype(np.int64)
                if binary.min() == binary.max():  # a class absent from this sample
                    self.intercept_[row] = 10.0 if binary[0] else -10.0
                    continue
                Zc = Z if self.neurons is None else Z[:, cols]  # no copy for all neurons
                model = _l1_logistic(self.C, self.max_iter).fit(Zc, binary)
                self.coef_[row, cols] = model.coef_[0]
                self.intercept_[row] = model.intercept_[0]
        return self

    def _standardised(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.mean_) / self.scale_

    def decision_function(self, X: np.ndarray) -> np.ndarray:
        """(N,) scores for two classes, else (N, n_classes) one-vs-rest scores."""
        scores = self._standardised(X) @ self.coef_.T + self.intercept_
        return scores[:, 0] if len(self.classes_) == 2 else scores

    def predict(self, X: np.ndarray) -> np.ndarray:
        scores = self.decision_function(X)
        if len(self.classes_) == 2:
            return self.classes_[(scores > 0).astype(np.int64)]
        # the most probable class, as Carvalho's results take it. Carvalho's background also
        # writes the argmax of L2-normalised scores (w/‖w‖, b/‖w‖); with 1–3 neurons that
        # rule let rare tags with one sharp neuron win everywhere (k=1: 0.01 vs 0.19 here)
        return self.classes_[np.argmax(scores, axis=1)]

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        """P(class) of each binary classifier (one-vs-rest rows need not sum to 1)."""
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X)))
        return np.stack([1 - p, p], axis=1) if len(self.classes_) == 2 else p

    # -- what the probe found ------------------------------------------------------------------

    def weights(self, label=None) -> np.ndarray:
        """The weights of ``label``'s classifier (the only one for two classes)."""
        if len(self.classes_) == 2 or label is None:
            return self.coef_[0]
        return self.coef_[self._row(label)]

    def _row(self, label) -> int:
        where = np.flatnonzero(self.classes_ == label)
        if not len(where):
            raise NslmError(f"the probe has no class {label!r}")
        return int(where[0])

    def top_neurons(self, k: int, label=None) -> np.ndarray:
        """The ``k`` neurons with the largest |weight| in ``label``'s classifier."""
        return np.argsort(-np.abs(self.weights(label)), kind="stable")[:k]

    def n_nonzero(self) -> int:
        return int(np.count_nonzero(self.coef_))

    def restricted(self, k: int) -> L1Probe:
        """An unfitted probe whose classifiers each use their own top ``k`` neurons."""
        return L1Probe(
            C=self.C,
            neurons=[np.argsort(-np.abs(w), kind="stable")[:k].tolist() for w in self.coef_],
            max_iter=self.max_iter,
        )

    # -- JSON ------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "kind": "L1Probe",
            "params": {"C": self.C, "neurons": _lists(self.neurons), "max_iter": self.max_iter},
            "classes": self.classes_.tolist(),
            "mean": self.mean_.tolist(),
            "scale": self.scale_.tolist(),
            "coef": self.coef_.tolist(),
            "intercept": self.intercept_.tolist(),
        }

    @classmethod
    def from_json(cls, data: dict) -> L1Probe:
        probe = cls(**data["params"])
        probe.classes_ = np.asarray(data["classes"])
        probe.mean_ = np.asarray(data["mean"], dtype=np.float64)
        probe.scale_ = np.asarray(data["scale"], dtype=np.float64)
        probe.coef_ = np.asarray(data["coef"], dtype=np.float64)
        probe.intercept_ = np.asarray(data["intercept"], dtype=np.float64)
        return probe


class NeuronThreshold(ClassifierMixin, BaseEstimator):
    """One neuron alone: label 1 on one side of a threshold, both fitted on train.

    ``fit`` tries every midpoint between sorted training values and both directions, and
    keeps the most accurate on the training data; test data never touches the threshold.
    """

    def __init__(self, neuron: int = 0) -> None:
        self.neuron = neuron

    def fit(self, X: np.ndarray, y: np.ndarray) -> NeuronThreshold:
        x = np.asarray(X, dtype=np.float64)[:, self.neuron]
        y = np.asarray(y).astype(np.int64)
        self.classes_ = np.array([0, 1])
        order = np.argsort(x, kind="stable")
        xs, ys = x[order], y[order]
        # a threshold after position i predicts 1 above it: correct = zeros up to i + ones after
        zeros_below = np.concatenate([[0], np.cumsum(ys == 0)])
        ones_above = ys.sum() - np.concatenate([[0], np.cumsum(ys == 1)])
        above = zeros_below + ones_above  # accuracy * N when "above → 1", cut before index i
        below = len(ys) - above  # the same cut with the direction flipped
        lo = np.concatenate([[xs[0] - 1.0], xs])  # the values on either side of each cut
        hi = np.concatenate([xs, [xs[-1] + 1.0]])
        mid = lo + (hi - lo) / 2
        # two neighbouring floats have no float between them (0 and 5e-324): the cut is then
        # the lower value for "above → 1" (x > t) and the upper one for "below → 1" (x < t)
        cuts_up = np.where((lo <= mid) & (mid < hi), mid, lo)
        cuts_down = np.where((lo < mid) & (mid <= hi), mid, hi)
        # a cut between two equal values is not a cut; keep only real ones
        real = np.concatenate([[True], xs[1:] > xs[:-1], [True]])
        best_up, best_down = (
            np.argmax(np.where(real, above, -1)),
            np.argmax(np.where(real, below, -1)),
        )
        if above[best_up] >= below[best_down]:
            self.threshold_, self.sign_ = float(cuts_up[best_up]), 1
        else:
            self.threshold_, self.sign_ = float(cuts_down[best_down]), -1
        self.train_accuracy_ = max(above[best_up], below[best_down]) / len(ys)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        x = np.asarray(X, dtype=np.float64)[:, self.neuron]
        return (self.sign_ * (x - self.threshold_) > 0).astype(np.int64)

    def to_json(self) -> dict:
        return {
            "kind": "NeuronThreshold",
            "params": {"neuron": int(self.neuron)},
            "threshold": self.threshold_,
            "sign": self.sign_,
            "train_accuracy": self.train_accuracy_,
        }

    @classmethod
    def from_json(cls, data: dict) -> NeuronThreshold:
        probe = cls(**data["params"])
        probe.classes_ = np.array([0, 1])
        probe.threshold_, probe.sign_ = float(data["threshold"]), int(data["sign"])
        probe.train_accuracy_ = data["train_accuracy"]
        return probe


def _lists(neurons: Sequence[Sequence[int]] | None) -> list[list[int]] | None:
    return None if neurons is None else [[int(i) for i in row] for row in neurons]


def fit_on_dev(
    X_train: np.ndarray,
    y_train: np.ndarray,
    X_dev: np.ndarray,
    y_dev: np.ndarray,
    grid: Sequence[float] = C_GRID,
) -> tuple[L1Probe, dict[float, float]]:
    """The :class:`L1Probe` of ``grid`` most accurate on dev (fitted on train only), and the
    dev accuracy of every C; ties go to the smaller C, the sparser probe."""
    best, scores = None, {}
    for C in sorted(grid):
        probe = L1Probe(C=C).fit(X_train, y_train)
        scores[C] = float(probe.score(X_dev, y_dev))
        if best is None or scores[C] > scores[best.C]:
            best = probe
    return best, scores


# -- files -----------------------------------------------------------------------------------

KINDS = {"L1Probe": L1Probe, "NeuronThreshold": NeuronThreshold}


def save_probe(path: Path | str, probe: L1Probe | NeuronThreshold, **info) -> None:
    """``probe`` as JSON, with any extra ``info`` (what it was trained on) beside it."""
    write_json_atomic(Path(path), {**probe.to_json(), "info": info}, indent=None)


def load_probe(path: Path | str) -> L1Probe | NeuronThreshold:
    path = Path(path)
    if not path.is_file():
        raise NslmError(f"no probe file: {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("kind") not in KINDS:
        raise NslmError(f"{path} is not a probe (kind {data.get('kind')!r})")
    return KINDS[data["kind"]].from_json(data)
