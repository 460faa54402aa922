"""Atomic file writes: every file nslm writes, JSON (:mod:`nslm.files.json_policy`) or bytes.

A write goes to a temporary file in the same folder, then a rename: a process killed
half-way leaves the old file or none, never half a file. The temporary's name holds the
writer's process id (:func:`temporary_prefix`), so the next write of the same file removes
what a killed writer left (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from nslm.files.json_policy import json_text


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


def write_json_atomic(path: Path, value: Any, *, indent: int | None = 1) -> None:
    write_bytes_atomic(path, (json_text(value, indent=indent) + "\n").encode("utf-8"))
