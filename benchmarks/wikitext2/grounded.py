"""Paper Tables 5 and 6: one change to the input embeddings against the plain run, side by side.

    python benchmarks/wikitext2/grounded.py [--variant grounded|glove] [--minutes 12]
                                  [--config configs/wt2-cpu.toml]

Trains two copies of the same config at the same time, one thread each, for the same wall
time: one plain, one with the variant:

* ``grounded`` (Table 6): ``grounded = true``, fixed value / lat-lon dimensions appended to
  the input embeddings (on the tied default, after the softmax's own rows)
  → benchmarks/results/grounded.json;
* ``glove`` (Table 5): input embeddings initialised from GloVe 6B 50d
  (``init_vectors = "glove-6b-50d"``, ``pip install 'nslm[glove]'``); both runs take
  ``emb_size = 50`` (the vectors' own width, no projection) and untied embeddings
  → benchmarks/results/glove.json.

Then ``nslm micro fit --fast`` and ``nslm eval --split test`` on each; the JSON holds both
runs' per-class test perplexities and the variant ÷ plain ratio of every row (NNLM and HNLM).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from cli_runs import eval_test_tables, nslm_command
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "results"
# variant → (overrides of both runs, overrides of the variant run only)
VARIANTS = {
    "grounded": ([], ["grounded=true"]),
    "glove": (["emb_size=50", "tie_weights=false"], ["init_vectors=glove-6b-50d"]),
}


def rows_of(run: Path) -> dict[str, Any]:
    """Every row of the run's test tables: {table: {row: {model: perplexity}}}."""
    return {name: entry["rows"] for name, entry in eval_test_tables(run).items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="grounded")
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--config", type=Path, default=Path("configs/wt2-cpu.toml"))
    parser.add_argument("--runs", type=Path, default=Path("runs"))
    parser.add_argument("--out", type=Path, default=None, help="[results/VARIANT.json]")
    args = parser.parse_args()
    variant = args.variant
    out_path = args.out or RESULTS / f"{variant}.json"
    both, only = VARIANTS[variant]
    # The two runs train side by side, one core each: one single-thread process per run.
    common = [
        f"max_minutes={args.minutes}",
        "threads=1",
        "processes=1",
        "progress=false",
        "checkpoint_every=0",
        *both,
    ]
    runs = {"plain": args.runs / f"{variant}-plain", variant: args.runs / f"{variant}-run"}
    commands = {}
    for name, run in runs.items():
        sets = [*common, *(only if name == variant else [])]
        overrides = [a for s in sets for a in ("--set", s)]
        commands[name] = nslm_command(
            "train", "--config", str(args.config), *overrides, "--run-dir", str(run)
        )
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
                m: rows[variant][table][row][m] / v
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
        variant: rows[variant],
        f"ratio_{variant}_to_plain": ratio,
        "machine": machine_info(),
    }
    write_json_atomic(out_path, out)
    print(f"wrote {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
