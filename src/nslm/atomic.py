"""Atomic file writes, the one checked reader of safetensors, and the package's one JSON
policy for non-finite numbers.

A write goes to a temporary file in the same folder, then a rename: a process killed
half-way leaves the old file or none, never half a file. The temporary's name holds the
writer's process id (:func:`temporary_prefix`), so the next write of the same file removes
what a killed writer left (:func:`remove_stale_temporaries`). JSON has no NaN or infinity,
so every JSON nslm writes or prints turns a non-finite float (an undefined or infinite
perplexity) into ``null`` (:func:`json_ready`).
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from nslm.errors import NslmError


def temporary_prefix(path: Path) -> str:
    """The name a temporary for ``path`` starts with: ``.NAME.tmp-PID-``."""
    return f".{Path(path).name}.tmp-{os.getpid()}-"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale_temporaries(path: Path) -> None:
    """Delete the temporaries of ``path`` (files or folders) whose writer no longer runs: a
    write killed half-way leaves one, which nothing else would ever remove."""
    path = Path(path)
    start = f".{path.name}.tmp-"
    for stale in path.parent.glob(glob.escape(start) + "*"):
        pid = stale.name[len(start) :].partition("-")[0]
        if not (pid.isascii() and pid.isdigit()) or pid_alive(int(pid)):
            continue
        if stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


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


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp")
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
