"""The HNLM's top level built on the NNLM's output layer (config ``hnlm_top = "shared"``).

Eq. 3's top level is a softmax over (non-class words ∪ class tags). Here its word logits
are the NNLM's own (Eq. 2's output layer), and only the tags get new rows. With a full
softmax over word logits s_w(h) and tag logits t_c(h), only the normalisers differ:

    log P_NNLM(w | h) = s_w − log Σ_{v ∈ V} exp s_v                              (Eq. 2)
    log P_top(w | h)  = s_w − log (Σ_{v ∈ V_top} exp s_v + Σ_c exp t_c),  w ∈ V_top  (Eq. 3)

where V_top is the layout's top-level words. With an adaptive softmax (head logits z,
cluster k's logits u) the same holds level by level: the head level is renormalised over
(V_top's shortlist words, the clusters holding a V_top word, the tags), and cluster k's
softmax over its V_top members only:

    log P_top(w | h) = z_k − log Z_top + u_w − log Σ_{v ∈ k ∩ V_top} exp u_v

At the head level the top level's normaliser is the NNLM's minus the few class-only
columns (one gather, ``_log_kept_mass``); in a tail cluster both normalisers come from one
exponentiation (:mod:`nslm.models.cluster_scores`). So scoring the NSLM's P(c | h) next to
the NNLM costs a few extra rows instead of a second output layer: the evaluation-cost target
(a full NSLM evaluation ≤ 1.25× an NNLM-only one; BENCHMARKS.md, "The NSLM on WikiText-2").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor, nn

from nslm.models.cluster_scores import cluster_log_probs

if TYPE_CHECKING:
    from nslm.models.hnlm_layout import HNLMLayout
    from nslm.models.softmax import SoftmaxLayer

# Below this share of a softmax block kept, 1 − Σ dropped loses float32 precision; such
# rows take the exact (masked log-sum-exp) path instead. Rare: only rows where class-only
# types hold > 99.9 % of a block's mass.
EXACT_BELOW = 1e-3


def _log_kept_mass(dropped_log_probs: Tensor, exact: Callable[[Tensor], Tensor]) -> Tensor:
    """log Σ_{j kept} P_j per row of a softmax block, from the dropped columns' log P.

    The dropped columns are the few class-only types of the block, so the kept mass is
    1 − Σ_dropped: a small sum instead of a second softmax. ``exact(rows)`` gives the
    masked log-sum-exp for rows where that subtraction would lose float32 precision.
    """
    kept = 1.0 - dropped_log_probs.exp().sum(1)
    log_kept = kept.clamp(min=EXACT_BELOW).log()
    bad = kept < EXACT_BELOW
    if bool(bad.any()):
        rows = torch.nonzero(bad).squeeze(1)
        log_kept = log_kept.index_put((rows,), exact(rows))
    return log_kept


class SharedTopLevel(nn.Module):
    """P(c | h) and P_top(w | h) of Eq. 3 from the NNLM's ``words`` layer plus one row per tag.

    ``words`` is registered here as well as in the NNLM head: its parameters are the same
    tensors (saved once, see :func:`~nslm.training.checkpoint.model_tensors`) and both
    losses train them.
    """

    def __init__(self, in_dim: int, words: SoftmaxLayer, layout: HNLMLayout) -> None:
        super().__init__()
        self.words = words
        v = layout.vocab_size
        tag_classes = np.flatnonzero(layout.top_of_tag >= 0)
        if not np.array_equal(layout.top_of_tag[tag_classes], v + np.arange(len(tag_classes))):
            raise ValueError("a shared top level needs HNLMLayout.from_corpus(..., shared=True)")
        self.n_words = v
        self.n_tags = len(tag_classes)
        self.tags = nn.Linear(in_dim, max(self.n_tags, 1))  # a layout may have no tags
        allowed = torch.as_tensor(layout.top_of_word >= 0)
        self.register_buffer("allowed", allowed, persistent=False)
        # class id → tag row (−1: no tag), for the targets at class positions
        tag_row = torch.full((layout.n_classes,), -1, dtype=torch.long)
        tag_row[torch.as_tensor(tag_classes)] = torch.arange(len(tag_classes))
        self.register_buffer("tag_row", tag_row, persistent=False)
        if words.kind == "adaptive":
            a = words.adaptive
            self.shortlist = a.shortlist_size
            bounds = list(zip(a.cutoffs[:-1], a.cutoffs[1:], strict=True))
        else:
            self.shortlist, bounds = v, []
        self.bounds = bounds
        cluster_has_top = [bool(allowed[lo:hi].any()) for lo, hi in bounds]
        clusters = torch.as_tensor(cluster_has_top, dtype=torch.bool)
        head_keep = torch.cat([allowed[: self.shortlist], clusters])
        self._register_block("head", head_keep)
        # the head-level column of each word: itself in the shortlist, else its cluster
        head_column = torch.arange(v)
        for k, (lo, hi) in enumerate(bounds):
            head_column[lo:hi] = self.shortlist + k
            self._register_block(f"tail{k}", allowed[lo:hi])
        self.register_buffer("head_column", head_column, persistent=False)

    def _register_block(self, name: str, keep: Tensor) -> None:
        self.register_buffer(f"{name}_keep", keep, persistent=False)
        dropped = torch.nonzero(~keep).squeeze(1)
        self.register_buffer(f"{name}_dropped", dropped, persistent=False)

    def _head_logits(self, h: Tensor) -> Tensor:
        if self.words.kind == "adaptive":
            return self.words.adaptive.head(h).float()
        return self.words.linear(h).float()

    def _tag_logits(self, h: Tensor) -> Tensor:
        """(N, n_tags): the tag rows, the only parameters the shared top level adds."""
        return self.tags(h).float()[:, : self.n_tags]

    def _tail_logits(self, k: int, h: Tensor) -> Tensor:
        return self.words.adaptive.tail[k](h).float()

    def joint(self, h: Tensor, targets: Tensor, classes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(log P_NNLM(w_t | h), log P_top(target_t | h), log Σ_c P(c | h)) per row, from one
        pass over the logits.

        The top-level target is the class tag at class positions (``classes > 0``) and the
        word at word positions; a word outside V_top, or a class without a tag, gets −inf.
        The third is the top level's mass on every tag together: how sure the model is that
        a number, a date or a place comes next, whatever the target (free: both its terms
        are the normaliser's).
        """
        # Shifted by the row maximum (a constant per row, so no gradient is lost by detaching
        # it): log-probabilities near 0 keep their float32 precision, as in log_softmax.
        logits = self._head_logits(h)
        shift = logits.amax(dim=1, keepdim=True).detach()
        head_logits = logits - shift
        log_z = torch.logsumexp(head_logits, dim=1, keepdim=True)  # Eq. 2's head normaliser
        # Everything the head level gives, in one gather (so backward keeps one buffer, not
        # one per index op): the target's column (its word, or its tail cluster) and the
        # block's class-only columns.
        n = head_logits.shape[0]
        columns = torch.cat(
            [self.head_column[targets].unsqueeze(1), self.head_dropped.expand(n, -1)], dim=1
        )
        picked = head_logits.gather(1, columns) - log_z
        word = picked[:, 0]  # log P_NNLM of the word, or of the target's tail cluster
        tags = self._tag_logits(h) - (log_z + shift)  # t_c − log Σ_{v ∈ V} exp s_v

        def exact(rows: Tensor) -> Tensor:
            kept = (head_logits[rows] - log_z[rows]).masked_fill(~self.head_keep, -torch.inf)
            return torch.logsumexp(kept, dim=1)

        log_tags = torch.logsumexp(tags, dim=1)
        log_z_top = torch.logaddexp(_log_kept_mass(picked[:, 1:], exact), log_tags)
        # each word's log-probability under the NNLM, and under the top level before
        # log_z_top is taken off (their cluster normalisers differ)
        in_nnlm = torch.zeros_like(word)
        in_top = torch.zeros_like(word)
        for k, (lo, hi) in enumerate(self.bounds):
            rows = torch.nonzero((targets >= lo) & (targets < hi)).squeeze(1)
            if rows.numel() == 0:
                continue
            logits = self._tail_logits(k, h[rows])
            keep, dropped = getattr(self, f"tail{k}_keep"), getattr(self, f"tail{k}_dropped")
            inside, inside_top = cluster_log_probs(logits, targets[rows] - lo, keep, dropped)
            in_nnlm = in_nnlm.index_put((rows,), inside)
            in_top = in_top.index_put((rows,), inside_top)
        nnlm, top_word = word + in_nnlm, word + in_top
        tag_row = self.tag_row[classes]
        if self.n_tags:
            at_tag = tags.gather(1, tag_row.clamp(min=0).unsqueeze(1)).squeeze(1) - log_z_top
        else:
            at_tag = torch.full_like(log_z_top, -torch.inf)
        at_word = top_word - log_z_top
        minus_inf = torch.full_like(at_word, -torch.inf)
        top = torch.where(
            classes > 0,
            torch.where(tag_row >= 0, at_tag, minus_inf),
            torch.where(self.allowed[targets], at_word, minus_inf),
        )
        class_mass = log_tags - log_z_top if self.n_tags else minus_inf
        return nnlm, top, class_mass

    def nll(self, h: Tensor, top_targets: Tensor) -> Tensor:
        """−log P_top(k | h) for top-level ids (word ids < V, then the tags)."""
        return -self.log_prob(h).gather(1, top_targets.unsqueeze(1)).squeeze(1)

    def log_prob(self, h: Tensor) -> Tensor:
        """log P_top(k | h) for every top-level id: (N, V + tags); −inf off V_top."""
        head = self._head_logits(h)
        tags = self._tag_logits(h)
        # the exact masked normaliser (the reference that ``joint``'s fast path must match)
        words = torch.logsumexp(head.masked_fill(~self.head_keep, -torch.inf), dim=1)
        lse_top = torch.logaddexp(words, torch.logsumexp(tags, dim=1)).unsqueeze(1)
        out = torch.full((h.shape[0], self.n_words), -torch.inf, device=h.device)
        out[:, : self.shortlist] = head[:, : self.shortlist] - lse_top
        for k, (lo, hi) in enumerate(self.bounds):
            members = self.allowed[lo:hi]
            if not bool(members.any()):
                continue
            tail = self._tail_logits(k, h).masked_fill(~members, -torch.inf)
            cluster = head[:, self.shortlist + k : self.shortlist + k + 1]
            out[:, lo:hi] = cluster + torch.log_softmax(tail, dim=1) - lse_top
        out = out.masked_fill(~self.allowed, -torch.inf)
        return torch.cat([out, tags - lse_top], dim=1)
