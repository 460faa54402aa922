"""Functions inside the LSTM NSLM: a class's micro-model with the functions mixed in.

At a position where functions fire, class c's micro-model becomes

    P'_MM(w | c, h) = W_c · P_fun(w | w ∈ V_c) + (1 − W_c) · P_MM(w | c, w_prev)

P_fun the functions' distribution over strings (:meth:`FunctionModel.mixture`) restricted to
the members of V_c and renormalised there, W_c their weight (Σ π̃) where that restriction
keeps any mass and 0 where it keeps none. Summed over V_c, P'_MM is W_c + (1 − W_c) = 1, so
the NSLM of paper Eq. 4, P(w | h) = P(c | h) · P'_MM(w | c), stays a distribution. Where no
function fires, P'_MM = P_MM.

The functions read the split's tokens as the model reads them (``itos`` of its ids: an
out-of-vocabulary quantity is ``<unk>``, and no function fires on it), one document per
article.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nslm.data.corpus import Split
from nslm.data.numbers import NUMBER_CLASSES
from nslm.functions.model import FunctionModel

FUNCTIONS_COLUMN = "NSLM+functions"


def split_documents(split: Split, itos: Sequence[str]) -> tuple[list[list[str]], np.ndarray]:
    """The split's tokens as documents (one per article) and each position's offset in its
    document."""
    ids = split.token_ids
    starts = np.flatnonzero(np.r_[True, np.diff(split.article_ids) != 0])
    ends = np.r_[starts[1:], len(ids)]
    documents = [[itos[i] for i in ids[s:e].tolist()] for s, e in zip(starts, ends, strict=True)]
    first = np.repeat(starts, ends - starts)
    return documents, np.arange(len(ids)) - first


class FunctionMicroModel:
    """Class c's micro-model ``base`` with ``functions`` mixed in (the module docstring); any
    other attribute is the base model's."""

    def __init__(self, base: Any, functions: FunctionModel, itos: Sequence[str]) -> None:
        self.base = base
        self.functions = functions
        self.itos = itos
        self.members = {s: k for k, s in enumerate(base.cls.candidates.strings)}
        self._documents: tuple[int, list[list[str]], np.ndarray] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def _split_documents(self, split: Split) -> tuple[list[list[str]], np.ndarray, np.ndarray]:
        key = id(split.token_ids)
        if self._documents is None or self._documents[0] != key:
            documents, offsets = split_documents(split, self.itos)
            self._documents = (key, documents, offsets)
        _, documents, offsets = self._documents
        index = np.repeat(np.arange(len(documents)), [len(d) for d in documents])
        return documents, offsets, index

    def weight_and_probs(self, tokens: Sequence[str], i: int) -> tuple[float, dict[str, float]]:
        """(W_c, P_fun restricted to V_c) at ``tokens[i]``; (0, {}) where no function fires or
        none of their results is a member of V_c."""
        weight, probs = self.functions.mixture(self.functions.firings(tokens, i))
        kept = {w: p for w, p in probs.items() if w in self.members}
        total = sum(kept.values())
        if not kept or total <= 0:
            return 0.0, {}
        return weight, {w: p / total for w, p in kept.items()}

    def log_prob_targets(self, split: Split, features: Any = None) -> np.ndarray:
        """The base model's per-position log P_MM(w_t | c_t), with the functions mixed in
        where they fire (NaN where the base has none)."""
        out = self.base.log_prob_targets(split, features)
        documents, offsets, index = self._split_documents(split)
        for t in np.flatnonzero(np.isfinite(out)):
            tokens = documents[index[t]]
            weight, probs = self.weight_and_probs(tokens, int(offsets[t]))
            if weight > 0:
                mixed = weight * probs.get(tokens[offsets[t]], 0.0) + (1 - weight) * np.exp(out[t])
                out[t] = np.log(mixed)
        return out

    def log_prob_row(self, tokens: Sequence[str], i: int, base_row: np.ndarray) -> np.ndarray:
        """log P'_MM over V_c (in ``base.cls.candidates`` order) at ``tokens[i]``, from the
        base model's row ``base_row`` there: the whole distribution, for sums and
        prediction."""
        weight, probs = self.weight_and_probs(tokens, i)
        if weight <= 0:
            return base_row
        function = np.zeros(len(base_row))
        for w, p in probs.items():
            function[self.members[w]] = p
        return np.log(weight * function + (1 - weight) * np.exp(base_row))


def with_functions(
    micro: dict[str, Any], functions: FunctionModel, itos: Sequence[str], classes: Sequence[str]
) -> dict[str, Any]:
    """``micro`` (class → micro-model) with the functions mixed into the classes named."""
    return {
        name: model
        if name not in classes or model is None
        else FunctionMicroModel(model, functions, itos)
        for name, model in micro.items()
    }


def register() -> None:
    """Make "NSLM+functions" a column of the open-vocabulary evaluation, read from the
    micro-models given to it as ``"functions"``."""
    from nslm.evaluation.open_report import register_column

    register_column(FUNCTIONS_COLUMN, "functions")


def mix_into_distribution(
    full: Any,
    functions: FunctionModel,
    prompts: Sequence[Sequence[str]],
    itos: Sequence[str],
    class_names: Sequence[str],
) -> None:
    """The functions mixed into a :class:`~nslm.scores.distribution.FullDistribution` at the
    end of each prompt (``prompts[n]``: row n's corpus tokens), class by class as
    :class:`FunctionMicroModel` mixes them: within each number class c, P'(w | c) =
    W_c · P_fun(w | w ∈ V_c) + (1 − W_c) · P(w | c). In place; ``source[c]`` says so."""
    numbers = set(NUMBER_CLASSES)
    firings = [functions.firings(tokens, len(tokens)) for tokens in prompts]
    for c, (ids, logp) in full.within.items():
        if class_names[c] not in numbers:
            continue
        members = {itos[i]: k for k, i in enumerate(ids.tolist())}
        for row, fired in enumerate(firings):
            weight, probs = functions.mixture(fired)
            kept = {w: p for w, p in probs.items() if w in members}
            total = sum(kept.values())
            if weight <= 0 or total <= 0:
                continue
            vector = np.zeros(len(members))
            for w, p in kept.items():
                vector[members[w]] = p / total
            with np.errstate(divide="ignore"):
                logp[row] = np.log(weight * vector + (1 - weight) * np.exp(logp[row]))
            full.source[c] = f"{full.source.get(c, 'micro')} + functions"
