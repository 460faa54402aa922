"""A model's weights file: its state dict as safetensors, tied weights stored once, and
loaded back into a model checked against its shapes (the file I/O itself: nslm.files)."""

from __future__ import annotations

from pathlib import Path

import torch

from nslm.errors import NslmError
from nslm.files.tensors import read_tensors


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
