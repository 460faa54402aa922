"""Checkpoints: tensors in safetensors, everything else in JSON; every write is atomic.

Layout of a run directory::

    config.json  vocab.json  layout.json     what the model is (written once)
    assets.json  assets.npz                  the model side of the corpus (nslm.runs.assets)
    latest.json                              {"checkpoint": "ckpt-00000500"}
    ckpt-00000500/                           one resumable checkpoint:
        model.safetensors                    weights
        optim.safetensors  optim.json        optimizer tensors / hyper-parameters
        state.json                           epoch, step, lr, best score, ...
        rank0.safetensors                    this rank's hidden state and RNG state
    model.safetensors                        the best weights (for eval and predict)
    metrics.jsonl  results.json

A checkpoint directory is written under a temporary name and renamed into place; then
``latest.json`` is replaced atomically. A SIGKILL at any moment leaves ``latest.json``
pointing at a complete checkpoint. Nothing here unpickles: safetensors and JSON only.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from nslm.atomic import write_json_atomic
from nslm.errors import NslmError


def save_tensors_atomic(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file({k: v.detach().contiguous().clone() for k, v in tensors.items()}, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict without duplicates: tied weights are saved once, under their first name."""
    seen: dict[int, str] = {}
    out: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        key = t.data_ptr()
        if key in seen and t.numel():
            continue
        seen[key] = name
        out[name] = t
    return out


def load_model_tensors(model: torch.nn.Module, path: Path) -> None:
    try:
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types
        raise NslmError(f"cannot read weights {path}: {exc}") from None
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    # Tied weights are stored once; any other missing key means a mismatched checkpoint.
    tied = {n for n, p in model.state_dict().items() if n not in tensors}
    really_missing = [m for m in missing if m not in tied or not _is_tied(model, m)]
    if really_missing or unexpected:
        raise NslmError(
            f"weights {path} do not fit this model (missing {really_missing[:3]}, "
            f"unexpected {unexpected[:3]})"
        )


def _is_tied(model: torch.nn.Module, name: str) -> bool:
    sd = model.state_dict()
    ptr = sd[name].data_ptr()
    return any(k != name and v.data_ptr() == ptr for k, v in sd.items())


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


def check_stream_layout(state: dict[str, Any]) -> None:
    """Refuse a DDP checkpoint from before ``streams_per_rank`` was saved: ``batch_size``
    then counted one rank's streams, so resuming would change every rank's streams."""
    if int(state.get("world", 1)) > 1 and "streams_per_rank" not in state:
        raise NslmError("this DDP run was made by an older nslm (batch_size per rank); "
                        "resume it with that version")  # fmt: skip


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


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NslmError(f"missing file {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise NslmError(f"malformed JSON {path}: {exc}") from None
