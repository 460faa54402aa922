"""The one checked reader of safetensors, the one binary format nslm reads back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nslm.errors import NslmError


def read_tensors(path: Path, what: str = "tensors") -> dict[str, Any]:
    """The tensors of a safetensors file, the one binary format nslm reads back; a missing,
    truncated or foreign file (a pickle in its place) is a one-line error naming it, and
    nothing in it is ever executed."""
    from safetensors import SafetensorError  # here: torch is not imported for a JSON write
    from safetensors.torch import load_file

    try:
        return load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise NslmError(f"cannot read {what} {path}: {exc}") from None
