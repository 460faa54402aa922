"""What machine a benchmark ran on, recorded beside every figure."""

from __future__ import annotations

import argparse
import os
import platform
from datetime import UTC, datetime
from pathlib import Path


def machine_info() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if "model name" in line)
    except (OSError, StopIteration):
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def timing_arguments(doc: str, results: Path) -> argparse.Namespace:
    """The options of a benchmark that times a run's evaluation: --run, --repeats (best of),
    --threads, --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--run", type=Path, default=Path("runs/wt2-cpu"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=results)
    return parser.parse_args()


def run_arguments(doc: str, out: Path) -> argparse.Namespace:
    """The options of a benchmark that reads one trained run: --run (required) and --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=out)
    return parser.parse_args()


def write_results(result: dict, out: Path, started: float) -> None:
    """``result`` with how it was made (seconds since ``started``, the command, the date, the
    machine), written atomically to ``out`` and printed."""
    import json
    import shlex
    import sys
    import time

    from nslm.files.atomic import write_json_atomic

    result = {
        **result,
        "seconds": round(time.perf_counter() - started, 1),
        "command": shlex.join(["python", *sys.argv]),
        "date": today(),
        "machine": machine_info(),
    }
    write_json_atomic(out, result)
    print(json.dumps(result, indent=1))
