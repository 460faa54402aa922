"""Checkpoints: tensors in safetensors, everything else in JSON; every write is atomic.

Layout of a run directory::

    config.json  vocab.json  layout.json     what the model is (written once)
    assets.json  assets.npz                  the model side of the corpus (nslm.runs.assets)
    latest.json                              {"checkpoint": "ckpt-00000500"}
    ckpt-00000500/                           one resumable checkpoint:
        model.safetensors                    weights
        optim.safetensors  optim.json        optimizer tensors / hyper-parameters
        state.json                           epoch, step, lr, best score, rate halving, ...
        rank0.safetensors                    this rank's hidden state and RNG state
    model.safetensors                        the best weights (for eval and predict)
    kept/minute-005/                         a checkpoint kept at a training-time mark
                                             (``keep_checkpoints_at_minutes``), never pruned
    metrics.jsonl  results.json

A checkpoint directory is written under a temporary name and renamed into place; then
``latest.json`` is replaced atomically. A SIGKILL at any moment leaves ``latest.json``
pointing at a complete checkpoint. Nothing here unpickles: safetensors and JSON only.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from nslm.errors import NslmError
from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import read_json
from nslm.files.tensors import read_tensors, save_tensors_atomic
from nslm.runs.files import load_model_tensors, model_tensors  # a model's weights file

__all__ = [
    "begin_checkpoint",
    "check_stream_layout",
    "commit_checkpoint",
    "keep_checkpoint",
    "latest_checkpoint",
    "load_model_tensors",
    "model_tensors",
    "optimizer_from_files",
    "optimizer_to_files",
    "read_json",
    "restore_checkpoint",
    "save_checkpoint",
    "save_tensors_atomic",
    "write_json_atomic",
]


def optimizer_to_files(opt: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict]:
    """Split an optimizer state dict into tensors (safetensors) and plain values (JSON)."""
    sd = opt.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entry in sd["state"].items():
        for key, value in entry.items():
            if isinstance(value, torch.Tensor):
                tensors[f"{idx}.{key}"] = value
            else:
                scalars.setdefault(str(idx), {})[key] = value
    return tensors, {"param_groups": sd["param_groups"], "scalars": scalars}


def optimizer_from_files(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        idx, key = name.split(".", 1)
        state.setdefault(int(idx), {})[key] = value
    for idx, entry in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(entry)
    return {"state": state, "param_groups": meta["param_groups"]}


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}"


def begin_checkpoint(run_dir: Path, step: int) -> Path:
    """The temporary directory that this checkpoint's files go into (all ranks write here)."""
    tmp = run_dir / f".{checkpoint_name(step)}.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


def commit_checkpoint(run_dir: Path, step: int, keep: int = 1) -> None:
    """Rename the finished temporary directory into place, point latest.json at it, prune."""
    tmp = run_dir / f".{checkpoint_name(step)}.tmp"
    final = run_dir / checkpoint_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    write_json_atomic(run_dir / "latest.json", {"checkpoint": final.name, "step": step})
    olds = sorted(p for p in run_dir.glob("ckpt-*") if p.is_dir() and p.name != final.name)
    for old in olds[: max(0, len(olds) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    for stale in run_dir.glob(".ckpt-*.tmp"):
        shutil.rmtree(stale, ignore_errors=True)


def keep_checkpoint(run_dir: Path, step: int, minutes: float) -> Path:
    """Copy the committed checkpoint of ``step`` to ``RUN/kept/minute-MMM`` (whole minutes,
    or ``minute-0.5`` below one): rotation never removes it. Written under a temporary name
    and renamed, as checkpoints are."""
    label = f"{minutes:03.0f}" if float(minutes).is_integer() else f"{minutes:g}"
    final = run_dir / "kept" / f"minute-{label}"
    tmp = run_dir / "kept" / f".minute-{label}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(run_dir / checkpoint_name(step), tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def save_checkpoint(
    run_dir: Path,
    rank: int,
    state: dict[str, Any],
    model: torch.nn.Module,
    optimizer: Any,
    hidden: tuple[torch.Tensor, ...] | None,
) -> None:
    """Every rank: the resumable checkpoint of step ``state["step"]``. Rank 0 writes the
    weights, optimizer and ``state``; each rank its RNG and carried hidden state. Rank 0
    commits it once all have written."""
    from nslm.training import distributed as dd

    step = state["step"]
    dd.barrier()
    tmp = begin_checkpoint(run_dir, step) if rank == 0 else None
    dd.barrier()
    tmp = tmp or run_dir / f".{checkpoint_name(step)}.tmp"
    own: dict[str, torch.Tensor] = {"rng": torch.get_rng_state()}
    for i, t in enumerate(hidden or ()):
        own[f"hidden.{i}"] = t.cpu()
    try:
        save_tensors_atomic(tmp / f"rank{rank}.safetensors", own)
        if rank == 0:
            save_tensors_atomic(tmp / "model.safetensors", model_tensors(model))
            tensors, meta = optimizer_to_files(optimizer)
            save_tensors_atomic(tmp / "optim.safetensors", tensors)
            write_json_atomic(tmp / "optim.json", meta)
            write_json_atomic(tmp / "state.json", state)
    except BaseException:  # a full disk, Ctrl-C: no half checkpoint stays behind
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    dd.barrier()
    if rank == 0:
        commit_checkpoint(run_dir, step)
    dd.barrier()


def restore_checkpoint(
    path: Path, rank: int, model: torch.nn.Module, optimizer: Any, device: torch.device
) -> tuple[torch.Tensor, ...] | None:
    """Load the weights, optimizer and this rank's RNG state of checkpoint ``path``; the
    hidden state this rank carried (on ``device``), or None."""
    load_model_tensors(model, path / "model.safetensors")
    optim = optimizer_from_files(
        read_tensors(path / "optim.safetensors", "optimizer state"), read_json(path / "optim.json")
    )
    optimizer.load_state_dict(optim)
    own = read_tensors(path / f"rank{rank}.safetensors", "this rank's state")
    torch.set_rng_state(own["rng"])
    hidden = [own[k] for k in sorted(own) if k.startswith("hidden.")]
    return tuple(h.to(device) for h in hidden) if hidden else None


def check_stream_layout(state: dict[str, Any]) -> None:
    """Refuse a DDP checkpoint from before ``streams_per_rank`` was saved: ``batch_size``
    then counted one rank's streams, so resuming would change every rank's streams."""
    if int(state.get("world", 1)) > 1 and "streams_per_rank" not in state:
        raise NslmError(
            "this DDP run was made by an older nslm (batch_size per rank); "
            "resume it with that version"
        )


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = run_dir / "latest.json"
    if not pointer.is_file():
        return None
    try:
        name = json.loads(pointer.read_text())["checkpoint"]
    except (json.JSONDecodeError, KeyError, TypeError):
        raise NslmError(f"malformed {pointer}") from None
    path = run_dir / name
    if not path.is_dir() or "/" in name:
        raise NslmError(f"{pointer} points at a missing checkpoint {name}")
    return path
