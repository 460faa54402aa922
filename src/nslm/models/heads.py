"""Output heads on one backbone: the flat NNLM softmax (Eq. 2) and the hierarchical HNLM (Eq. 3).

Both heads expose the same three operations on backbone features ``h`` of shape (N, H):

* ``nll(h, targets, classes)`` — per-position negative log-probability, used for training;
* ``target_log_prob(h, targets, classes)`` — the exact, normalised log-probability of each
  target (what the evaluator consumes);
* ``log_dist(h)`` — the full log-distribution over the vocabulary, shape (N, V).

An adaptive softmax (Grave et al. 2017) is itself a normalised distribution over all its
outputs, so the same module serves fast training and exact evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nslm.models.shared_top import SharedTopLevel


class SoftmaxLayer(nn.Module):
    """A softmax over ``n_out`` outputs: full, or adaptive with frequency-ordered clusters."""

    def __init__(
        self,
        in_dim: int,
        n_out: int,
        kind: str = "full",
        cutoffs: list[int] | None = None,
        div_value: float = 4.0,
    ) -> None:
        super().__init__()
        # Cutoffs beyond the output size make no cluster; drop them (tiny test vocabularies).
        usable = [c for c in (cutoffs or []) if 0 < c < n_out - 1]
        self.kind = kind if usable else "full"
        self.n_out = n_out
        if self.kind == "adaptive":
            # The last tail cluster projects to in_dim / div^k dimensions; keep that ≥ 1.
            while div_value > 1.0 and in_dim // div_value ** len(usable) < 1:
                div_value = max(1.0, div_value / 2)
            self.adaptive = nn.AdaptiveLogSoftmaxWithLoss(
                in_dim, n_out, cutoffs=usable, div_value=div_value
            )
        else:
            self.linear = nn.Linear(in_dim, n_out)

    # PyTorch's adaptive softmax mixes the dtypes of its clusters under bf16 autocast
    # (index_copy_ of bf16 into float32), so it runs in float32 whatever the caller's
    # autocast; the shared top level (shared_top.py) reads its logits itself and keeps bf16.

    def nll(self, h: Tensor, targets: Tensor) -> Tensor:
        """−log P(target | h) per row; exact for both kinds."""
        if self.kind == "adaptive":
            with torch.autocast(h.device.type, enabled=False):
                return -self.adaptive(h.float(), targets).output
        return F.cross_entropy(self.linear(h).float(), targets, reduction="none")

    def log_prob(self, h: Tensor) -> Tensor:
        """log P(k | h) for every output k: shape (N, n_out), rows sum to 1 in prob space."""
        if self.kind == "adaptive":
            with torch.autocast(h.device.type, enabled=False):
                return self.adaptive.log_prob(h.float())
        return F.log_softmax(self.linear(h).float(), dim=-1)


class NNLMHead(nn.Module):
    """Eq. 2: P(w_t | w_<t) = softmax over the whole vocabulary V_W."""

    def __init__(self, in_dim: int, vocab_size: int, kind: str, cutoffs: list[int], div: float):
        super().__init__()
        self.softmax = SoftmaxLayer(in_dim, vocab_size, kind, cutoffs, div)

    def nll(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.softmax.nll(h, targets)

    def target_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return -self.softmax.nll(h, targets)

    def top_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.target_log_prob(h, targets, classes)

    def log_dist(self, h: Tensor) -> Tensor:
        return self.softmax.log_prob(h)


@dataclass
class HNLMLayout:
    """Which output of the HNLM's top-level softmax stands for which word or class tag.

    The top level is a softmax over (non-class words ∪ class tags), ordered by training
    frequency so adaptive-softmax clusters are contiguous. ``top_of_word[w]`` is the top id
    of word type w (−1 if w only ever occurs as a class token), ``top_of_tag[c]`` that of
    class c's tag (−1 for c = 0, "word", and for classes with an empty vocabulary).
    ``members[c]`` is V_c (sorted type ids); the within-class softmax of class c is over it.
    """

    vocab_size: int
    top_of_word: np.ndarray  # (V,) int64
    top_of_tag: np.ndarray  # (C,) int64
    members: list[np.ndarray]  # C arrays; members[0] is empty

    @property
    def n_top(self) -> int:
        return int(max(self.top_of_word.max(initial=-1), self.top_of_tag.max(initial=-1)) + 1)

    @property
    def n_classes(self) -> int:
        return len(self.members)

    @classmethod
    def from_corpus(cls, corpus, *, shared: bool = False) -> HNLMLayout:
        """Build the layout from a :class:`~nslm.data.PreparedCorpus` (train split counts).

        ``shared``: the top level reuses the NNLM's output layer
        (:class:`~nslm.models.shared_top.SharedTopLevel`), so a word keeps its vocabulary id
        as its top id and the tags follow after the V word ids.
        """
        v = len(corpus.vocab)
        n_cls = len(corpus.class_names)
        members = [np.zeros(0, dtype=np.int64)] + [corpus.class_vocab(c) for c in range(1, n_cls)]
        is_class_type = np.zeros(v, dtype=bool)
        for m in members:
            is_class_type[m] = True
        train = corpus.train
        cids = train.class_ids.astype(np.int64)
        word_counts = np.bincount(train.token_ids[cids == 0], minlength=v)
        tag_counts = np.bincount(cids, minlength=n_cls)
        # A type is a top-level word unless it is a class type never seen as a plain word.
        word_ids = np.flatnonzero(~is_class_type | (word_counts > 0))
        tag_ids = np.array([c for c in range(1, n_cls) if len(members[c])], dtype=np.int64)
        if shared:
            top_of_word = np.full(v, -1, dtype=np.int64)
            top_of_word[word_ids] = word_ids
            top_of_tag = np.full(n_cls, -1, dtype=np.int64)
            top_of_tag[tag_ids] = v + np.arange(len(tag_ids))
            return cls(v, top_of_word, top_of_tag, members)
        counts = np.concatenate([word_counts[word_ids], tag_counts[tag_ids]])
        # Stable sort by descending count: frequent items land in the adaptive head cluster.
        order = np.argsort(-counts, kind="stable")
        top_of_word = np.full(v, -1, dtype=np.int64)
        top_of_tag = np.full(n_cls, -1, dtype=np.int64)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        top_of_word[word_ids] = rank[: len(word_ids)]
        top_of_tag[tag_ids] = rank[len(word_ids) :]
        return cls(v, top_of_word, top_of_tag, members)

    def to_json(self) -> dict:
        return {
            "vocab_size": self.vocab_size,
            "top_of_word": self.top_of_word.tolist(),
            "top_of_tag": self.top_of_tag.tolist(),
            "members": [m.tolist() for m in self.members],
        }

    @classmethod
    def from_json(cls, data: dict) -> HNLMLayout:
        return cls(
            int(data["vocab_size"]),
            np.asarray(data["top_of_word"], dtype=np.int64),
            np.asarray(data["top_of_tag"], dtype=np.int64),
            [np.asarray(m, dtype=np.int64) for m in data["members"]],
        )


class HNLMHead(nn.Module):
    """Eq. 3: P(w_t) = P(c | h) · P_C(w_t | c, h), and P(w_t | h) directly for plain words.

    The class of a position is given by the annotation (``classes``), not by the word's type:
    a number type may belong to several V_c. The score of a class position is therefore the
    probability of the (class, word) pair; :meth:`log_dist` marginalises over classes so the
    distribution over word types sums to 1.
    """

    def __init__(
        self,
        in_dim: int,
        layout: HNLMLayout,
        kind: str,
        cutoffs: list[int],
        div: float,
        words: SoftmaxLayer | None = None,
    ) -> None:
        super().__init__()
        self.layout = layout
        # ``words``: the NNLM's output layer, shared by the top level (hnlm_top = "shared")
        self.shared = words is not None
        if words is not None:
            self.top: nn.Module = SharedTopLevel(in_dim, words, layout)
        else:
            self.top = SoftmaxLayer(in_dim, layout.n_top, kind, cutoffs, div)
        union = np.unique(np.concatenate([np.zeros(0, np.int64), *layout.members]))
        n_union = max(len(union), 1)
        # One output row per class type; class c's softmax uses only the rows of V_c.
        self.within = nn.Linear(in_dim, n_union)
        self.register_buffer("top_of_word", torch.as_tensor(layout.top_of_word), persistent=False)
        self.register_buffer("top_of_tag", torch.as_tensor(layout.top_of_tag), persistent=False)
        rows = [
            torch.as_tensor(np.searchsorted(union, m), dtype=torch.long) for m in layout.members
        ]
        self._rows = rows  # union-row index of each member of V_c
        # position of type w inside V_c, or −1: a (C, V) table (small: C ≈ 11)
        inside = np.full((layout.n_classes, layout.vocab_size), -1, dtype=np.int64)
        for c, m in enumerate(layout.members):
            inside[c, m] = np.arange(len(m))
        self.register_buffer("inside", torch.as_tensor(inside), persistent=False)

    def _top_targets(self, targets: Tensor, classes: Tensor) -> Tensor:
        return torch.where(classes > 0, self.top_of_tag[classes], self.top_of_word[targets])

    def within_log_dist(self, h: Tensor, cls: int) -> Tensor:
        """log P_C(w | c, h) over every w of V_c, in V_c's order: (N, |V_c|) (Eq. 3)."""
        rows = self._rows[cls]
        logits = F.linear(h, self.within.weight[rows], self.within.bias[rows]).float()
        return F.log_softmax(logits, dim=-1)

    def within_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        """log P_C(w | c, h) at class positions (0 at word positions)."""
        out = torch.zeros(h.shape[0], dtype=torch.float32, device=h.device)
        for c in torch.unique(classes[classes > 0]).tolist():
            idx = torch.nonzero(classes == c).squeeze(1)
            rows = self._rows[c]
            logits = F.linear(h[idx], self.within.weight[rows], self.within.bias[rows]).float()
            logp = F.log_softmax(logits, dim=-1)
            where = self.inside[c, targets[idx]]
            picked = logp.gather(1, where.clamp(min=0).unsqueeze(1)).squeeze(1)
            out[idx] = torch.where(where >= 0, picked, torch.full_like(picked, -torch.inf))
        return out

    def top_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        """log P(c | h) at class positions, log P_top(w | h) at word positions."""
        if self.shared:
            return self.top.joint(h, targets, classes)[1]
        top = self._top_targets(targets, classes)
        valid = top >= 0
        lp = -self.top.nll(h, top.clamp(min=0))
        return torch.where(valid, lp, torch.full_like(lp, -torch.inf))

    def target_log_prob(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return self.top_log_prob(h, targets, classes) + self.within_log_prob(h, targets, classes)

    def nll(self, h: Tensor, targets: Tensor, classes: Tensor) -> Tensor:
        return -self.target_log_prob(h, targets, classes)

    def log_dist(self, h: Tensor) -> Tensor:
        """The HNLM's distribution over word types, marginalised over classes: (N, V)."""
        top = self.top.log_prob(h)
        n = h.shape[0]
        out = torch.full((n, self.layout.vocab_size), -torch.inf, device=h.device)
        words = torch.nonzero(self.top_of_word >= 0).squeeze(1)
        out[:, words] = top[:, self.top_of_word[words]]
        for c, members in enumerate(self.layout.members):
            tag = int(self.layout.top_of_tag[c])
            if c == 0 or tag < 0:
                continue
            rows = self._rows[c]
            logits = F.linear(h, self.within.weight[rows], self.within.bias[rows]).float()
            joint = top[:, tag : tag + 1] + F.log_softmax(logits, dim=-1)
            m = torch.as_tensor(members, device=h.device)
            out[:, m] = torch.logaddexp(out[:, m], joint)
        return out
