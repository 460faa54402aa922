"""Atomic file writes, and the package's one JSON policy for non-finite numbers.

A write goes to a temporary file in the same folder, then a rename: a process killed
half-way leaves the old file or none, never half a file. JSON has no NaN or infinity, so
every JSON nslm writes or prints turns a non-finite float (an undefined or infinite
perplexity) into ``null`` (:func:`json_ready`).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are for sharing
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth, replaced by None (JSON null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def json_text(value: Any, *, indent: int | None = 1) -> str:
    """Strict JSON text of ``value`` under :func:`json_ready`'s policy."""
    try:  # most values hold no NaN or inf: one pass in C, no walk in Python first
        return json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:  # a non-finite float somewhere: write those as null
        return json.dumps(json_ready(value), indent=indent, allow_nan=False)


def write_json_atomic(path: Path, value: Any, *, indent: int | None = 1) -> None:
    write_bytes_atomic(path, (json_text(value, indent=indent) + "\n").encode("utf-8"))
