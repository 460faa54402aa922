"""The files of a run directory that training writes and every later stage reads: weights
as safetensors (tied weights stored once) and metadata as JSON. Nothing is unpickled."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save

from nslm.atomic import write_bytes_atomic
from nslm.errors import NslmError
from nslm.tensor_files import read_tensors


def save_tensors_atomic(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Serialised in memory, then written as any file is (:func:`write_bytes_atomic`): a
    failed write (a full disk) is an OSError that names the file, not safetensors' own."""
    plain = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    write_bytes_atomic(path, save(plain))


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
    tensors = read_tensors(path, "weights")
    expected = model.state_dict()
    for name, tensor in tensors.items():  # load_state_dict would raise a RuntimeError
        if name in expected and tensor.shape != expected[name].shape:
            raise NslmError(
                f"weights {path} do not fit this model: {name} is {tuple(tensor.shape)} in the "
                f"file, {tuple(expected[name].shape)} in the model (weights of another run?)"
            )
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


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NslmError(f"missing file {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise NslmError(f"malformed JSON {path}: {exc}") from None
