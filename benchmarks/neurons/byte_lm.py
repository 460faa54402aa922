"""The byte-level LSTM LM on IMDB reviews: train the default config, report bits per byte.

    python benchmarks/neurons/byte_lm.py                 # the ≤ 60-minute default (a quiet machine)
    python benchmarks/neurons/byte_lm.py --minutes 2     # a smoke run of the whole path

Runs ``nslm train --config configs/byte-lm.toml`` with ``max_minutes`` set to ``--minutes`` into
``--run-dir`` (kept afterwards: its ``kept/minute-*`` checkpoints feed the probes' emergence
curve). The checkpoints are kept at the config's marks (5, 10, 20, 40 and 60 minutes),
scaled by ``--minutes`` / 60 for a shorter run so a smoke run exercises them too. Then the
held-out validation and test reviews are scored with the final weights (bits per byte and
next-byte accuracy), and ``extract_bytes_per_s`` times the cell-state extractor
(``nslm.byte_lm.probes.states.final_states``) on the 500 validation reviews. Writes
benchmarks/results/byte_lm.json (or ``--out``).
"""

from __future__ import annotations

import os

# Before torch loads: OpenMP threads that spin while waiting for a descheduled sibling slow
# a shared CPU down many times (nslm's own commands set this too; cli/train.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "byte-lm.toml"
RESULTS = Path(__file__).resolve().parents[1] / "results" / "byte_lm.json"


def train(minutes: float, run_dir: Path) -> tuple[list[str], float]:
    from nslm.config import load_config

    marks = load_config(CONFIG).keep_checkpoints_at_minutes
    scaled = [round(m * minutes / 60, 3) for m in marks]
    command = [
        sys.executable,
        "-m",
        "nslm",
        "train",
        "--config",
        str(CONFIG.relative_to(ROOT)),
        "--set",
        f"max_minutes={minutes:g}",
        "--set",
        "progress=false",
        "--set",
        f"keep_checkpoints_at_minutes={json.dumps(scaled)}",
        "--run-dir",
        str(run_dir),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return command, time.perf_counter() - start


def extraction_rate(run_dir: Path) -> dict[str, float]:
    """Bytes/s of final_states over the held-out validation reviews (2 threads)."""

    from nslm.byte_lm.data import imdb_split_reviews
    from nslm.byte_lm.probes.states import final_states
    from nslm.runs.open import open_run

    loaded = open_run(run_dir, micro="none", threads=2).loaded
    reviews = imdb_split_reviews()["valid"]
    start = time.perf_counter()
    final_states(loaded, reviews)
    seconds = time.perf_counter() - start
    n_bytes = sum(len(r) for r in reviews)
    return {"bytes": n_bytes, "seconds": seconds, "bytes_per_s": n_bytes / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="training budget")
    where = "where the run goes [runs/byte-lm, or runs/byte-lm-<M>min]"
    parser.add_argument("--run-dir", type=Path, default=None, help=where)
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results JSON")
    args = parser.parse_args()
    default_dir = "byte-lm" if args.minutes == 60 else f"byte-lm-{args.minutes:g}min"
    run_dir = (args.run_dir or ROOT / "runs" / default_dir).resolve()
    if (run_dir / "latest.json").exists():
        sys.exit(f"error: {run_dir} already holds a run; remove it or give --run-dir")
    os.environ.setdefault("NSLM_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    load_before = os.getloadavg()[0]
    command, wall = train(args.minutes, run_dir)
    results = json.loads((run_dir / "results.json").read_text())
    extract = extraction_rate(run_dir)
    config = json.loads((run_dir / "config.json").read_text())
    from nslm.runs.load import kept_checkpoints

    out = {
        "valid_bpb": results["valid_bpb"],
        "test_bpb": results["test_bpb"],
        "valid_accuracy": results["valid_accuracy"],
        "test_accuracy": results["test_accuracy"],
        "train_minutes": results["train_minutes"],
        "train_bytes": results["train_tokens"],
        "train_bytes_per_s": results["train_tokens_per_s"],
        "extract_bytes_per_s": extract["bytes_per_s"],
        "extract": extract,
        "steps": results["steps"],
        "kept_checkpoints": {f"{m:g}": str(p) for m, p in kept_checkpoints(run_dir).items()},
        "run_dir": str(run_dir),
        "process_wall_seconds": wall,
        "load_average_1m_before": load_before,
        "load_average_1m_after": os.getloadavg()[0],
        "config": config,
        "command": " ".join(["python", "benchmarks/neurons/byte_lm.py", *sys.argv[1:]]),
        "train_command": " ".join(["nslm", *command[3:]]),
        "date": today(),
        "machine": machine_info(),
    }
    write_json_atomic(args.out, out)
    shown = (
        "valid_bpb",
        "test_bpb",
        "test_accuracy",
        "train_minutes",
        "train_bytes_per_s",
        "extract_bytes_per_s",
        "run_dir",
    )
    print(json.dumps({k: out[k] for k in shown}, indent=1))


if __name__ == "__main__":
    main()
