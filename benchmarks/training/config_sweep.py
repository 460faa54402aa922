"""Short trainings of one config with a few overrides each, one after the other, same budget.

    python benchmarks/training/config_sweep.py --minutes 5 \
        --variant "" --variant "lr=4e-3" --variant "lr=4e-3 dropout=0.1"

Each variant is a space-separated list of ``key=value`` overrides (``""`` = the config as
it is). Every run trains ``nslm train --config CONFIG`` for ``--minutes`` of wall time (validation
included; a cosine schedule anneals within it) and scores the whole validation split with
its best weights. Writes benchmarks/results/config_sweep.json: per variant, validation
perplexity of both heads, training tokens and tokens/s. Short budgets rank settings for
the start of training; a full run is still the judge of a full budget.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "config_sweep.json"


def run_variant(config: Path, minutes: float, overrides: list[str], run_dir: Path) -> dict:
    sets = [f"max_minutes={minutes}", "progress=false", "checkpoint_every=0", *overrides]
    command = [
        sys.executable,
        "-m",
        "nslm",
        "train",
        "--config",
        str(config),
        "--run-dir",
        str(run_dir),
    ]
    command += [x for s in sets for x in ("--set", s)]
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    results = json.loads((run_dir / "results.json").read_text())
    valid = [
        json.loads(line)
        for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        if '"event": "valid"' in line
    ]
    return {
        "overrides": overrides,
        "valid_ppl_nnlm": results["valid_ppl_nnlm"],
        "valid_ppl_hnlm": results.get("valid_ppl_hnlm"),
        "train_tokens": results["train_tokens"],
        "train_tokens_per_s": results["train_tokens_per_s"],
        "epochs": results["epochs"],
        "valid_curve_nnlm": [round(r["valid_ppl_nnlm"], 2) for r in valid],
        "process_wall_seconds": time.perf_counter() - start,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=Path("configs/wt2-cpu.toml"))
    parser.add_argument("--minutes", type=float, default=5.0, help="training budget of each")
    parser.add_argument("--variant", action="append", default=None, help='e.g. "lr=4e-3"')
    parser.add_argument("--out", type=Path, default=RESULTS, help="[%(default)s]")
    args = parser.parse_args()
    variants = args.variant or [""]
    command = "python " + shlex.join(sys.argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nslm-sweep-") as tmp:
        for i, variant in enumerate(variants):
            row = run_variant(ROOT / args.config, args.minutes, variant.split(), Path(tmp) / str(i))
            rows.append(row)
            print(json.dumps(row), flush=True)
            # written after every variant: a sweep cut short keeps what it measured
            write_json_atomic(
                args.out,
                {
                    "config": str(args.config),
                    "minutes_each": args.minutes,
                    "variants": rows,
                    "complete": len(rows) == len(variants),
                    "date": today(),
                    "machine": machine_info(),
                    "command": command,
                },
            )


if __name__ == "__main__":
    main()
