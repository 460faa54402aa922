"""A full training of the ``wt2-cpu`` default on WikiText-2, and its test perplexities.

    python benchmarks/wikitext2/wt2_cpu_training.py [--run-dir runs/wt2-cpu]
    python benchmarks/wikitext2/wt2_cpu_training.py --collect runs/wt2-cpu  # a finished run

Trains ``nslm train --config configs/wt2-cpu.toml`` (42-minute budget, validation included), then
writes benchmarks/results/wt2_cpu_training.json with the test perplexity of both heads, the
training minutes, the exact command and the run directory (the micro-model work reuses its
``model.safetensors`` through ``nslm.runs.load.load_run``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "wt2_cpu_training.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=Path("runs/wt2-cpu"))
    parser.add_argument("--collect", type=Path, default=None, help="only read a finished run")
    parser.add_argument("--command", default=None, help="with --collect: how the run was made")
    args = parser.parse_args()
    run_dir = args.collect or args.run_dir
    command = args.command or f"nslm train --config configs/wt2-cpu.toml --run-dir {run_dir}"
    wall = None
    load_before = os.getloadavg()[0]
    if args.collect is None:
        start = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nslm",
                "train",
                "--config",
                "configs/wt2-cpu.toml",
                "--set",
                "progress=false",
                "--run-dir",
                str(run_dir),
            ],
            check=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - start
        command += " --set progress=false"
    results = json.loads((ROOT / run_dir / "results.json").read_text())
    out = {
        "test_ppl_nnlm": results["test_ppl_nnlm"],
        "test_ppl_hnlm": results["test_ppl_hnlm"],
        "valid_ppl_nnlm": results["valid_ppl_nnlm"],
        "valid_ppl_hnlm": results["valid_ppl_hnlm"],
        "train_minutes": results["train_minutes"],
        "train_tokens": results["train_tokens"],
        "train_tokens_per_s": results.get("train_tokens_per_s"),
        "epochs": results["epochs"],
        "process_wall_minutes": None if wall is None else wall / 60,
        "command": command if args.command else f"NSLM_DATA_DIR=../shared/data {command}",
        "run_dir": str(run_dir),
        "checkpoint": str(Path(run_dir) / "model.safetensors"),
        "date": today(),
        "machine": {**machine_info(), "load_average_1m_at_start": load_before},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
