"""The training loop, generic over a task (``training/task.py``): budgets, the lr schedule,
clipping, DDP, validation with early stopping or rate halving, atomic checkpoints with exact
resume, kept checkpoints, JSONL metrics and optional TensorBoard, and results.json."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import torch

from nslm.config import TrainConfig, read_config_json, total_threads
from nslm.errors import NslmError
from nslm.training import checkpoint as ck
from nslm.training import distributed as dd
from nslm.training.memory import keep_freed_memory
from nslm.training.metrics import MetricsLog
from nslm.training.optim import RateHalving, build_optimizer, clip_grad_norm, scheduled_lr
from nslm.training.precision import autocast_to, training_precision
from nslm.training.progress import Progress, stop_reason
from nslm.training.results import training_device
from nslm.training.task import TrainingTask, make_task


class Trainer:
    """One training run of ``task`` (default: the config's, from ``make_task``) in ``run_dir``;
    ``run()`` trains, ``resume=True`` continues it."""

    def __init__(
        self,
        cfg: TrainConfig,
        run_dir: Path,
        *,
        resume: bool = False,
        task: TrainingTask | None = None,
    ) -> None:
        self.rank, self.world = dd.init_distributed()
        self.run_dir = Path(run_dir)
        if resume:
            saved = self.run_dir / "config.json"
            if not saved.is_file():
                raise NslmError(f"nothing to resume in {self.run_dir}: no config.json")
            cfg = read_config_json(saved)
        self.cfg = cfg
        # Without a DDP launch (train() called from Python) one process does the work the
        # config meant for `processes` of them, on the same streams: give it their threads.
        threads = total_threads(cfg) if self.world == 1 else cfg.threads
        if threads > 0:
            torch.set_num_threads(threads)
        keep_freed_memory()  # large per-step tensors reuse memory instead of faulting it in
        self.device = training_device(cfg)
        if task is None:
            task = make_task(cfg, self.rank, self.world, self.device, resume)
        self.task = task
        # bf16 where this machine runs it, else float32 with one notice (training/precision.py),
        # decided once the data has been read, so that bad input stays a single error line
        self.precision = training_precision(cfg.bf16, self.device, announce=self.rank == 0)
        self.model = task.model.to(self.device)
        self.ddp = dd.wrap_model(self.model)
        self.optimizer = build_optimizer(cfg, self.model)
        self.n_batches = task.n_batches()
        self.state: dict[str, Any] = {
            "epoch": 0,
            "batch": 0,
            "step": 0,
            "lr": cfg.lr,
            "best": math.inf,
            "best_epoch": -1,
            "bad_epochs": 0,
            "elapsed": 0.0,
            "done": False,
            "world": self.world,
            "tokens": 0,
            "step_seconds": 0.0,
            **task.state_fields,
            "kept_minutes": [],
        }
        self.halving: RateHalving | None = None
        if cfg.lr_schedule == "halving":
            self.halving = RateHalving(cfg.lr, cfg.halving_epsilon, cfg.max_halvings)
            self.state["halving"] = self.halving.state_dict()
        self.hidden: Any = None  # carried from batch to batch: the task's, opaque here
        if resume:
            self._load_latest()
        elif self.rank == 0:
            self._start_run_dir()
        dd.barrier()
        self.metrics = MetricsLog(
            self.run_dir, task.stat_names, rank=self.rank, tensorboard=cfg.tensorboard
        )

    # -- run directory ---------------------------------------------------------------------

    def _start_run_dir(self) -> None:
        if (self.run_dir / "latest.json").exists():
            raise NslmError(f"{self.run_dir} already holds a run; use --resume or a new dir")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ck.write_json_atomic(self.run_dir / "config.json", self.cfg.to_json())
        self.task.write_assets(self.run_dir)

    def _save(self) -> None:
        ck.save_checkpoint(
            self.run_dir, self.rank, self.state, self.model, self.optimizer, self.hidden
        )

    def _load_latest(self) -> None:
        path = ck.latest_checkpoint(self.run_dir)
        if path is None:
            raise NslmError(f"nothing to resume in {self.run_dir}: no checkpoint yet")
        state = ck.read_json(path / "state.json")
        self.task.check_resume(self.run_dir, state)
        if state.get("world") != self.world:
            raise NslmError(f"run used {state.get('world')} processes; resume with as many")
        # Checkpoints from before step time was tracked: the wall time bounds it from above.
        state.setdefault("step_seconds", state.get("elapsed", 0.0))
        if state.get("best") is None:  # JSON has no infinity: null = no validation yet
            state["best"] = math.inf
        self.state.update(state)
        if self.halving is not None:
            self.halving.load_state_dict(self.state["halving"])
        self.hidden = ck.restore_checkpoint(
            path, self.rank, self.model, self.optimizer, self.device
        )

    # -- validation ------------------------------------------------------------------------

    def validate(self) -> dict[str, float]:
        """The task's validation figures, computed on rank 0 and shared with all ranks."""
        names = self.task.metric_names
        values = [math.nan] * len(names)
        if self.rank == 0:
            with dd.borrowed_threads():
                figures = self.task.validate()
            values = [figures[n] for n in names]
        values = dd.broadcast_floats(values)
        return dict(zip(names, values, strict=True))

    def _validation(self, at: str) -> bool:
        """Validate, keep the best weights, adjust the lr; True to stop training.

        ``at`` is "epoch" (an epoch's end), "step" (every ``eval_every`` steps inside an
        epoch) or "partial" (a budget stopped training mid-epoch: those weights are
        validated too, since under a cosine schedule they are the most annealed, but the
        schedule and the early-stopping count are left alone). Only epoch ends count toward
        ``patience``, where an epoch gained if any of its validations set a new best;
        ``halving`` takes every validation but the partial one.
        """
        cfg, st = self.cfg, self.state
        t0 = time.perf_counter()
        figures = self.validate()
        primary = figures[self.task.metric_names[0]]
        if primary < st["best"]:
            st["best"], st["best_epoch"] = primary, st["epoch"]
            if self.rank == 0:
                ck.save_tensors_atomic(
                    self.run_dir / "model.safetensors", ck.model_tensors(self.model)
                )
        if at == "epoch":
            if st["best_epoch"] == st["epoch"]:
                st["bad_epochs"] = 0
            else:
                st["bad_epochs"] += 1
                if cfg.lr_schedule == "plateau":
                    st["lr"] /= cfg.lr_decay
        if self.halving is not None and at != "partial":
            st["lr"] = self.halving.update(primary)
            st["halving"] = self.halving.state_dict()
        self._record(figures, at)
        if at != "partial":  # the wall-time budget covers validation too
            st["elapsed"] += time.perf_counter() - t0
        if self.halving is not None:
            return self.halving.done
        return at == "epoch" and st["bad_epochs"] > cfg.patience

    def _record(self, figures: dict[str, float], at: str) -> None:
        """The validation's line in metrics.jsonl and on stderr."""
        st = self.state
        record = {"event": "valid", "epoch": st["epoch"], "step": st["step"], "lr": st["lr"]}
        record["partial_epoch"] = at == "partial"
        record["mid_epoch"] = at == "step"
        record.update({f"valid_{name}": v for name, v in figures.items()})
        if self.halving is not None:
            record["halvings"] = self.halving.halvings
        record["elapsed"] = st["elapsed"]
        self.metrics.write(record)
        if self.rank != 0:
            return
        where = {"partial": " (partial)", "step": f", step {st['step']:,}"}.get(at, "")
        # The lr the last step used (the schedule's, not the base of a cosine schedule).
        line = f"epoch {st['epoch']}{where}: {self.task.describe(figures)}; lr {self.lr_now:.3g}"
        if self.halving is not None:
            line += f", next {st['lr']:.3g} ({self.halving.halvings} halvings)"
        print(line, file=sys.stderr, flush=True)
        if self.halving is not None and self.halving.done:
            print(stop_reason(self.cfg, st, self.n_batches, "halvings"), file=sys.stderr)

    # -- training --------------------------------------------------------------------------

    def _step(self, batch: Any) -> tuple[torch.Tensor, int]:
        """One optimizer step on ``batch``: (the loss's stats, this rank's target tokens)."""
        with autocast_to(self.precision, self.device):
            loss, stats, hidden, n_tokens = self.task.loss(self.ddp, batch, self.hidden)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip > 0:
            clip_grad_norm(list(self.model.parameters()), self.cfg.clip)
        self.optimizer.step()
        self.hidden = hidden
        return stats, n_tokens

    def run(self) -> dict[str, Any]:
        cfg, st = self.cfg, self.state
        total = cfg.max_steps or cfg.epochs * self.n_batches
        self.lr_now = scheduled_lr(cfg, st["lr"], st["step"], total, st["elapsed"])
        progress = Progress(enabled=cfg.progress and self.rank == 0, total=total, start=st["step"])
        with progress:
            while not st["done"] and st["epoch"] < cfg.epochs:
                self.task.set_epoch(st["epoch"])
                stopped = self._epoch(total, progress)
                if stopped is None:
                    st["done"] = self._validation("epoch")
                    st["epoch"] += 1
                    st["batch"] = 0
                    self.hidden = None  # each epoch starts its batches with a fresh state
                else:
                    if stopped != "halvings":  # a budget: say so, and validate those weights
                        if self.rank == 0:
                            reason = stop_reason(cfg, st, self.n_batches, stopped)
                            print(reason, file=sys.stderr, flush=True)
                        self._validation("partial")
                    st["done"] = True
                self._save()
        return self.finish()

    def _epoch(self, total: int, progress: Progress) -> str | None:
        """Train on the rest of this epoch's batches. None when the epoch ran out; else why
        training stops inside it: "steps" (max_steps), "time" (max_minutes) or "halvings"
        (the rate-halving schedule, at an ``eval_every`` validation)."""
        cfg, st = self.cfg, self.state
        for index, batch in self.task.batches(st["batch"]):
            t0 = time.perf_counter()
            self.lr_now = scheduled_lr(cfg, st["lr"], st["step"], total, st["elapsed"])
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_now
            stats, n_tokens = self._step(batch)
            st["step"] += 1
            st["batch"] = index + 1
            spent = time.perf_counter() - t0
            st["elapsed"] += spent
            st["step_seconds"] += spent
            n_tokens *= self.world  # ranks take equal shares of the batch
            st["tokens"] += n_tokens
            self.metrics.add(stats, n_tokens)
            self.metrics.report(st["step"], st["epoch"], self.lr_now, progress, cfg.log_every)
            self._keep_at_marks()  # before the budget check: the last mark is the budget's end
            out_of_steps = bool(cfg.max_steps) and st["step"] >= cfg.max_steps
            out_of_time = cfg.max_minutes > 0 and st["elapsed"] >= cfg.max_minutes * 60
            # Every rank must take the same decision; time differs between ranks.
            if dd.broadcast_floats([float(out_of_steps or out_of_time)])[0]:
                return "steps" if out_of_steps else "time"
            # (the epoch's last batch is validated by the epoch's end)
            due = cfg.eval_every and st["step"] % cfg.eval_every == 0
            if due and st["batch"] < self.n_batches and self._validation("step"):
                return "halvings"
            if cfg.checkpoint_every and st["step"] % cfg.checkpoint_every == 0:
                self._save()
        return None

    def _keep_at_marks(self) -> None:
        """Checkpoint and keep (RUN/kept/) when training time passes a mark not yet kept;
        keep the weights alone every ``keep_weights_every`` steps (learning curves)."""
        st = self.state
        every = self.cfg.keep_weights_every
        if every and st["step"] % every == 0 and self.rank == 0:
            ck.save_tensors_atomic(
                self.run_dir / "kept" / f"step-{st['step']:07d}.safetensors",
                ck.model_tensors(self.model),
            )
        due = [m for m in self.cfg.keep_checkpoints_at_minutes if m not in st["kept_minutes"]]
        # the same decision on every rank: rank 0's clock decides
        if not due or not dd.broadcast_floats([float(st["elapsed"] >= due[0] * 60)])[0]:
            return
        st["kept_minutes"].append(due[0])
        self._save()
        if self.rank == 0:
            ck.keep_checkpoint(self.run_dir, st["step"], due[0])

    def finish(self) -> dict[str, Any]:
        """Score valid and test with the best weights; write results.json (rank 0)."""
        st = self.state
        best = self.run_dir / "model.safetensors"
        if self.rank == 0 and not best.is_file():
            # No validation ever ran (zero steps): the current weights are the result.
            ck.save_tensors_atomic(best, ck.model_tensors(self.model))
        dd.barrier()
        ck.load_model_tensors(self.model, best)
        results: dict[str, Any] = {"steps": st["step"], "epochs": st["epoch"]}
        if self.rank == 0:
            with dd.borrowed_threads():
                results.update(self.task.final_results())
            results["train_minutes"] = st["elapsed"] / 60
            results["train_tokens"] = st["tokens"]
            results["precision"] = self.precision
            # Throughput of the optimisation steps alone (validation excluded).
            results["train_tokens_per_s"] = st["tokens"] / max(st.get("step_seconds", 0.0), 1e-9)
            ck.write_json_atomic(self.run_dir / "results.json", results)
            self.metrics.write({"event": "final", **results})
        self.metrics.close()
        dd.barrier()
        return results


def train(cfg: TrainConfig, run_dir: Path, *, resume: bool = False) -> dict[str, Any]:
    """Train (or resume) a run; returns the final results (on rank 0)."""
    try:
        return Trainer(cfg, run_dir, resume=resume).run()
    finally:
        dd.shutdown()
