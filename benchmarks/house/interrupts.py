"""Ctrl-C under load: the robustness battery's interrupted cases, many rounds in a row, with
busy loops beside them.

    python benchmarks/house/interrupts.py [--rounds 10] [--busy 2] [--no-bf16]

Each round runs every ``interrupted`` case of tests/robustness/work.py (SIGINT once the
command has begun and worked one CPU-second) and every moment of
tests/robustness/test_work.py's ``MOMENTS`` (from during torch's import to inside the work),
with ``--busy`` processes spinning on the CPU the whole time. ``--no-bf16`` caps oneDNN at
AVX2 in the commands (``ONEDNN_MAX_CPU_ISA``), as on a CPU without AVX-512. Writes
benchmarks/results/interrupts.json: rounds, cases, failures (each with its problems), the
CPU's flags that matter (avx512f, avx512_bf16, amx) and whether torch runs bf16 there.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the shared helpers, and the battery's code (tests/robustness)
sys.path[:0] = [str(ROOT / "benchmarks" / "common"), str(ROOT / "tests")]

from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

OUT = Path(__file__).resolve().parents[1] / "results" / "interrupts.json"
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def spin() -> None:
    while True:
        pass


def cpu_flags() -> dict[str, bool]:
    text = Path("/proc/cpuinfo").read_text()
    line = next(line for line in text.splitlines() if line.startswith("flags"))
    present = set(line.split(":", 1)[1].split())
    return {flag: flag in present for flag in FLAGS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the cases")
    parser.add_argument("--no-bf16", action="store_true", help="cap oneDNN at AVX2")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    if args.no_bf16:
        os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"

    from nslm.training.precision import bf16_runs_on
    from robustness.runner import leftover_problems, run_subprocess
    from robustness.test_work import MOMENTS
    from robustness.work import IN_THE_WORK, WORKS, command_for, interrupted_problems, work_env
    from robustness.world import build_world

    folder = Path(tempfile.mkdtemp(prefix="nslm-interrupts-"))
    world = build_world(folder / "world")
    cases = [(f"{w.command} [interrupted]", w.long, IN_THE_WORK) for w in WORKS if w.long]
    prepare = "data prepare --corpus {huge_corpus} --classes numbers --prepared-dir {out}"
    cases += [(f"data prepare at {m.stage}+{m.cpu_seconds}s", prepare, m) for m in MOMENTS]

    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for process in busy:
        process.start()
    failures, runs, t0 = [], 0, time.perf_counter()
    try:
        for round_ in range(args.rounds):
            for name, template, moment in cases:
                out = folder / f"r{round_}" / name.replace(" ", "_") / "out" / "target"
                out.parent.mkdir(parents=True)
                argv = command_for(template, world, out)
                outcome = run_subprocess(argv, work_env(world), interrupt=moment)
                problems = interrupted_problems(outcome) + leftover_problems(out.parent)
                runs += 1
                if problems:
                    failures.append({"round": round_, "case": name, "problems": problems})
                print(f"round {round_ + 1}/{args.rounds} {name}: {problems or 'ok'}", flush=True)
    finally:
        for process in busy:
            process.terminate()
    result = {
        "rounds": args.rounds,
        "cases": len(cases),
        "runs": runs,
        "failures": len(failures),
        "failed": failures,
        "busy_loops": args.busy,
        "onednn_isa_cap": os.environ.get("ONEDNN_MAX_CPU_ISA"),
        "cpu_flags": cpu_flags(),
        "torch_runs_bf16": bf16_runs_on("cpu"),
        "seconds": round(time.perf_counter() - t0, 1),
        "command": shlex.join(["python", *sys.argv]),
        "date": today(),
        "machine": machine_info(),
    }
    write_json_atomic(args.out, result)
    print(json.dumps({k: result[k] for k in ("runs", "failures", "seconds")}))


if __name__ == "__main__":
    main()
