"""What a training run records: metrics.jsonl (rank 0), TensorBoard when asked, and the
running loss / throughput meter behind the progress bar."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from nslm.training import distributed as dd
from nslm.training.progress import Progress


class MetricsLog:
    """Appends records to ``run_dir/metrics.jsonl`` on rank 0 (and TensorBoard scalars)."""

    def __init__(self, run_dir: Path, heads: list[str], *, rank: int, tensorboard: bool) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.heads = list(heads)
        self.rank = rank
        self.writer = None
        if tensorboard and rank == 0:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(Path(run_dir) / "tensorboard"))
        # per-head [sum NLL, count] and tokens since the last log line
        self.sums = torch.zeros(len(self.heads), 2, dtype=torch.float64)
        self.t_last, self.tokens_last = time.perf_counter(), 0

    def write(self, record: dict[str, Any]) -> None:
        if self.rank != 0:
            return
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if isinstance(value, int | float) and key not in ("step", "epoch"):
                    self.writer.add_scalar(key, value, record.get("step", 0))

    def add(self, stats: torch.Tensor, tokens: int) -> None:
        """One step's per-head (sum NLL, count) and its real target tokens (all ranks)."""
        self.sums += stats.detach().double().cpu()
        self.tokens_last += tokens

    def report(self, step: int, epoch: int, lr: float, progress: Progress, every: int) -> None:
        """Every ``every`` steps: mean losses (over all ranks) and tokens/s, then reset."""
        if step % every:
            progress.update(step)
            return
        self.sums = dd.all_reduce_sum(self.sums)
        now = time.perf_counter()
        losses = (self.sums[:, 0] / self.sums[:, 1].clamp(min=1)).tolist()
        rate = self.tokens_last / max(now - self.t_last, 1e-9)
        record: dict[str, Any] = {"step": step, "epoch": epoch, "lr": lr}
        record.update({f"loss_{h}": v for h, v in zip(self.heads, losses, strict=True)})
        record["tokens_per_s"] = rate
        self.write(record)
        progress.update(step, rate, losses[0])
        self.sums.zero_()
        self.t_last, self.tokens_last = now, 0

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
