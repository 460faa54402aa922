"""Bad text in, through every path that reads text: the battery's text cases on a run, and a
fuzz run of the text boundary (plain → tokens → plain).

    python benchmarks/text/text_bad_input.py --run RUN [--fuzz-inputs 100000] [--out FILE]

Runs the code of tests/robustness (not a copy of it): every case of robustness.text_cases
(control characters, zero-width and bidi marks, emoji, Chinese, Arabic and Devanagari text,
CRLF, a lone surrogate, a 5 MB single line, … through ``predict``, ``generate`` and ``eval
--text`` in both input formats and the explorer's predict and generate API) on RUN, a
WikiText-form run with micro-models; then the fuzz target robustness.text_fuzz for
``--fuzz-inputs`` inputs under atheris (libFuzzer, coverage-guided over nslm.data.text and
sacremoses), or hypothesis where atheris is missing. :func:`run` is what benchmarks/text/text.py
calls; alone, this prints the result and writes it to ``--out`` if given.

``failures`` counts every case that failed, ``known_failures`` those of them that fail for a
bug recorded in robustness.text_cases.TEXT_KNOWN_BUGS (a part of the package under another
change); ``fuzz_crashes`` counts distinct crashes (where in nslm or sacremoses, and the
exception type), ``fuzz_crash_inputs`` the inputs that crashed.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the battery's code (tests/robustness) and the shared helpers
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "benchmarks" / "common")]

FUZZ_INPUTS = 100_000
MAX_LEN = 2048  # bytes per fuzz input: a paragraph, where a long line costs seconds a run


def run(
    run_dir: Path, *, fuzz_inputs: int = FUZZ_INPUTS, big_line_bytes: int | None = None
) -> dict:
    """The cases on ``run_dir`` and the fuzz run: cases, failures, fuzz_inputs, fuzz_crashes,
    and the details (known_failures, failure_list, crash_list, fuzz_engine, seconds)."""
    from robustness.text_cases import BIG_LINE_BYTES, all_text_cases, text_case_problems

    started = time.monotonic()
    failures, known = [], []
    cases = all_text_cases()
    with tempfile.TemporaryDirectory(prefix="nslm-text-bad-input-") as tmp:
        for i, case in enumerate(cases):
            folder = Path(tmp) / f"case-{i}"
            try:
                problems = text_case_problems(
                    case, Path(run_dir), folder, big_line_bytes or BIG_LINE_BYTES
                )
            except Exception:  # the case's own machinery broke: a failure, kept with its trace
                problems = [traceback.format_exc().strip().splitlines()[-1]]
            shutil.rmtree(folder, ignore_errors=True)
            if problems:
                failures.append({"case": case.id, "problems": problems})
                if case.known_bug():
                    known.append(case.id)
        cases_seconds = time.monotonic() - started
        tried, engine, tracebacks = fuzz(fuzz_inputs, Path(tmp) / "fuzz")
    crashes = sorted({crash_signature(text) for text in tracebacks})
    return {
        "cases": len(cases),
        "failures": len(failures),
        "fuzz_inputs": tried,
        "fuzz_crashes": len(crashes),
        "known_failures": len(known),
        "fuzz_crash_inputs": len(tracebacks),
        "fuzz_engine": engine,
        "cases_by_path": _by_path(cases),
        "failure_list": failures,
        "crash_list": crashes,
        "seconds": {
            "cases": round(cases_seconds, 1),
            "fuzz": round(time.monotonic() - started - cases_seconds, 1),
        },
    }


def _by_path(cases) -> dict[str, int]:
    out: dict[str, int] = {}
    for case in cases:
        out[case.path] = out.get(case.path, 0) + 1
    return out


# -- the fuzz run ---------------------------------------------------------------------------------


def fuzz(inputs: int, folder: Path) -> tuple[int, str, list[str]]:
    """``inputs`` fuzz inputs in a process of its own (libFuzzer ends the process it runs
    in): (inputs tried, engine, the tracebacks of the crashes)."""
    from robustness.text_cases import TEXTS
    from robustness.text_fuzz import SEEDS

    seeds, crashes = folder / "seeds", folder / "crashes"
    seeds.mkdir(parents=True)
    crashes.mkdir()
    for i, text in enumerate([*SEEDS, *TEXTS.values()]):
        data = text.encode("utf-8", errors="surrogateescape")
        if len(data) <= MAX_LEN:  # (the line of many numbers is a case, not a seed)
            (seeds / f"seed-{i}").write_bytes(b"\x00" + data)
    command = [
        sys.executable,
        __file__,
        "--fuzz-process",
        str(inputs),
        "--seed-dir",
        str(seeds),
        "--crash-dir",
        str(crashes),
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    runs = re.search(r"Done (\d+) runs", done.stderr)
    tried = re.search(r"hypothesis tried (\d+)", done.stderr)
    if not (runs or tried):
        raise RuntimeError(f"the fuzz run failed: {done.stderr[-2000:]}")
    tracebacks = [p.read_text() for p in sorted(crashes.glob("*.txt"))]
    if runs:
        return int(runs.group(1)), "atheris", tracebacks
    return int(tried.group(1)), "hypothesis", tracebacks  # type: ignore[union-attr]


def fuzz_process(inputs: int, seed_dir: Path, crash_dir: Path) -> None:
    """The fuzz process: atheris over the text target, or hypothesis when atheris is
    missing. A crash keeps its input and traceback in ``crash_dir``; fuzzing goes on."""
    try:
        import atheris
    except ImportError:
        atheris = None
    if atheris is not None:
        with atheris.instrument_imports(include=["nslm.data.text", "sacremoses"]):
            import sacremoses  # noqa: F401 - instrumented here, before the target imports it

            import nslm.data.text  # noqa: F401
    from robustness.text_fuzz import text_target

    def one(data: bytes) -> None:
        try:
            text_target(data)
        except Exception:  # a crash: keep the input and the traceback, go on fuzzing
            name = f"text-{zlib.crc32(data):08x}"
            (crash_dir / f"{name}.input").write_bytes(data)
            (crash_dir / f"{name}.txt").write_text(traceback.format_exc())

    if atheris is not None:
        atheris.Setup(
            [
                sys.argv[0],
                f"-runs={inputs}",
                f"-max_len={MAX_LEN}",
                "-rss_limit_mb=4096",
                str(seed_dir),
            ],
            one,
        )
        atheris.Fuzz()  # ends the process, printing "Done N runs in S second(s)"
    print(f"hypothesis tried {hypothesis_fuzz(one, inputs, seed_dir)}", file=sys.stderr)


def hypothesis_fuzz(one, inputs: int, seed_dir: Path) -> int:
    """Without atheris: ``inputs`` hypothesis examples (bytes, text near the rules, and the
    seeds with bytes spliced in)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from robustness.text_fuzz import TEXT_BYTES

    seeds = [p.read_bytes() for p in sorted(seed_dir.iterdir())]
    splice = st.tuples(st.sampled_from(seeds), st.integers(0, 256), st.binary(max_size=64))
    spliced = splice.map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :])
    calls = 0

    @settings(
        max_examples=inputs, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(st.one_of(st.binary(max_size=MAX_LEN), TEXT_BYTES, spliced))
    def each(data: bytes) -> None:
        nonlocal calls
        calls += 1
        one(data)

    each()
    return calls


def crash_signature(text: str) -> str:
    """A crash by the last line of nslm or sacremoses it went through and its exception
    type: the fuzzer finds one bug through many inputs."""
    lines = text.strip().splitlines()
    where = [
        line.strip()
        for line in lines
        if line.strip().startswith('File "') and ("/nslm/" in line or "/sacremoses/" in line)
    ]
    return f"{where[-1] if where else '?'}: {lines[-1].split(':')[0]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, help="a WikiText-form run with micro-models")
    parser.add_argument("--fuzz-inputs", type=int, default=FUZZ_INPUTS)
    parser.add_argument("--out", type=Path, default=None, help="also write the result here")
    parser.add_argument("--fuzz-process", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed-dir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--crash-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fuzz_process is not None:
        fuzz_process(args.fuzz_process, args.seed_dir, args.crash_dir)
        return
    if args.run is None:
        parser.error("--run RUN is needed")
    result = run(args.run, fuzz_inputs=args.fuzz_inputs)
    result["command"] = "python " + shlex.join(sys.argv)
    from machine import today

    result["date"] = today()
    if args.out is not None:
        from nslm.files.atomic import write_json_atomic

        write_json_atomic(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
