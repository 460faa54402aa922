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


def within_class(
    mixture: tuple[float, dict[str, float]], members: dict[str, int]
) -> tuple[float, dict[str, float]]:
    """(W_c, P_fun restricted to the ``members`` of V_c and renormalised there) from the
    functions' ``mixture`` (W, P_fun); (0, {}) where none of their results is a member."""
    weight, probs = mixture
    kept = {w: p for w, p in probs.items() if w in members}
    total = sum(kept.values())
    if weight <= 0 or total <= 0:
        return 0.0, {}
    return weight, {w: p / total for w, p in kept.items()}


def mixed_row(
    weight: float, probs: dict[str, float], members: dict[str, int], row: np.ndarray
) -> np.ndarray:
    """log(W · P_fun + (1 − W) · exp(row)) over V_c (``members``: string → index in ``row``)."""
    function = np.zeros(len(row))
    for w, p in probs.items():
        function[members[w]] = p
    with np.errstate(divide="ignore"):
        return np.log(weight * function + (1 - weight) * np.exp(row))


class FunctionMicroModel:
    """Class c's micro-model ``base`` with ``functions`` mixed in (the module docstring); any
    other attribute is the base model's."""

    def __init__(self, base: Any, functions: FunctionModel, itos: Sequence[str]) -> None:
        self.base = base
        self.functions = functions
        self.itos = itos
        self.members = {s: k for k, s in enumerate(base.cls.candidates.strings)}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)

    def weight_and_probs(self, tokens: Sequence[str], i: int) -> tuple[float, dict[str, float]]:
        """(W_c, P_fun restricted to V_c) at ``tokens[i]``; (0, {}) where no function fires or
        none of their results is a member of V_c."""
        mixture = self.functions.mixture(self.functions.firings(tokens, i))
        return within_class(mixture, self.members)

    def log_prob_targets(self, split: Split, features: Any = None) -> np.ndarray:
        """The base model's per-position log P_MM(w_t | c_t), with the functions mixed in
        where they fire (NaN where the base has none)."""
        out = self.base.log_prob_targets(split, features)
        documents, offsets = split_documents(split, self.itos)
        index = np.repeat(np.arange(len(documents)), [len(d) for d in documents])
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
        return mixed_row(weight, probs, self.members, base_row)


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
    mixtures = [functions.mixture(functions.firings(tokens, len(tokens))) for tokens in prompts]
    for c, (ids, logp) in full.within.items():
        if class_names[c] not in numbers:
            continue
        members = {itos[i]: k for k, i in enumerate(ids.tolist())}
        mixed = False
        for row, mixture in enumerate(mixtures):
            weight, probs = within_class(mixture, members)
            if weight > 0:
                logp[row] = mixed_row(weight, probs, members, logp[row])
                mixed = True
        if mixed:  # the class's model, named once however many prompts the functions reach
            full.source[c] = f"{full.source.get(c, 'micro')} + functions"
