"""Training throughput and quality at equal wall time: classic baseline vs the CPU default.

    python benchmarks/training/train_throughput.py [--minutes 10]

Runs ``nslm train --config configs/baseline-classic.toml`` (2×200 LSTM, full softmax, one
NNLM head, SGD lr 20, batch 20×35, one process with 2 threads) and ``nslm train --config
configs/wt2-cpu.toml`` (the default, training the NNLM and HNLM heads together; its
``processes = 2`` makes nslm start 2 single-thread DDP processes with torchrun) one after the
other in this one run,
each with the same wall-time budget (``--set max_minutes=…``, validation included), on
WikiText-2. Each run then scores the full validation split with its best weights.
Tokens/s counts the training steps only. Writes benchmarks/results/train_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "train_throughput.json"


def run(config: str, minutes: float, run_dir: Path) -> dict:
    command = [
        sys.executable,
        "-m",
        "nslm",
        "train",
        "--config",
        str(ROOT / "configs" / config),
        "--set",
        f"max_minutes={minutes}",
        "--set",
        "progress=false",
        "--set",
        "checkpoint_every=0",
        "--run-dir",
        str(run_dir),
    ]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    results = json.loads((run_dir / "results.json").read_text())
    return {
        "command": " ".join(["nslm", *command[3:]]),
        "results": results,
        "process_wall_seconds": wall,
        "load_average_1m_before": load_before,
        "load_average_1m_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training budget of each")
    args = parser.parse_args()
    machine = machine_info()
    with tempfile.TemporaryDirectory(prefix="nslm-throughput-") as tmp:
        baseline = run("baseline-classic.toml", args.minutes, Path(tmp) / "baseline")
        default = run("wt2-cpu.toml", args.minutes, Path(tmp) / "default")
    b, d = baseline["results"], default["results"]
    out = {
        "baseline_tokens_per_s": b["train_tokens_per_s"],
        "default_tokens_per_s": d["train_tokens_per_s"],
        "speedup": d["train_tokens_per_s"] / b["train_tokens_per_s"],
        "baseline_valid_ppl": b["valid_ppl_nnlm"],
        "default_valid_ppl": d["valid_ppl_nnlm"],
        "default_valid_ppl_hnlm": d["valid_ppl_hnlm"],
        "wall_seconds_each": args.minutes * 60,
        "baseline_train_tokens": b["train_tokens"],
        "default_train_tokens": d["train_tokens"],
        "date": today(),
        "machine": machine,
        "runs": {"baseline": baseline, "default": default},
        "command": f"python benchmarks/training/train_throughput.py --minutes {args.minutes:g}",
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RESULTS, out)
    print(json.dumps({k: v for k, v in out.items() if k not in ("runs", "machine")}, indent=1))


if __name__ == "__main__":
    main()
