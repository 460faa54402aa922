"""Run an ``nslm`` command in-process or as a subprocess, and check what it left.

In-process (:func:`run_in_process`) is the fast path: torch imports once, a case costs what
its command costs. A subprocess (:func:`run_subprocess`) is for what needs a process of its
own: a file-size limit (``RLIMIT_FSIZE``: a full disk, as a write sees it), a signal, a kill.

The checks return a list of problems (empty: all good) rather than assert, so the benchmark
counts failures with the same code the tests assert with.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import numpy as np

from helpers import HANG_SECONDS

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    """What a command did: its exit status, its output, and a traceback if one escaped."""

    argv: list[str]
    code: int
    stdout: str
    stderr: str
    crash: str = ""  # in-process: the traceback of an exception that escaped nslm's main()

    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _serve_stub(*args, **kwargs) -> None:
    """``nslm serve`` got as far as serving: in a case that is success, so return at once."""


def run_in_process(argv: list[str], env: dict[str, str]) -> Outcome:
    """``nslm ARGV`` through :func:`nslm.cli.main`, stdout and stderr captured (as text and
    as bytes: a byte LM's ``generate`` writes to ``sys.stdout.buffer``)."""
    from nslm.cli import main

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)
    crash = ""
    with (
        environment(env),
        redirect_stdout(out),
        redirect_stderr(err),
        mock.patch("uvicorn.run", _serve_stub),
    ):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # what escapes main() is a traceback in front of a user
            code, crash = 1, traceback.format_exc()
    return Outcome(argv, code, _text(out), _text(err) + crash, crash)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")  # type: ignore[attr-defined]


def command_line(template: str, values: dict[str, object]) -> list[str]:
    """``template``'s words (split as a shell splits them) with ``{name}`` filled in from
    ``values``: split first, so a path holding a space stays one argument."""
    text = {name: str(value) for name, value in values.items()}
    return [word.format(**text) for word in shlex.split(template)]


def nslm_command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "nslm", *argv]


def subprocess_env(env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **env}


@dataclass(frozen=True)
class Interrupt:
    """When to send Ctrl-C: once the child has marked ``stage`` in ``$NSLM_STAGE_FILE``
    (nslm/stages.py: "handler" before its heavy imports, "command" once the command begins),
    and then used ``cpu_seconds`` more of CPU: a CPU clock, so a busy machine delays the
    signal as much as it delays the work, and the signal lands inside that work however
    loaded the machine is."""

    stage: str = "command"
    cpu_seconds: float = 0.0


def run_subprocess(
    argv: list[str],
    env: dict[str, str],
    *,
    file_size_limit: int | None = None,
    interrupt: Interrupt | None = None,
    timeout: float = HANG_SECONDS,
) -> Outcome:
    """``python -m nslm ARGV`` in a process of its own.

    ``file_size_limit``: no file it writes may grow past this many bytes (``RLIMIT_FSIZE``;
    Python ignores SIGXFSZ, so the write that crosses it raises OSError EFBIG, as a full disk
    raises ENOSPC). ``interrupt``: send SIGINT (Ctrl-C) at that point of the command.
    """

    def prepare_child() -> None:
        # Ctrl-C as a terminal delivers it: a job started in the background (CI under
        # nohup, `cmd &`) inherits SIGINT ignored, and nslm then leaves it ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if file_size_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    with tempfile.TemporaryDirectory() as marks:
        stages = Path(marks) / "stages"
        proc = subprocess.Popen(
            nslm_command(argv),
            cwd=ROOT,
            env={**subprocess_env(env), "NSLM_STAGE_FILE": str(stages)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=prepare_child,
        )
        if interrupt is not None:
            _interrupt_when(proc, stages, interrupt, timeout)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            err += b"\n(timed out)"
    return Outcome(
        argv, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")
    )


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (proc(5): utime, stime are the
    14th and 15th fields of /proc/PID/stat, counted from after the command's parentheses)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _interrupt_when(
    proc: subprocess.Popen, stages: Path, interrupt: Interrupt, timeout: float
) -> None:
    """SIGINT ``proc`` at ``interrupt``'s point. A process that leaves the CPU to children
    (torchrun's ranks) gets it ``4 × cpu_seconds`` of wall time after the mark."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if interrupt.stage in stages.read_text().split():
                break
        time.sleep(0.01)
    else:
        return  # it ended (or hung) before the mark: the outcome says so
    with contextlib.suppress(OSError, IndexError, ValueError):  # it exited as we looked
        start = _cpu_seconds(proc.pid)
        wall = time.monotonic() + 4 * interrupt.cpu_seconds
        while proc.poll() is None:
            used = _cpu_seconds(proc.pid) - start
            if used >= interrupt.cpu_seconds or time.monotonic() >= wall:
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)


# -- the checks ---------------------------------------------------------------------------------


def traceback_problems(outcome: Outcome) -> list[str]:
    if outcome.crash or "Traceback (most recent call last)" in outcome.stderr:
        last = (outcome.crash or outcome.stderr).strip().splitlines()[-1]
        return [f"traceback: {last}"]
    return []


def error_problems(outcome: Outcome, needles: tuple[str, ...] = (), code: int = 2) -> list[str]:
    """Exit ``code``, stderr ending in one ``error: …`` line (the only one) that names each
    of ``needles``, and no traceback. Lines before it are progress, which may stay."""
    problems = traceback_problems(outcome)
    if outcome.code != code:
        problems.append(f"exit status {outcome.code}, expected {code}")
    lines = outcome.stderr_lines()
    errors = [line for line in lines if line.startswith("error:")]
    if not lines or not lines[-1].startswith("error: "):
        problems.append(f"stderr does not end with an 'error: ' line: {lines[-1:]}")
    elif len(errors) != 1:
        problems.append(f"{len(errors)} error lines: {errors}")
    else:
        problems += [
            f"the message does not name {n!r}: {errors[0]}" for n in needles if n not in errors[0]
        ]
    return problems


def ok_problems(outcome: Outcome) -> list[str]:
    problems = traceback_problems(outcome)
    if outcome.code != 0:
        problems.append(f"exit status {outcome.code}, expected 0: {outcome.stderr_lines()[-1:]}")
    return problems


def ok_or_error_problems(outcome: Outcome) -> list[str]:
    """Either success or one clean error line: for inputs a command may take or refuse."""
    return ok_problems(outcome) if outcome.code == 0 else error_problems(outcome)


def is_temporary(path: Path) -> bool:
    """The names nslm's atomic writers give what is not complete yet: ``.NAME.XXXX.tmp``,
    ``.NAME.tmp-XXXX``, ``.tmp-KEY-PID-XXXX``, ``.ckpt-N.tmp``, ``.NAME.XXXX.part``."""
    name = path.name
    return name.startswith(".") and (".tmp" in name or name.endswith(".part"))


def leftover_problems(directory: Path) -> list[str]:
    """Under ``directory``: no temporaries, and every file a reader would take whole
    (JSON, safetensors, npz) reads whole. An empty list when the directory is absent."""
    problems = []
    for path in sorted(directory.rglob("*")) if directory.is_dir() else []:
        if is_temporary(path):
            problems.append(f"left a temporary {path.relative_to(directory)}")
        elif path.is_file() and not _reads_whole(path):
            problems.append(f"left an incomplete {path.relative_to(directory)}")
    return problems


def _reads_whole(path: Path) -> bool:
    """Whether a reader takes the file whole. metrics.jsonl is a log appended to line by
    line, whose readers skip a line cut short: not a file written whole, so not checked."""
    try:
        if path.suffix == ".json":
            json.loads(path.read_bytes())
        elif path.suffix == ".safetensors":
            from safetensors.numpy import load_file

            load_file(str(path))
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as arrays:
                for name in arrays.files:
                    arrays[name]
    except Exception:  # any failure to read back is what this check reports
        return False
    return True
