"""Run ``nslm`` commands from a benchmark, as a user would, and read what they wrote."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def nslm_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nslm", *args]


def nslm(*args: str) -> None:
    """Run ``nslm ARGS`` (logged to stderr); a failure stops the benchmark."""
    cmd = nslm_command(*args)
    print(f"[{time.strftime('%H:%M:%S')}] {shlex.join(cmd[1:])}", file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True)


def eval_test_tables(run: Path, *eval_flags: str, fit_micro: bool = True) -> dict[str, Any]:
    """A run's test tables ({table: entry} of RUN/tables_test.json): ``nslm micro fit --fast``
    first when ``fit_micro`` and the run has no micro.json (the MoG-free grid: these
    benchmarks compare LMs), then ``nslm eval RUN --split test EVAL_FLAGS``."""
    if fit_micro and not (run / "micro.json").is_file():
        nslm("micro", "fit", str(run), "--fast")
    nslm("eval", str(run), "--split", "test", *eval_flags)
    return json.loads((run / "tables_test.json").read_text())["tables"]
