"""The single-task NSLM (paper Table 8): P(c | h) from the flat NNLM softmax, no class head.

The paper's AWD-LSTM experiment used "a single-task configuration ... [P(c)] was calculated
by summing all probability assigned to tokens in V_C". A run trained with
``heads = ["nnlm"]`` gets exactly that NSLM here:

    P(c | h)        = Σ_{w ∈ V_c} π(c | w) · P_NNLM(w | h)               (Eq. 4's P(c))
    P_NSLM(w_t | h) = P(c_t | h) · P_MM(w_t | c_t)        at class positions  (Eq. 4)
    P_NSLM(w_t | h) = π(0 | w_t) · P_NNLM(w_t | h)        at word positions   (Eq. 2)

π(c | w) is the share of type w's training occurrences annotated with class c (add-α
smoothed over the roles w can take: the classes whose V_c holds it, and "plain word" for a
type outside every V_c or seen as a plain word in training). Why not the bare sum: our V_c
overlap (``<range>`` and ``<convert>`` hold every number type, "1990" may be a ``<year>`` or
a ``<range>``), so bare sums would count a number's probability once per class and the
NSLM would not sum to 1. π splits each type's NNLM probability among its roles, so the
parts add up to P_NNLM exactly; for a type of one class only (every place, most numbers)
π = 1 and P(c | h) is the paper's plain sum over V_c. On WikiText-2 no class type ever
occurs as a plain word, so a plain word's score is P_NNLM(w | h) itself.

A class without a micro-model keeps the NNLM's own share, π(c | w) · P_NNLM(w | h), so the
NSLM is a complete distribution over every type (:func:`distribution`). P(c | h) for all
positions of a window is one matrix product of the NNLM's probabilities with π.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.micro.model import MicroModel
from nslm.micro.pipeline import micro_log_probs
from nslm.scores.mixture import FullDistribution, nslm_log_probs
from nslm.scores.passes import NSLMScores, feature_batches, micro_part

ALPHA = 0.1  # add-α for π(c | w): a (type, class) pair unseen in training keeps some mass
ROWS_PER_CHUNK = 256  # rows of the (N, V) float64 probability matrix held at once (~70 MB)


@dataclass
class SingleTaskClasses:
    """V_c of every class and the role shares π(c | w) of every type (rows sum to 1)."""

    members: list[np.ndarray]  # members[c]: V_c's type ids, sorted; members[0] is empty
    roles: np.ndarray  # (V, C) float64, π(c | w); c = 0 is "plain word"

    @property
    def tagged(self) -> np.ndarray:
        """(C,) bool: classes with a non-empty V_c (those the NSLM can predict)."""
        return np.array([c > 0 and len(m) > 0 for c, m in enumerate(self.members)])

    @property
    def class_types(self) -> np.ndarray:
        """Type ids in some V_c: the only columns P(c | h) needs (a tenth of WikiText-2's)."""
        return np.flatnonzero(self.roles[:, 1:].any(axis=1))

    @classmethod
    def from_corpus(cls, corpus, alpha: float = ALPHA) -> SingleTaskClasses:
        v, n_cls = len(corpus.vocab), len(corpus.class_names)
        members = [np.zeros(0, dtype=np.int64)] + [corpus.class_vocab(c) for c in range(1, n_cls)]
        allowed = np.zeros((v, n_cls), dtype=bool)
        for c, m in enumerate(members):
            allowed[m, c] = True
        train = corpus.train
        pairs = train.token_ids.astype(np.int64) * n_cls + train.class_ids.astype(np.int64)
        counts = np.bincount(pairs, minlength=v * n_cls).reshape(v, n_cls).astype(np.float64)
        allowed[:, 0] = ~allowed.any(axis=1) | (counts[:, 0] > 0)
        weights = np.where(allowed, counts + alpha, 0.0)
        return cls(members, weights / weights.sum(axis=1, keepdims=True))


def attach(model: nn.Module, corpus) -> None:
    """Give a model without an HNLM head the class table its single-task NSLM needs."""
    model.single_task = SingleTaskClasses.from_corpus(corpus)


def classes_of(model: nn.Module) -> SingleTaskClasses:
    table = getattr(model, "single_task", None)
    if table is None:
        raise NslmError("this model has no HNLM head and no class table: load it with load_run")
    return table


def tagged_classes(model: nn.Module) -> np.ndarray:
    """(C,) bool: the classes the run's NSLM can fire a micro-model on (HNLM or single-task)."""
    if "hnlm" in model.heads:
        return model.heads["hnlm"].layout.top_of_tag >= 0
    return classes_of(model).tagged


def class_log_probs(log_dist: Tensor, table: SingleTaskClasses) -> Tensor:
    """log P(c | h) = log Σ_{w ∈ V_c} π(c | w) P_NNLM(w | h) for every row and class.

    (N, C) float64; column 0 (plain words) is −inf. Only the class types' columns enter the
    product, summed in float64 so that P(c | h) is exact to ~1e-12.
    """
    types = torch.as_tensor(table.class_types)
    roles = torch.as_tensor(table.roles[table.class_types])
    roles[:, 0] = 0.0
    parts = [
        torch.log(rows.double().exp() @ roles)
        for rows in torch.split(log_dist[:, types], ROWS_PER_CHUNK)
    ]
    return torch.cat(parts) if parts else torch.zeros((0, roles.shape[1]), dtype=torch.float64)


@torch.no_grad()
def score_single_task(
    model: nn.Module, split: Split, micro: dict[str, MicroModel], **kwargs
) -> NSLMScores:
    """:class:`NSLMScores` of a run with an NNLM head only (``hnlm`` is None)."""
    table = classes_of(model)
    with np.errstate(divide="ignore"):
        log_roles = torch.as_tensor(np.log(table.roles))
    head = model.heads["nnlm"]
    n = len(split)
    nnlm, top, pair = (np.full(n, np.nan) for _ in range(3))
    for hv, yv, cv, where in feature_batches(model, split, **kwargs):
        target = head.target_log_prob(hv, yv, cv).double()
        cv = cv.long()
        own = target + log_roles[yv.long(), cv]  # log π(c_t | w_t) P_NNLM(w_t | h)
        p_class = class_log_probs(head.log_dist(hv), table)
        at = p_class.gather(1, cv.unsqueeze(1)).squeeze(1)
        nnlm[where] = target.numpy()
        pair[where] = own.numpy()
        top[where] = torch.where(cv > 0, at, own).numpy()
    mm = micro_log_probs(micro, split)
    # A class position without a micro-model keeps the NNLM's share of its type (``pair``).
    pure = nslm_log_probs(top, split.class_ids, mm, pair)
    return NSLMScores(nnlm, None, top, mm, pure)


@torch.no_grad()
def distribution(
    model: nn.Module,
    h: Tensor,
    micro: dict[str, MicroModel],
    class_names: tuple[str, ...],
    micro_rows: dict[str, np.ndarray],
) -> FullDistribution:
    """The single-task NSLM's next-token distribution over every type for features h (N, D).

    The same contract as :func:`nslm.scores.passes.distribution_from_features`:
    ``micro_rows[class]`` is log P_MM over V_c for each row.
    """
    table = classes_of(model)
    log_dist = model.heads["nnlm"].log_dist(h)
    logp = log_dist.double().numpy()
    tags = class_log_probs(log_dist, table).numpy()
    with np.errstate(divide="ignore"):
        log_roles = np.log(table.roles)
    word = logp + log_roles[:, 0]
    tag = np.full_like(tags, -np.inf)
    within: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    source: dict[int, str] = {}
    for c in np.flatnonzero(table.tagged).tolist():
        name, members = class_names[c], table.members[c]
        tag[:, c] = tags[:, c]
        if name in micro:
            within[c], source[c] = micro_part(micro[name], members, micro_rows[name])
        else:
            # P(w | c) = π(c | w) P_NNLM(w | h) / P(c | h): the NNLM's own split of its mass
            within[c] = (members, logp[:, members] + log_roles[members, c] - tags[:, c : c + 1])
            source[c] = "neural"
    return FullDistribution(word, tag, within, source)
