"""A progress bar (rich) showing steps, tokens/s and loss; plain log lines when not a TTY;
and the line that says why training stopped before its epochs ran out."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

from nslm.config import TrainConfig


class Progress:
    """``update(step, rate, loss)``; a no-op when disabled (tests, non-zero DDP ranks)."""

    def __init__(self, *, enabled: bool, total: int, start: int = 0) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.total = total
        self.rate = 0.0
        self.loss = float("nan")
        self._last_print = 0.0
        self._bar: RichProgress | None = None
        if enabled and self.tty:
            self._bar = RichProgress(
                TextColumn("train"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:>8,.0f} tok/s  loss {task.fields[loss]:.3f}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._task = self._bar.add_task(
                "train", total=total, completed=start, rate=0.0, loss=float("nan")
            )

    def __enter__(self) -> Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, step: int, rate: float | None = None, loss: float | None = None) -> None:
        if not self.enabled:
            return
        if rate is not None:
            self.rate, self.loss = rate, loss if loss is not None else self.loss
        if self._bar is not None:
            self._bar.update(self._task, completed=step, rate=self.rate, loss=self.loss)
            return
        # Not a terminal (nohup, CI): one line at most every 30 s.
        now = time.monotonic()
        if rate is not None and now - self._last_print >= 30:
            self._last_print = now
            print(
                f"step {step}/{self.total}  {self.rate:,.0f} tok/s  loss {self.loss:.3f}",
                file=sys.stderr,
                flush=True,
            )


def stop_reason(cfg: TrainConfig, st: dict[str, Any], n_batches: int, reason: str) -> str:
    """Why training ended before its epochs did, and where (the bar stops short): ``reason``
    is "steps" (max_steps), "time" (max_minutes) or "halvings" (the rate-halving schedule)."""
    where = f"at the end of epoch {st['epoch']}, step {st['step']:,}"
    if st["batch"] < n_batches:
        where = (
            f"at epoch {st['epoch']} (partial: batch {st['batch']:,} of {n_batches:,}), "
            f"step {st['step']:,}"
        )
    if reason == "steps":
        return f"stopped by max_steps ({cfg.max_steps:,}) {where}"
    if reason == "halvings":
        eps = f"halving_epsilon {cfg.halving_epsilon:g}"
        return f"stopped after {cfg.max_halvings} lr halvings ({eps}) {where}"
    budget = f"{cfg.max_minutes:.1f}" if cfg.max_minutes >= 0.1 else f"{cfg.max_minutes:g}"
    return f"stopped by the time budget ({budget} min) {where}"
