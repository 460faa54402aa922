"""Atomic writes: the next write of a file removes the temporary a killed writer left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nslm.files.atomic import write_json_atomic


def test_a_write_removes_only_what_a_dead_writer_left_of_the_same_file(tmp_path: Path) -> None:
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(ended.stdout)
    stale = tmp_path / f".out.json.tmp-{dead}-abc.tmp"  # a writer killed half-way
    running = tmp_path / f".out.json.tmp-{os.getpid()}-def.tmp"  # a writer still at work
    other = tmp_path / f".other.json.tmp-{dead}-ghi.tmp"  # another file's
    for path in (stale, running, other):
        path.write_text("half a fi")
    write_json_atomic(tmp_path / "out.json", {"a": 1})
    assert (tmp_path / "out.json").read_text() == '{\n "a": 1\n}\n'
    assert not stale.exists() and running.exists() and other.exists()
