"""The training loop: stateful TBPTT, clipping, LR schedule, per-epoch validation, early
stopping, atomic checkpoints with exact resume, JSONL metrics and optional TensorBoard."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nslm.batches.streams import make_streams
from nslm.config import TrainConfig, class_rules_of, config_from_json, total_threads
from nslm.errors import NslmError
from nslm.models.heads import HNLMLayout
from nslm.models.lm import LanguageModel
from nslm.runs.assets import write_run_assets
from nslm.scores.passes import Scorer, head_of
from nslm.training import checkpoint as ck
from nslm.training import distributed as dd
from nslm.training.embeddings import INIT_VECTORS_FILE, describe, prepare_embeddings
from nslm.training.memory import keep_freed_memory
from nslm.training.metrics import MetricsLog
from nslm.training.optim import build_optimizer, clip_grad_norm, scheduled_lr
from nslm.training.progress import Progress, stop_reason
from nslm.training.results import describe_validation, split_results, training_device


def load_corpus(cfg: TrainConfig):
    from nslm.data import prepare_corpus

    return prepare_corpus(cfg.corpus, cfg.classes, class_rules=class_rules_of(cfg))


class Trainer:
    """One training run in ``run_dir``; ``run()`` trains, ``resume=True`` continues it."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, *, resume: bool = False) -> None:
        self.rank, self.world = dd.init_distributed()
        self.run_dir = Path(run_dir)
        if resume:
            saved = self.run_dir / "config.json"
            if not saved.is_file():
                raise NslmError(f"nothing to resume in {self.run_dir}: no config.json")
            cfg = config_from_json(saved.read_text(encoding="utf-8"))
        self.cfg = cfg
        # Without a DDP launch (train() called from Python) one process does the work the
        # config meant for `processes` of them, on the same streams: give it their threads.
        threads = total_threads(cfg) if self.world == 1 else cfg.threads
        if threads > 0:
            torch.set_num_threads(threads)
        keep_freed_memory()  # large per-step tensors reuse memory instead of faulting it in
        self.device = training_device(cfg)
        self.corpus = load_corpus(cfg)
        self.byte_lm = self.corpus.vocab.is_bytes  # reports bits per byte and accuracy
        self.layout = None
        if "hnlm" in cfg.heads:
            shared = cfg.hnlm_top == "shared"
            self.layout = HNLMLayout.from_corpus(self.corpus, shared=shared)
        torch.manual_seed(cfg.seed)
        self.model = LanguageModel(cfg, len(self.corpus.vocab), self.layout)
        # Grounding (Table 6) and pretrained vectors (Table 5), before DDP copies the weights.
        self.vectors = prepare_embeddings(cfg, self.model, self.corpus, fresh=not resume)
        self.model.to(self.device)
        if cfg.compile:
            self.model.backbone = torch.compile(self.model.backbone)
        self.ddp = dd.wrap_model(self.model)
        self.optimizer = build_optimizer(cfg, self.model)
        train = self.corpus.train
        n = cfg.train_tokens or len(train)
        if cfg.batch_size % self.world:
            raise NslmError(f"batch_size {cfg.batch_size} is not divisible by {self.world} ranks")
        all_streams = make_streams(
            train.token_ids[:n], train.class_ids[:n],
            train.article_ids[:n], cfg.batch_size,
        )  # fmt: skip
        per_rank = cfg.batch_size // self.world
        self.streams = all_streams.take(self.rank * per_rank, per_rank)
        self.n_batches = self.streams.n_batches(cfg.bptt)
        self.state: dict[str, Any] = {
            "epoch": 0, "batch": 0, "step": 0, "lr": cfg.lr, "best": math.inf,
            "best_epoch": -1, "bad_epochs": 0, "elapsed": 0.0, "done": False,
            "world": self.world, "tokens": 0, "step_seconds": 0.0,
            "streams_per_rank": per_rank, "kept_minutes": [],
        }  # fmt: skip
        self.hidden: Any = None
        if resume:
            self._load_latest()
        elif self.rank == 0:
            self._start_run_dir()
        dd.barrier()
        self.metrics = MetricsLog(
            self.run_dir, cfg.heads, rank=self.rank, tensorboard=cfg.tensorboard
        )

    # -- run directory ---------------------------------------------------------------------

    def _start_run_dir(self) -> None:
        if (self.run_dir / "latest.json").exists():
            raise NslmError(f"{self.run_dir} already holds a run; use --resume or a new dir")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        ck.write_json_atomic(self.run_dir / "config.json", self.cfg.to_json())
        ck.write_json_atomic(self.run_dir / "vocab.json", {"itos": self.corpus.vocab.itos})
        # the model side of the corpus, so the run alone serves predict and generate
        write_run_assets(self.run_dir, self.cfg, self.corpus)
        if self.layout is not None:
            ck.write_json_atomic(self.run_dir / "layout.json", self.layout.to_json())
        if self.vectors is not None:
            ck.write_json_atomic(self.run_dir / INIT_VECTORS_FILE, self.vectors)
            print(describe(self.vectors), file=sys.stderr)

    def _save(self) -> None:
        step = self.state["step"]
        dd.barrier()
        tmp = ck.begin_checkpoint(self.run_dir, step) if self.rank == 0 else None
        dd.barrier()
        tmp = tmp or self.run_dir / f".{ck.checkpoint_name(step)}.tmp"
        own: dict[str, torch.Tensor] = {"rng": torch.get_rng_state()}
        if self.hidden is not None:
            for i, t in enumerate(self.hidden):
                own[f"hidden.{i}"] = t.cpu()
        ck.save_tensors_atomic(tmp / f"rank{self.rank}.safetensors", own)
        if self.rank == 0:
            ck.save_tensors_atomic(tmp / "model.safetensors", ck.model_tensors(self.model))
            tensors, meta = ck.optimizer_to_files(self.optimizer)
            ck.save_tensors_atomic(tmp / "optim.safetensors", tensors)
            ck.write_json_atomic(tmp / "optim.json", meta)
            ck.write_json_atomic(tmp / "state.json", self.state)
        dd.barrier()
        if self.rank == 0:
            ck.commit_checkpoint(self.run_dir, step)
        dd.barrier()

    def _load_latest(self) -> None:
        from safetensors.torch import load_file

        path = ck.latest_checkpoint(self.run_dir)
        if path is None:
            raise NslmError(f"nothing to resume in {self.run_dir}: no checkpoint yet")
        saved_vocab = ck.read_json(self.run_dir / "vocab.json").get("itos")
        if saved_vocab != self.corpus.vocab.itos:
            raise NslmError(f"{self.run_dir} was trained on a different vocabulary")
        state = ck.read_json(path / "state.json")
        if state.get("world") != self.world:
            raise NslmError(f"run used {state.get('world')} processes; resume with as many")
        ck.check_stream_layout(state)
        # Checkpoints from before step time was tracked: the wall time bounds it from above.
        state.setdefault("step_seconds", state.get("elapsed", 0.0))
        if state.get("best") is None:  # JSON has no infinity: null = no validation yet
            state["best"] = math.inf
        self.state.update(state)
        ck.load_model_tensors(self.model, path / "model.safetensors")
        optim = ck.optimizer_from_files(
            load_file(str(path / "optim.safetensors")), ck.read_json(path / "optim.json")
        )
        self.optimizer.load_state_dict(optim)
        own = load_file(str(path / f"rank{self.rank}.safetensors"))
        torch.set_rng_state(own["rng"])
        hidden = [own[k] for k in sorted(own) if k.startswith("hidden.")]
        self.hidden = tuple(h.to(self.device) for h in hidden) if hidden else None

    # -- evaluation ------------------------------------------------------------------------

    def _scorer(self) -> Scorer:
        """The one scoring pass over the heads (no micro-models yet), as evaluation runs it."""
        cfg = self.cfg
        return Scorer(
            self.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt, bf16=cfg.bf16,
            accuracy=self.byte_lm,
        )  # fmt: skip

    def validate(self) -> dict[str, float]:
        """Validation perplexity per head, computed on rank 0 and shared with all ranks."""
        cfg = self.cfg
        values = [math.nan] * len(cfg.heads)
        if self.rank == 0:
            valid = head_of(self.corpus.valid, cfg.valid_tokens)
            if cfg.progress:  # scoring takes a while and has no bar of its own
                n = len(valid.token_ids)
                print(f"validating on {n:,} tokens …", file=sys.stderr, flush=True)
            with dd.borrowed_threads():
                scores = self._scorer().score(valid)
            values = [scores.perplexity(h) for h in cfg.heads]
        values = dd.broadcast_floats(values)
        return dict(zip(cfg.heads, values, strict=True))

    # -- training --------------------------------------------------------------------------

    def _step(self, batch: tuple[np.ndarray, ...]) -> torch.Tensor:
        # ids may be stored narrow (uint8 bytes); the model takes int64 on its device
        x, y, c, pos = (torch.from_numpy(a).to(self.device).long() for a in batch)
        mask = pos >= 0
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.bf16):
            loss, stats, hidden = self.ddp(x, y, c, mask, self.hidden)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip > 0:
            clip_grad_norm(list(self.model.parameters()), self.cfg.clip)
        self.optimizer.step()
        # TBPTT: carry the state into the next window without its history.
        self.hidden = None if hidden is None else tuple(t.detach() for t in hidden)
        return stats

    def _end_epoch(self, partial: bool = False) -> bool:
        """Validate, keep the best weights, adjust the lr; True to stop early.

        ``partial``: training stopped mid-epoch (step or time budget). Those weights are
        validated too, since under a cosine schedule they are the most annealed, but the
        schedule and the early-stopping count are left alone.
        """
        cfg, st = self.cfg, self.state
        ppl = self.validate()
        primary = ppl[cfg.heads[0]]
        improved = primary < st["best"]
        if improved:
            st["best"], st["best_epoch"], st["bad_epochs"] = primary, st["epoch"], 0
            if self.rank == 0:
                ck.save_tensors_atomic(
                    self.run_dir / "model.safetensors", ck.model_tensors(self.model)
                )
        elif not partial:
            st["bad_epochs"] += 1
            if cfg.lr_schedule == "plateau":
                st["lr"] /= cfg.lr_decay
        record = {"event": "valid", "epoch": st["epoch"], "step": st["step"], "lr": st["lr"]}
        record["partial_epoch"] = partial
        record.update({f"valid_ppl_{h}": v for h, v in ppl.items()})
        record["elapsed"] = st["elapsed"]
        self.metrics.write(record)
        if self.rank == 0:
            shown = describe_validation(ppl, self.byte_lm)
            # The lr the last step used (the schedule's, not the base of a cosine schedule).
            epoch = f"epoch {st['epoch']}" + (" (partial)" if partial else "")
            print(f"{epoch}: {shown}; lr {self.lr_now:.3g}", file=sys.stderr)
        return st["bad_epochs"] > cfg.patience

    def run(self) -> dict[str, Any]:
        cfg, st = self.cfg, self.state
        total = cfg.max_steps or cfg.epochs * self.n_batches
        self.lr_now = scheduled_lr(cfg, st["lr"], st["step"], total, st["elapsed"])
        progress = Progress(enabled=cfg.progress and self.rank == 0, total=total, start=st["step"])
        with progress:
            while not st["done"] and st["epoch"] < cfg.epochs:
                out_of_steps = self._epoch(total, progress)
                if out_of_steps is None:
                    t0 = time.perf_counter()
                    early = self._end_epoch()
                    # The wall-time budget covers validation too.
                    st["elapsed"] += time.perf_counter() - t0
                    st["epoch"] += 1
                    st["batch"] = 0
                    self.hidden = None  # each epoch restarts the streams from their start
                    st["done"] = early
                else:
                    if self.rank == 0:
                        reason = stop_reason(cfg, st, self.n_batches, out_of_steps)
                        print(reason, file=sys.stderr, flush=True)
                    self._end_epoch(partial=True)
                    st["done"] = True
                self._save()
        return self.finish()

    def _epoch(self, total: int, progress: Progress) -> bool | None:
        """Train on the rest of this epoch's batches. None when the epoch ran out; else the
        budget stopped it: True for max_steps, False for max_minutes."""
        cfg, st = self.cfg, self.state
        for index, batch in self.streams.batches(cfg.bptt, st["batch"]):
            t0 = time.perf_counter()
            self.lr_now = scheduled_lr(cfg, st["lr"], st["step"], total, st["elapsed"])
            for group in self.optimizer.param_groups:
                group["lr"] = self.lr_now
            stats = self._step(batch)
            st["step"] += 1
            st["batch"] = index + 1
            spent = time.perf_counter() - t0
            st["elapsed"] += spent
            st["step_seconds"] += spent
            # Real targets only: the last window is short and padding is masked.
            n_tokens = int((batch[3] >= 0).sum()) * self.world
            st["tokens"] += n_tokens
            self.metrics.add(stats, n_tokens)
            self.metrics.report(st["step"], st["epoch"], self.lr_now, progress, cfg.log_every)
            self._keep_at_marks()  # before the budget check: the last mark is the budget's end
            out_of_steps = bool(cfg.max_steps) and st["step"] >= cfg.max_steps
            out_of_time = cfg.max_minutes > 0 and st["elapsed"] >= cfg.max_minutes * 60
            # Every rank must take the same decision; time differs between ranks.
            if dd.broadcast_floats([float(out_of_steps or out_of_time)])[0]:
                return out_of_steps
            if cfg.checkpoint_every and st["step"] % cfg.checkpoint_every == 0:
                self._save()
        return None

    def _keep_at_marks(self) -> None:
        """Checkpoint and keep (RUN/kept/) when training time passes a mark not yet kept."""
        st = self.state
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
        cfg, st = self.cfg, self.state
        best = self.run_dir / "model.safetensors"
        if self.rank == 0 and not best.is_file():
            # No validation ever ran (zero steps): the current weights are the result.
            ck.save_tensors_atomic(best, ck.model_tensors(self.model))
        dd.barrier()
        ck.load_model_tensors(self.model, best)
        results: dict[str, Any] = {"steps": st["step"], "epochs": st["epoch"]}
        if self.rank == 0:
            with dd.borrowed_threads():
                for split in ("valid", "test"):
                    limit = cfg.valid_tokens if split == "valid" else cfg.test_tokens
                    part = head_of(self.corpus.splits[split], limit)
                    results.update(split_results(self._scorer(), part, cfg.heads, split))
            results["train_minutes"] = st["elapsed"] / 60
            results["train_tokens"] = st["tokens"]
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
