"""What the training loop trains: a task owns the data, the model and how both are scored.

The loop (``training/loop.py``) owns everything a kind of model does not change: budgets,
the lr schedule, clipping, the DDP wrap, checkpoints with exact resume, kept checkpoints,
metrics, progress, early stopping and ``results.json``. A :class:`TrainingTask` gives it
the rest. The stream LM (``training/stream_task.py``) is one, and a model another system
trains its own way registers its task (:mod:`nslm.hooks`; the word+POS LMs');
:func:`make_task` is the one place that picks the task for a config.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from torch import Tensor, nn

from nslm.hooks import training_tasks

if TYPE_CHECKING:
    import torch

    from nslm.config import TrainConfig


class TrainingTask(Protocol):
    """One kind of model and its data, as the training loop sees them.

    The hidden state carried from batch to batch belongs to the loop: ``loss`` receives the
    last one and returns the next, ready to carry (detached: truncated BPTT), as ``None``
    or a tuple of tensors, which the loop saves per rank in every checkpoint and resets to
    ``None`` at each epoch start. A stateless task returns ``None``.
    """

    model: nn.Module  # trained; the loop moves it, wraps it in DDP, builds the optimizer on it
    stat_names: list[str]  # names of the rows of the per-step stats ``loss`` returns
    metric_names: list[str]  # the figures ``validate`` returns, primary first, lower is better
    # what the checkpoint state records of this rank's data layout, for ``check_resume``
    state_fields: dict[str, Any]

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> None:
        """Prepare (and cache) the data a run reads, in the process that launches the DDP
        ranks: a bad corpus is then one line, and the ranks only read the cache."""

    def n_batches(self) -> int:
        """Batches per epoch on this rank; the same on every rank (DDP steps in lock step)."""

    def batches(self, start: int) -> Iterator[tuple[int, Any]]:
        """(index, batch) of this epoch from index ``start`` on (a resume starts mid-epoch);
        the same order every time for a given seed and epoch."""

    def set_epoch(self, epoch: int) -> None:
        """Called before each epoch's batches (e.g. to reshuffle with seed + epoch)."""

    def loss(self, module: nn.Module, batch: Any, hidden: Any) -> tuple[Tensor, Tensor, Any, int]:
        """(loss, stats, next hidden or None, target tokens on this rank) of one batch;
        ``module`` is the model or its DDP wrap. Runs under the loop's autocast. ``stats``
        is a (len(stat_names), 2) tensor of [sum NLL, count] rows, for MetricsLog."""

    def validate(self) -> dict[str, float]:
        """The validation figures (rank 0 only); the task sets and restores eval mode."""

    def describe(self, figures: dict[str, float]) -> str:
        """The validation figures as the training log shows them."""

    def final_results(self) -> dict[str, Any]:
        """The valid and test figures for results.json (rank 0, best weights loaded)."""

    def write_assets(self, run_dir: Path) -> None:
        """Write what a new run directory needs beside config.json (vocabulary, …)."""

    def check_resume(self, run_dir: Path, state: dict[str, Any]) -> None:
        """Raise NslmError when ``run_dir`` and its checkpoint ``state`` do not fit this task."""


def task_class(cfg: TrainConfig) -> type[TrainingTask]:
    """The kind of task a config trains: the one dispatch on the config."""
    own = training_tasks().get(cfg.model)
    if own is not None:
        return own()
    from nslm.training.stream_task import StreamLMTask  # not at import: it loads models

    return StreamLMTask


def make_task(
    cfg: TrainConfig, rank: int, world: int, device: torch.device, resume: bool
) -> TrainingTask:
    """The task of ``cfg`` for this DDP rank (``resume``: its weights come from a checkpoint,
    so one-off initialisations, such as pretrained vectors, are skipped)."""
    return task_class(cfg)(cfg, rank=rank, world=world, device=device, resume=resume)


def prepare_data(cfg: TrainConfig) -> None:
    """Prepare the data of ``cfg``'s task before DDP ranks start (``nslm train``)."""
    task_class(cfg).prepare(cfg)
