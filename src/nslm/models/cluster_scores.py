"""A tail cluster's two log-probabilities of the target in one pass (shared top level).

The shared top level (:mod:`nslm.models.shared_top`) needs, for the rows whose target falls
in adaptive-softmax tail cluster k with logits u (rows × |k|):

    inside_all  = u_t − log Σ_{v ∈ k} exp u_v              (the NNLM, Eq. 2)
    inside_kept = u_t − log Σ_{v ∈ k ∩ V_top} exp u_v      (the top level of Eq. 3)

Built from ``log_softmax``, ``gather`` and an ``index_select`` of the class-only columns,
autograd keeps about six rows × |k| buffers per step; the largest cluster of ``wt2-cpu``
is 27k words wide, so those buffers (30 MB each) were a third of a training step. This
function keeps one exponentiation for the backward pass and writes the gradient into it.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

# Below this kept mass (relative to the row's maximum) a row takes the exact path.
LOW_KEPT_SUM = 1e-30


class _ClusterScores(torch.autograd.Function):
    """Forward and backward of :func:`cluster_log_probs`; backward runs once (it reuses the
    saved exponentials as its output buffer), so double backward is an error."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: FunctionCtx, u: Tensor, target: Tensor, keep: Tensor, dropped: Tensor
    ):
        # float32 throughout, also under bf16 autocast (which would run ``e @ keep`` in bf16)
        with torch.autocast("cpu", enabled=False):
            top = u.amax(dim=1, keepdim=True)  # amax: max without the indices, twice as fast
            e = (u - top).exp_()  # rows × |k|; becomes the gradient in backward
            sum_all = e.sum(dim=1)
            sum_kept = e @ keep  # keep: 0/1 floats, |k|
        at_target = u.gather(1, target.unsqueeze(1)).squeeze(1) - top.squeeze(1)
        lse_kept = sum_kept.log()
        # Rows whose kept words all sit far below the row's maximum: take the exact masked
        # log-sum-exp there (rare). The cut-off keeps 1 / sum_kept, which backward scales a
        # gradient by, far from float32 overflow.
        low = sum_kept < LOW_KEPT_SUM
        if bool(low.any()):
            masked = (u[low] - top[low]).masked_fill(keep == 0, -torch.inf)
            # A cluster without top-level words has no top-level target to score: 0 keeps
            # the unused value and its (zero) gradient finite.
            lse_kept[low] = torch.logsumexp(masked, dim=1).nan_to_num(neginf=0.0)
        ctx.save_for_backward(u, e, top, sum_all, lse_kept, target, keep, dropped, low)
        return at_target - sum_all.log(), at_target - lse_kept

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, g_all: Tensor, g_kept: Tensor):  # type: ignore[override]
        u, e, top, sum_all, lse_kept, target, keep, dropped, low = ctx.saved_tensors
        # d/du_j = (g_all + g_kept)·[j = t] − g_all·P_all(j) − g_kept·keep_j·P_kept(j),
        # with P_all = e / sum_all and P_kept = e · exp(−lse_kept) (both relative to ``top``).
        # Elementwise passes over rows × |k| dominate, so: one in-place pass for the kept
        # columns, then the few class-only columns are rewritten from a copy.
        c_all = (g_all / sum_all).unsqueeze(1)
        c_kept = (g_kept * torch.exp(-lse_kept)).unsqueeze(1)
        e_dropped = e.index_select(1, dropped)
        grad = e.mul_(-(c_all + c_kept))
        grad.index_copy_(1, dropped, e_dropped.mul_(-c_all))
        if bool(low.any()):
            # e underflows where P_kept does not: recompute those rows in log space.
            shifted = u[low] - top[low]
            p_all = torch.exp(shifted) / sum_all[low].unsqueeze(1)
            kept_only = shifted.masked_fill(keep == 0, -torch.inf)
            p_kept = torch.exp(kept_only - lse_kept[low].unsqueeze(1))
            grad[low] = -g_all[low].unsqueeze(1) * p_all - g_kept[low].unsqueeze(1) * p_kept
        grad.scatter_add_(1, target.unsqueeze(1), (g_all + g_kept).unsqueeze(1))
        return grad, None, None, None


def cluster_log_probs(
    u: Tensor, target: Tensor, keep: Tensor, dropped: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """(inside_all, inside_kept) per row for cluster logits ``u`` and in-cluster ``target``.

    ``keep`` is a bool vector over the cluster's words (True: a top-level word) and
    ``dropped`` its False positions (computed when not given). For a target outside
    ``keep`` the second value is finite but means nothing; callers mask it.
    """
    if dropped is None:
        dropped = torch.nonzero(~keep).squeeze(1)
    return _ClusterScores.apply(u, target, keep.to(u.dtype), dropped)
