"""Safetensors, the one binary format nslm reads back: written atomically, read checked."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic

if TYPE_CHECKING:
    import torch


def read_tensors(path: Path, what: str = "tensors") -> dict[str, Any]:
    """The tensors of a safetensors file, the one binary format nslm reads back; a missing,
    truncated or foreign file (a pickle in its place) is a one-line error naming it, and
    nothing in it is ever executed."""
    from safetensors import SafetensorError  # here: a JSON write does not import torch
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise NslmError(f"cannot read {what} {path}: {exc}") from None


def save_tensors_atomic(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """Serialised in memory, then written as any file is (:func:`write_bytes_atomic`): a
    failed write (a full disk) is an OSError that names the file, not safetensors' own."""
    from safetensors.torch import save

    plain = {k: v.detach().contiguous().clone() for k, v in tensors.items()}
    write_bytes_atomic(path, save(plain))
