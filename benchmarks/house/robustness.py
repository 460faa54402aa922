"""The reliability battery of issue 18 in one run: every bad-input case, kill -9 anywhere, and
a time-bounded coverage-guided fuzz run of the corpus and ARPA readers.

    python benchmarks/house/robustness.py [--kill-points 5] [--fuzz-seconds 120]

Runs the code of tests/robustness (not a copy of it): the table of (command, input slot) ×
kinds, the table of commands that write (full disk, a path through a file, Ctrl-C), the kill
harness at ``--kill-points`` seeded moments per command (two processes: half as many) and
one in the middle of its first atomic write, and atheris (libFuzzer) on the corpus and ARPA
readers for ``--fuzz-seconds`` each; without atheris, hypothesis with as many examples as
fit in that time. Cases that fail for a bug
recorded in tests/robustness/table.py's KNOWN_BUGS (a part of the package under another
change) are counted apart, as ``known_failures``. Writes benchmarks/results/robustness.json:
commands, cases, failures, known_failures, kill_points, mismatches, fuzz_inputs, crashes,
seconds, command, date, and the details.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the shared helpers, and the battery's code (tests/robustness, tests/helpers.py)
sys.path[:0] = [str(ROOT / "benchmarks" / "common"), str(ROOT / "tests")]

from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

OUT = Path(__file__).resolve().parents[1] / "results" / "robustness.json"
FUZZ_TARGETS = ("corpus", "arpa")


def run_battery(world, folder: Path) -> dict:
    """Every case of both tables: per command, and what failed."""
    from robustness.cases import all_cases, case_problems, command_of, reference
    from robustness.work import WORKS, work_problems

    per_command: Counter[str] = Counter()
    failures, known = [], []
    for i, case in enumerate(all_cases()):
        per_command[command_of(case.slot.command)] += 1
        try:
            ref = None
            if case.expected() == "same":
                ref = reference(case.slot, world, folder / "clean" / str(i))
            # a folder of its own, as in the tests: a plug-in is imported once per path
            problems = case_problems(case, world, folder / f"case-{i}", ref)
        except AssertionError as exc:  # the clean input failed: the row is broken
            problems = [str(exc)]
        shutil.rmtree(folder / f"case-{i}", ignore_errors=True)
        if problems:
            entry = {"case": case.id, "problems": problems}
            (known if case.known_bug() else failures).append(entry)
    for work in WORKS:
        for kind in work.kinds():
            per_command[command_of(work.command)] += 1
            problems = work_problems(work, kind, world, folder / "work")
            if problems:
                failures.append({"case": f"{work.command} [{kind}]", "problems": problems})
    return {"per_command": dict(sorted(per_command.items())), "failures": failures, "known": known}


def run_kills(world, folder: Path, points: int) -> dict:
    from robustness.kill import TARGETS, kill_point_problems, kill_points, reference

    tried: dict[str, int] = {}
    mismatches = []
    for target in TARGETS:
        expected, seconds = reference(target, world, folder / "reference")
        count = max(1, points // 2) if "processes" in target.name else points
        moments = kill_points(zlib.crc32(target.name.encode()), count, seconds)
        for i, moment in enumerate(moments):
            killed, problems = kill_point_problems(
                target, world, folder / f"kill-{i}", moment, expected
            )
            tried[target.name] = tried.get(target.name, 0) + int(killed)
            if problems:
                at = "while writing" if moment is None else f"{moment} s"
                mismatches.append({"target": target.name, "at": at, "problems": problems})
        print(f"kill: {target.name}: {len(moments)} moments in {seconds:.1f} s", file=sys.stderr)
    return {"per_command": tried, "mismatches": mismatches}


# -- fuzzing ------------------------------------------------------------------------------------


def seeds(folder: Path, world) -> None:
    """Starting inputs for the fuzzer: a corpus file and an ARPA file of the world."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.txt").write_bytes((world.corpus / "train.txt").read_bytes())
    (folder / "model.arpa").write_bytes(world.arpa.read_bytes())


def fuzz_one(target: str, seconds: float, seed_dir: Path, crash_dir: Path) -> tuple[int, str]:
    """Fuzz ``target`` in a process of its own (libFuzzer ends the process it runs in):
    (inputs tried, engine). Each crash is a file in ``crash_dir``."""
    options = {
        "--fuzz-target": target,
        "--fuzz-seconds": seconds,
        "--seed-dir": seed_dir,
        "--crash-dir": crash_dir,
    }
    command = [sys.executable, __file__, *(str(x) for pair in options.items() for x in pair)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=seconds * 3 + 300)
    runs = re.search(r"Done (\d+) runs", done.stderr)
    if runs:
        return int(runs.group(1)), "atheris"
    tried = re.search(r"hypothesis tried (\d+)", done.stderr)
    assert tried, f"the fuzz run of {target} failed: {done.stderr[-2000:]}"
    return int(tried.group(1)), "hypothesis"


def fuzz_main(target: str, seconds: float, seed_dir: Path, crash_dir: Path) -> None:
    """The fuzz process: atheris over ``target``, or hypothesis when atheris is missing."""
    crash_dir.mkdir(parents=True, exist_ok=True)
    work = Path(
        tempfile.mkdtemp(prefix="nslm-fuzz-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
    )
    try:
        import atheris
    except ImportError:
        atheris = None
    if atheris is not None:
        with atheris.instrument_imports(include=["nslm"]):
            from robustness import readers
    else:
        from robustness import readers
    from nslm.errors import NslmError

    run = getattr(readers, f"{target}_target")

    def one(data: bytes) -> None:
        try:
            run(data, work)
        except NslmError:
            pass
        except Exception:  # a crash: keep the input and the traceback, go on fuzzing
            name = f"{target}-{zlib.crc32(data):08x}"
            (crash_dir / f"{name}.input").write_bytes(data)
            (crash_dir / f"{name}.txt").write_text(traceback.format_exc())

    if atheris is not None:
        atheris.Setup(
            [
                sys.argv[0],
                f"-max_total_time={int(seconds)}",
                "-max_len=8192",
                "-rss_limit_mb=4096",
                str(seed_dir),
            ],
            one,
        )
        atheris.Fuzz()  # ends the process, printing "Done N runs in S second(s)"
    tried = hypothesis_fuzz(one, seconds, seed_dir)
    print(f"hypothesis tried {tried}", file=sys.stderr)


def hypothesis_fuzz(one, seconds: float, seed_dir: Path) -> int:
    """Without atheris: hypothesis examples (bytes, and the seeds with bytes spliced in) for
    ``seconds``, the example count set from a first timed batch."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    seeds_bytes = [p.read_bytes() for p in sorted(seed_dir.iterdir())]
    splice = st.tuples(st.sampled_from(seeds_bytes), st.integers(0, 4096), st.binary())
    spliced = splice.map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :])
    calls = 0

    def batch(n: int) -> None:
        @settings(
            max_examples=n,
            deadline=None,
            database=None,
            derandomize=False,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.one_of(st.binary(max_size=8192), spliced))
        def each(data: bytes) -> None:
            nonlocal calls
            calls += 1
            one(data)

        each()

    started = time.monotonic()
    batch(200)
    rate = calls / max(time.monotonic() - started, 1e-3)
    batch(max(1, int(rate * (seconds - (time.monotonic() - started)))))
    return calls


def crash_signature(text: str) -> str:
    """A crash by the last line of nslm it went through and its exception type: the
    fuzzer finds one bug through many inputs."""
    lines = text.strip().splitlines()
    where = [
        line.strip()
        for line in lines
        if line.strip().startswith('File "') and "/nslm/" in line and "/tests/" not in line
    ]
    return f"{where[-1] if where else '?'}: {lines[-1].split(':')[0]}"


# -- the run ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kill-points", type=int, default=5, help="moments per command")
    parser.add_argument("--fuzz-seconds", type=float, default=120, help="per fuzzed reader")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--fuzz-target", choices=FUZZ_TARGETS, help=argparse.SUPPRESS)
    parser.add_argument("--seed-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--crash-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fuzz_target:  # the fuzz process of fuzz_one
        fuzz_main(args.fuzz_target, args.fuzz_seconds, args.seed_dir, args.crash_dir)
        return
    from robustness.world import build_world

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nslm-robustness-") as tmp:
        root = Path(tmp)
        world = build_world(root / "world")
        battery = run_battery(world, root / "battery")
        print(f"battery: {sum(battery['per_command'].values())} cases", file=sys.stderr)
        kills = run_kills(world, root / "kill", args.kill_points)
        seeds(root / "seeds", world)
        fuzz: dict[str, int] = {}
        engine = "none"
        for target in FUZZ_TARGETS:
            fuzz[target], engine = fuzz_one(
                target, args.fuzz_seconds, root / "seeds", root / "crashes"
            )
        tracebacks = [p.read_text() for p in (root / "crashes").glob("*.txt")]
    crashes = sorted({crash_signature(text) for text in tracebacks})
    result = {
        "commands": sorted(battery["per_command"]),
        "cases": sum(battery["per_command"].values()),
        "failures": len(battery["failures"]),
        "known_failures": len(battery["known"]),
        "kill_points": sum(kills["per_command"].values()),
        "mismatches": len(kills["mismatches"]),
        "fuzz_inputs": sum(fuzz.values()),
        "crashes": len(crashes),  # distinct ones: where in nslm, and the exception type
        "crash_inputs": len(tracebacks),
        "seconds": round(time.monotonic() - started, 1),
        "command": "python " + shlex.join(sys.argv),
        "date": today(),
        "cases_by_command": battery["per_command"],
        "kill_points_by_command": kills["per_command"],
        "fuzz_inputs_by_reader": fuzz,
        "fuzz_engine": engine,
        "fuzz_seconds_per_reader": args.fuzz_seconds,
        "failure_list": battery["failures"],
        "known_failure_list": battery["known"],
        "mismatch_list": kills["mismatches"],
        "crash_list": crashes,
        "machine": machine_info(),
    }
    write_json_atomic(args.out, result)
    print(json.dumps({k: v for k, v in result.items() if not k.endswith("_list")}, indent=1))


if __name__ == "__main__":
    main()
