"""How long `nslm data prepare --corpus wikitext-2 --classes all` takes, cold and from the cache.

    python benchmarks/training/prepare_speed.py [--repeats 3]

Runs the real CLI in a subprocess (as a user would, Python start-up included) against an
empty cache directory, then again to hit the cache. Writes benchmarks/results/prepare.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "results" / "prepare.json"


def timed_prepare(cache: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "nslm",
            "data",
            "prepare",
            "--corpus",
            "wikitext-2",
            "--classes",
            "all",
            "--prepared-dir",
            str(cache),
        ],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cold, warm = [], []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            cold.append(timed_prepare(Path(tmp)))
            warm.append(timed_prepare(Path(tmp)))
    result = {
        "command": "nslm data prepare --corpus wikitext-2 --classes all",
        "cold_seconds": round(statistics.median(cold), 2),
        "cached_seconds": round(statistics.median(warm), 2),
        "cold_runs": [round(x, 2) for x in cold],
        "cached_runs": [round(x, 2) for x in warm],
        "target_cold_seconds": 60,
        "target_cached_seconds": 5,
        "date": today(),
        "machine": machine_info(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(RESULTS, result, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
