"""cluster_log_probs: the fused tail-cluster scores equal log_softmax-based ones, with gradients."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.models.cluster_scores import cluster_log_probs


def reference(u: torch.Tensor, target: torch.Tensor, keep: torch.Tensor):
    at_target = u.gather(1, target.unsqueeze(1)).squeeze(1)
    lse_all = torch.logsumexp(u, dim=1)
    lse_kept = torch.logsumexp(u.masked_fill(~keep, -torch.inf), dim=1)
    return at_target - lse_all, at_target - lse_kept


def check(u: torch.Tensor, target: torch.Tensor, keep: torch.Tensor, tol: float) -> None:
    g_all, g_kept = torch.randn(u.shape[0], dtype=u.dtype), torch.randn(u.shape[0], dtype=u.dtype)
    u1 = u.clone().requires_grad_(True)
    a1, k1 = cluster_log_probs(u1, target, keep)
    (a1 * g_all + k1 * g_kept).sum().backward()
    u2 = u.clone().requires_grad_(True)
    a2, k2 = reference(u2, target, keep)
    (a2 * g_all + k2 * g_kept).sum().backward()
    torch.testing.assert_close(a1, a2, atol=tol, rtol=tol)
    torch.testing.assert_close(k1, k2, atol=tol, rtol=tol)
    torch.testing.assert_close(u1.grad, u2.grad, atol=tol, rtol=tol)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 6),
    width=st.integers(2, 40),
    scale=st.floats(0.1, 30.0),
    seed=st.integers(0, 2**16),
)
def test_matches_log_softmax_reference(rows: int, width: int, scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    u = torch.randn(rows, width, generator=gen, dtype=torch.float64) * scale
    target = torch.randint(0, width, (rows,), generator=gen)
    keep = torch.rand(width, generator=gen) < 0.7
    keep[torch.randint(0, width, (1,), generator=gen)] = True  # at least one top-level word
    check(u, target, keep, tol=1e-9)


def test_kept_words_far_below_the_maximum() -> None:
    """float32 rows whose kept words sit 200 nats below a class-only word: exact path."""
    u = torch.zeros(3, 6)
    u[:, 0] = 200.0  # a dropped (class-only) column dominates every row
    u[1, 3] = -5.0
    keep = torch.tensor([False, True, True, True, False, True])
    target = torch.tensor([2, 3, 0])  # the last target is not a top-level word
    check(u, target, keep, tol=1e-5)
    inside_kept = cluster_log_probs(u, target, keep)[1]
    assert torch.isfinite(inside_kept).all()
    # Among the kept words of row 0 (all logits 0), each has probability 1/4.
    assert abs(float(inside_kept[0]) - float(torch.log(torch.tensor(0.25)))) < 1e-5


def test_cluster_without_top_level_words_stays_finite() -> None:
    """All class-only words: the top-level value is unused, but nothing may turn NaN."""
    u = torch.randn(4, 5, requires_grad=True)
    keep = torch.zeros(5, dtype=torch.bool)
    inside_all, inside_kept = cluster_log_probs(u, torch.tensor([0, 1, 2, 3]), keep)
    assert torch.isfinite(inside_kept).all()
    (inside_all.sum() + 0.0 * inside_kept.sum()).backward()
    assert torch.isfinite(u.grad).all()
    reference_all = torch.log_softmax(u.detach(), dim=1)[torch.arange(4), [0, 1, 2, 3]]
    torch.testing.assert_close(inside_all.detach(), reference_all)


def test_bf16_autocast_does_not_lower_precision() -> None:
    """Under CPU bf16 autocast the kept-mass product still runs in float32."""
    gen = torch.Generator().manual_seed(0)
    u = torch.randn(8, 300, generator=gen) * 4
    target = torch.randint(0, 300, (8,), generator=gen)
    keep = torch.rand(300, generator=gen) < 0.8
    plain = cluster_log_probs(u, target, keep)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = cluster_log_probs(u, target, keep)
    for a, b in zip(plain, autocast, strict=True):
        assert b.dtype == torch.float32
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
