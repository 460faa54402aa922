"""Paper Table 6: grounded class-token embeddings against the plain NNLM, side by side.

    python benchmarks/grounded.py [--minutes 12] [--config configs/wt2-cpu.toml]

Trains two copies of the same config at the same time, one thread each, for the same wall
time: one plain, one with ``grounded = true`` (fixed value / lat-lon dimensions appended to
the input embeddings). Then ``nslm fit-micro --fast`` and ``nslm eval --split test`` on each,
and writes benchmarks/results/grounded.json with both runs' per-class test perplexities and
the grounded ÷ plain ratio of every row (NNLM and HNLM columns).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from cli_runs import eval_test_tables, nslm_command
from machine import machine_info, today
from nslm.atomic import write_json_atomic

OUT = Path(__file__).parent / "results" / "grounded.json"


def rows_of(run: Path) -> dict[str, Any]:
    """Every row of the run's test tables: {table: {row: {model: perplexity}}}."""
    return {name: entry["rows"] for name, entry in eval_test_tables(run).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--config", type=Path, default=Path("configs/wt2-cpu.toml"))
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    # The two runs train side by side, one core each: one single-thread process per run.
    common = [f"max_minutes={args.minutes}", "threads=1", "processes=1", "progress=false",
              "checkpoint_every=0"]  # fmt: skip
    runs = {"plain": args.runs / "table6-plain", "grounded": args.runs / "table6-grounded"}
    commands = {}
    for name, run in runs.items():
        sets = [*common, *(["grounded=true"] if name == "grounded" else [])]
        overrides = [a for s in sets for a in ("--set", s)]
        commands[name] = nslm_command("train", str(args.config), *overrides, "--run-dir", str(run))
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    started = time.perf_counter()
    procs = {
        name: subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
        for name, cmd in commands.items()
    }
    for name, proc in procs.items():
        if proc.wait() != 0:
            raise SystemExit(f"training the {name} run failed")
    train_seconds = time.perf_counter() - started
    rows = {name: rows_of(run) for name, run in runs.items()}
    ratio = {
        table: {
            row: {
                m: rows["grounded"][table][row][m] / v
                for m, v in values.items()
                if m in ("NNLM", "HNLM") and v
            }
            for row, values in rows["plain"][table].items()
        }
        for table in rows["plain"]
    }
    out = {
        "command": "python " + shlex.join(sys.argv),
        "train_commands": {k: shlex.join(v[1:]) for k, v in commands.items()},
        "date": today(),
        "minutes_each": args.minutes,
        "train_wall_seconds": train_seconds,
        "plain": rows["plain"],
        "grounded": rows["grounded"],
        "ratio_grounded_to_plain": ratio,
        "machine": machine_info(),
    }
    write_json_atomic(args.out, out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
