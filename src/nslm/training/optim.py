"""Optimizers, the lr schedules and gradient clipping, including sparse embedding gradients.

With ``sparse_embedding = true`` the input embedding's gradient holds only the rows of the
words in a batch (a few thousand of 35,316 on WikiText-2). Under DistributedDataParallel
that is what makes a second process pay: gloo all-reduces those rows instead of the whole
7 M-float table, which cost 37 ms of a ~250 ms step (docs/training.md). Adam cannot take a
sparse gradient, so the embedding gets :class:`torch.optim.SparseAdam` ("lazy" Adam: a
row's moments move only when the row is in a batch) and every other parameter the fused
Adam; :class:`SplitAdam` drives both as one optimizer. SGD takes sparse gradients as they
are, when it has no momentum and no weight decay.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from nslm.config import TrainConfig


class SplitAdam:
    """SparseAdam for the sparse-gradient parameters, fused Adam for the rest, as one.

    It has what the training loop and checkpoints use of an optimizer: ``param_groups``
    (the lr schedule writes to them), ``zero_grad``, ``step`` and a state dict in
    torch's own layout, numbered as if the two were one optimizer over ``sparse + dense``.
    """

    def __init__(self, sparse: list[nn.Parameter], dense: list[nn.Parameter], lr: float) -> None:
        self.sparse = torch.optim.SparseAdam(sparse, lr=lr)
        # fused: one kernel over all parameters; a large share of a CPU step otherwise.
        self.dense = torch.optim.Adam(dense, lr=lr, fused=True)
        self.offset = len(sparse)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.sparse.param_groups + self.dense.param_groups

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.sparse.zero_grad(set_to_none=set_to_none)
        self.dense.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        self.sparse.step()
        self.dense.step()

    def state_dict(self) -> dict[str, Any]:
        a, b = self.sparse.state_dict(), self.dense.state_dict()
        state = dict(a["state"])
        state.update({i + self.offset: v for i, v in b["state"].items()})
        groups = a["param_groups"] + [
            {**g, "params": [i + self.offset for i in g["params"]]} for g in b["param_groups"]
        ]
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, saved: dict[str, Any]) -> None:
        n_sparse_groups = len(self.sparse.param_groups)
        groups = saved["param_groups"]
        state = {int(i): v for i, v in saved["state"].items()}
        self.sparse.load_state_dict(
            {
                "state": {i: v for i, v in state.items() if i < self.offset},
                "param_groups": groups[:n_sparse_groups],
            }
        )
        self.dense.load_state_dict(
            {
                "state": {i - self.offset: v for i, v in state.items() if i >= self.offset},
                "param_groups": [
                    {**g, "params": [i - self.offset for i in g["params"]]}
                    for g in groups[n_sparse_groups:]
                ],
            }
        )


def build_optimizer(cfg: TrainConfig, model: nn.Module) -> torch.optim.Optimizer | SplitAdam:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "sgd":  # takes sparse gradients as they are (checked in config)
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
        )
    sparse = [p for p in params if is_sparse_parameter(model, p)]
    if sparse:  # config validation allows this for adam without weight decay only
        dense = [p for p in params if all(p is not s for s in sparse)]
        return SplitAdam(sparse, dense, cfg.lr)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)


def is_sparse_parameter(model: nn.Module, param: nn.Parameter) -> bool:
    """Whether ``param`` is the weight of an embedding that produces sparse gradients."""
    return any(
        isinstance(m, nn.Embedding) and m.sparse and m.weight is param for m in model.modules()
    )


def clip_grad_norm(params: list[nn.Parameter], max_norm: float) -> Tensor:
    """Scale all gradients so that their joint 2-norm is at most ``max_norm``.

    As :func:`torch.nn.utils.clip_grad_norm_`, which cannot read sparse gradients: a
    sparse gradient is coalesced first (a word seen twice in a batch has two rows until
    then, and the norm is the summed row's).
    """
    params = [p for p in params if p.grad is not None]
    sparse = [p for p in params if p.grad.is_sparse]
    if not sparse:
        return torch.nn.utils.clip_grad_norm_(params, max_norm)
    norms = []
    for p in sparse:
        p.grad = p.grad.coalesce()
        norms.append(torch.linalg.vector_norm(p.grad.values()))
    dense = [p.grad for p in params if not p.grad.is_sparse]
    if dense:
        norms.append(torch.nn.utils.get_total_norm(dense))
    total = torch.linalg.vector_norm(torch.stack(norms))
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)  # as torch's clip_grad_norm_
    for p in params:
        p.grad.mul_(scale)
    return total


def scheduled_lr(cfg: TrainConfig, base: float, step: int, total: int, elapsed: float) -> float:
    """The lr for ``step``: linear warm-up, then constant, cosine or linear, or ``base`` as the
    loop holds it (``plateau`` divides it, ``halving`` halves it, at validations).

    With a wall-time budget (``max_minutes``) the cosine and the linear decay follow the
    budget, so the rate reaches zero when time runs out, whichever comes first of time and
    steps. Linear: base · (1 − progress), the byte LM's "linearly decay the initial learning
    rate to zero throughout the iterations" (docs/byte-lm.md).
    """
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return base * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule not in ("cosine", "linear"):
        return base
    progress = step / max(total, 1)
    if cfg.max_minutes > 0:
        progress = max(progress, elapsed / (cfg.max_minutes * 60))
    progress = min(progress, 1.0)
    if cfg.lr_schedule == "linear":
        return base * (1.0 - progress)
    return 0.5 * base * (1 + math.cos(math.pi * progress))


class RateHalving:
    """The rate-halving schedule of Gill (2017), Figure 2 (Mikolov's scheme): at each
    validation, halve the lr when the figure improved by less than ``epsilon`` of the
    previous one; training is done after ``max_halvings`` halvings.

    The first validation has nothing to compare with and never halves. A non-finite figure
    (a diverged run) is no improvement: it halves, and the next one is compared with the
    last finite figure. The state is plain JSON, saved in every checkpoint's state.json.
    """

    def __init__(self, lr: float, epsilon: float, max_halvings: int) -> None:
        self.lr, self.epsilon, self.max_halvings = lr, epsilon, max_halvings
        self.prev: float | None = None  # the last finite validation figure
        self.halvings = 0

    @property
    def done(self) -> bool:
        return self.halvings >= self.max_halvings

    def update(self, cur: float) -> float:
        """The lr after a validation whose (lower is better) figure is ``cur``."""
        if not math.isfinite(cur):
            stalled = True
        else:
            prev, self.prev = self.prev, cur
            # (prev - cur) / prev < epsilon, without dividing by a zero figure
            stalled = prev is not None and prev - cur < self.epsilon * abs(prev)
        if stalled:
            self.lr /= 2
            self.halvings += 1
        return self.lr

    def state_dict(self) -> dict[str, Any]:
        return {"lr": self.lr, "prev": self.prev, "halvings": self.halvings}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lr, self.prev, self.halvings = state["lr"], state["prev"], state["halvings"]
