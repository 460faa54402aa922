"""Where P(c | h), the neural factor of the NSLM (paper Eq. 4), comes from: two strategies.

* :class:`HNLMFactor`: the HNLM head's top-level softmax over (non-class words ∪ class
  tags), Eq. 3's first factor. A class without a micro-model keeps Eq. 3's neural
  within-class softmax.
* :class:`SingleTaskFactor`: a run trained with the NNLM head only, as the paper's AWD-LSTM
  experiment (Table 8, "a single-task configuration ... [P(c)] was calculated by summing all
  probability assigned to tokens in V_C"):

      P(c | h)        = Σ_{w ∈ V_c} π(c | w) · P_NNLM(w | h)
      P_NSLM(w_t | h) = P(c_t | h) · P_MM(w_t | c_t)        at class positions  (Eq. 4)
      P_NSLM(w_t | h) = π(0 | w_t) · P_NNLM(w_t | h)        at word positions   (Eq. 2)

  π(c | w) is the share of type w's training occurrences annotated with class c (add-α
  smoothed over the roles w can take: the classes whose V_c holds it, and "plain word" for a
  type outside every V_c or seen as a plain word in training). Our V_c overlap (``<range>``
  and ``<convert>`` hold every number type), so bare sums would count a number's probability
  once per class and the NSLM would not sum to 1; π splits each type's NNLM probability among
  its roles, so the parts add up to P_NNLM exactly. For a type of one class only (every
  place, most numbers) π = 1 and P(c | h) is the paper's plain sum over V_c.

Both give every part the scoring pass asks for (:data:`PARTS`): ``nnlm`` (Eq. 2), ``hnlm``
(Eq. 3; HNLM runs only), ``top`` (log P(c_t | h) at class positions, the word's top-level
score at word positions), ``neural`` (the score of a class position whose class has no
micro-model: Eq. 3 for the HNLM, the NNLM's own share π(c | w) · P_NNLM(w | h) otherwise)
and, from an HNLM with a shared top level, ``class_mass`` (log Σ_c P(c | h)); and the full
next-token distribution.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nslm.errors import NslmError
from nslm.micro.model import MicroModel
from nslm.models.lm import PARTS as MODEL_PARTS
from nslm.models.lm import LanguageModel
from nslm.scores.distribution import FullDistribution, full_distribution

PARTS = (*MODEL_PARTS, "neural")  # the model's own parts, and the uncovered-class score
ALPHA = 0.1  # add-α for π(c | w): a (type, class) pair unseen in training keeps some mass
ROWS_PER_CHUNK = 256  # rows of the (N, V) float64 probability matrix held at once (~70 MB)


def micro_part(
    mm: MicroModel, members: np.ndarray, rows: np.ndarray
) -> tuple[tuple[np.ndarray, np.ndarray], str]:
    """Class c's within-class part from its micro-model (Eq. 4's P_MM rows over V_c) and
    the name of the {metric, PDF} pair that produced it."""
    if not np.array_equal(mm.cls.candidates.vocab_ids, members):
        raise NslmError(f"<{mm.cls.name}>: the micro-model's V_c differs from the LM's")
    return (members, rows), mm.label


class ClassFactor(ABC):
    """How a run turns backbone features into the parts of Eq. 4 (see the module docstring)."""

    parts: tuple[str, ...]  # the parts this run can give

    @property
    @abstractmethod
    def tagged(self) -> np.ndarray:
        """(C,) bool: the classes a micro-model can fire on (those with a tag / non-empty V_c)."""

    @abstractmethod
    def target_scores(
        self, model: LanguageModel, h: Tensor, targets: Tensor, classes: Tensor, parts: tuple
    ) -> dict[str, Tensor]:
        """float64 log-probabilities of the target at each row, for each asked part."""

    @abstractmethod
    def distribution(
        self,
        model: LanguageModel,
        h: Tensor,
        micro: dict[str, MicroModel],
        class_names: tuple[str, ...],
        micro_rows: dict[str, np.ndarray],
    ) -> FullDistribution:
        """The NSLM's distribution over every type for features ``h`` (N, D);
        ``micro_rows[class]`` is log P_MM over V_c for each of the N rows."""

    def check(self, parts: tuple[str, ...]) -> None:
        missing = [p for p in parts if p not in self.parts]
        if missing:
            raise NslmError(f"this model cannot score {', '.join(missing)} (it has {self.parts})")


class HNLMFactor(ClassFactor):
    """P(c | h) from the HNLM head's top level (a run with NNLM and HNLM heads)."""

    def __init__(self, model: LanguageModel) -> None:
        self.head = model.heads["hnlm"]
        self.parts = (*(("nnlm",) if "nnlm" in model.heads else ()), "hnlm", "top", "neural")
        if self.head.shared:  # free in the shared top level's pass (models.shared_top)
            self.parts += ("class_mass",)

    @property
    def tagged(self) -> np.ndarray:
        return self.head.layout.top_of_tag >= 0

    def target_scores(self, model, h, targets, classes, parts):
        # ``neural`` is Eq. 3 itself: the HNLM's score of the (class, word) pair
        asked = tuple(dict.fromkeys("hnlm" if p == "neural" else p for p in parts))
        got = {k: v.double() for k, v in model.target_log_probs(h, targets, classes, asked).items()}
        got["neural"] = got.get("hnlm")
        return {p: got[p] for p in parts}

    def distribution(self, model, h, micro, class_names, micro_rows):
        layout = self.head.layout
        top = self.head.top.log_prob(h).double().numpy()
        within: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        source: dict[int, str] = {}
        for c in np.flatnonzero(self.tagged).tolist():
            name, members = class_names[c], layout.members[c]
            if name in micro:
                within[c], source[c] = micro_part(micro[name], members, micro_rows[name])
            else:
                within[c] = (members, self.head.within_log_dist(h, c).double().numpy())
                source[c] = "neural"
        return full_distribution(top, layout.top_of_word, layout.top_of_tag, within, source)


@dataclass
class RoleShares:
    """V_c of every class and the role shares π(c | w) of every type (rows sum to 1)."""

    members: list[np.ndarray]  # members[c]: V_c's type ids, sorted; members[0] is empty
    roles: np.ndarray  # (V, C) float64, π(c | w); c = 0 is "plain word"

    @property
    def tagged(self) -> np.ndarray:
        return np.array([c > 0 and len(m) > 0 for c, m in enumerate(self.members)])

    @property
    def class_types(self) -> np.ndarray:
        """Type ids in some V_c: the only columns P(c | h) needs (a tenth of WikiText-2's)."""
        return np.flatnonzero(self.roles[:, 1:].any(axis=1))

    @classmethod
    def from_corpus(cls, corpus, alpha: float = ALPHA) -> RoleShares:
        v, n_cls = len(corpus.vocab), len(corpus.class_names)
        members = [np.zeros(0, dtype=np.int64)] + [corpus.class_vocab(c) for c in range(1, n_cls)]
        allowed = np.zeros((v, n_cls), dtype=bool)
        for c, m in enumerate(members):
            allowed[m, c] = True
        counts = corpus.type_class_counts().astype(np.float64)  # (V, C) training counts
        allowed[:, 0] = ~allowed.any(axis=1) | (counts[:, 0] > 0)
        weights = np.where(allowed, counts + alpha, 0.0)
        return cls(members, weights / weights.sum(axis=1, keepdims=True))

    def class_log_probs(self, log_dist: Tensor) -> Tensor:
        """log P(c | h) = log Σ_{w ∈ V_c} π(c | w) P_NNLM(w | h) for every row and class.

        (N, C) float64; column 0 (plain words) is −inf. Only the class types' columns enter
        the product, summed in float64 so that P(c | h) is exact to ~1e-12.
        """
        types = torch.as_tensor(self.class_types)
        roles = torch.as_tensor(self.roles[self.class_types])
        roles[:, 0] = 0.0
        parts = [
            torch.log(rows.double().exp() @ roles)
            for rows in torch.split(log_dist[:, types], ROWS_PER_CHUNK)
        ]
        return torch.cat(parts) if parts else torch.zeros((0, roles.shape[1]), dtype=torch.float64)


class SingleTaskFactor(ClassFactor):
    """P(c | h) summed from the NNLM over V_c (a run with the NNLM head only, Table 8)."""

    parts = ("nnlm", "top", "neural")

    def __init__(self, model: LanguageModel, shares: RoleShares) -> None:
        self.head = model.heads["nnlm"]
        self.shares = shares
        with np.errstate(divide="ignore"):
            self.log_roles = np.log(shares.roles)
        self._log_roles_t = torch.as_tensor(self.log_roles)

    @property
    def tagged(self) -> np.ndarray:
        return self.shares.tagged

    def target_scores(self, model, h, targets, classes, parts):
        target = self.head.target_log_prob(h, targets, classes).double()
        cls = classes.long()
        out = {"nnlm": target}
        if "top" in parts or "neural" in parts:
            own = target + self._log_roles_t[targets.long(), cls]  # log π(c_t | w_t) P_NNLM
            p_class = self.shares.class_log_probs(self.head.log_dist(h))
            at = p_class.gather(1, cls.unsqueeze(1)).squeeze(1)
            out["top"] = torch.where(cls > 0, at, own)
            out["neural"] = own
        return {p: out[p] for p in parts}

    def distribution(self, model, h, micro, class_names, micro_rows):
        log_dist = self.head.log_dist(h)
        logp = log_dist.double().numpy()
        tags = self.shares.class_log_probs(log_dist).numpy()
        word = logp + self.log_roles[:, 0]
        tag = np.full_like(tags, -np.inf)
        within: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        source: dict[int, str] = {}
        for c in np.flatnonzero(self.tagged).tolist():
            name, members = class_names[c], self.shares.members[c]
            tag[:, c] = tags[:, c]
            if name in micro:
                within[c], source[c] = micro_part(micro[name], members, micro_rows[name])
            else:
                # P(w | c) = π(c | w) P_NNLM(w | h) / P(c | h): the NNLM's own split of its mass
                own = logp[:, members] + self.log_roles[members, c] - tags[:, c : c + 1]
                within[c] = (members, own)
                source[c] = "neural"
        return FullDistribution(word, tag, within, source)


class NeuralOnly(ClassFactor):
    """A model with no class factor at all (training-time validation, ``--model neural``):
    only the heads' own scores."""

    def __init__(self, model: LanguageModel) -> None:
        self.parts = tuple(model.heads) + (("top",) if "hnlm" in model.heads else ())

    @property
    def tagged(self) -> np.ndarray:
        return np.zeros(0, dtype=bool)

    def target_scores(self, model, h, targets, classes, parts):
        got = model.target_log_probs(h, targets, classes, parts)
        return {k: v.double() for k, v in got.items()}

    def distribution(self, model, h, micro, class_names, micro_rows):
        raise NslmError("this scorer has no class factor: load the run with nslm.runs.load_run")


def class_factor(model: LanguageModel, corpus=None) -> ClassFactor:
    """The run's strategy: the HNLM's top level when it has one, else the single-task sum
    over V_c (which needs the run's class vocabularies and training counts: ``corpus``)."""
    if "hnlm" in model.heads:
        return HNLMFactor(model)
    if corpus is None or "numeral" in model.heads:  # a numeral model has no class factor
        return NeuralOnly(model)
    return SingleTaskFactor(model, RoleShares.from_corpus(corpus))
