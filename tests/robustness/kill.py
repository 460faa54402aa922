"""Kill anywhere: SIGKILL a command at seeded random moments, run it again (or resume it),
and compare its outputs with an uninterrupted run's.

The moments are drawn uniformly over the uninterrupted run's wall time, so they fall in the
start-up, the work and the writes alike; one more is the moment the first temporary file of
an atomic write appears (a kill half-way through a write). After the kill the command is run
as a user would: ``nslm train --resume RUN`` once the run has a checkpoint, else the same
command again.

Compared byte for byte, as every computation here is deterministic on CPU: every file the
command writes, except what records wall-clock time (metrics.jsonl, whose steps after the
last checkpoint a resumed run also logs twice; ``elapsed``/``step_seconds`` of state.json;
the timing keys of results.json and model.json) and the zip container of ``.npz`` files,
which stamps the time of writing: their arrays are compared instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers import HANG_SECONDS
from robustness.inputs import toml_text
from robustness.runner import (
    command_line,
    is_temporary,
    nslm_command,
    ok_problems,
    run_subprocess,
    subprocess_env,
)
from robustness.world import World

# Keys that hold wall-clock time, per file name (left out of the comparison).
TIMING_KEYS = {
    "results.json": {"train_minutes", "train_tokens_per_s"},
    "state.json": {"elapsed", "step_seconds"},
    "model.json": {"build_seconds"},
}
NOT_COMPARED = {"metrics.jsonl"}


@dataclass(frozen=True)
class KillTarget:
    """A command to kill: its command line (a template, as in robustness.table: ``{out}`` is
    its output folder, ``{config}`` a training run of a few seconds,
    ``{config2}`` the same on two processes, ``{trained}`` a run of ``{config}``)."""

    name: str
    template: str
    seconds_cap: float = HANG_SECONDS  # an uninterrupted run must end in this time

    def command(self, world: World, out: Path) -> list[str]:
        values = {
            **vars(world),
            "out": out,
            "config": _train_config(world, 1),
            "config2": _train_config(world, 2),
        }
        if "{trained}" in self.template:
            values["trained"] = _trained(world)
        return command_line(self.template, values)

    def rerun(self, world: World, out: Path) -> list[str]:
        """What a user runs after the kill: resume a training run that has a checkpoint."""
        run = out / "run"
        if (run / "latest.json").is_file():
            return ["train", "--resume", str(run)]
        return self.command(world, out)


def _train_config(world: World, processes: int) -> Path:
    """A training run of a few seconds, checkpointed every 10 steps."""
    values = world.config(
        corpus=str(world.medium_corpus),
        train_tokens=20_000,
        valid_tokens=2000,
        test_tokens=2000,
        emb_size=32,
        hidden_size=32,
        batch_size=8,
        bptt=20,
        max_steps=60,
        checkpoint_every=10,
        processes=processes,
    )
    path = world.root / "configs" / f"kill-train-{processes}.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(toml_text(values), encoding="utf-8")
    return path


def _trained(world: World) -> Path:
    """A run of the kill config, trained once (micro fit reads it)."""
    run = world.root / "kill-run"
    if not (run / "results.json").is_file():
        argv = ["train", "--config", str(_train_config(world, 1)), "--run-dir", str(run)]
        outcome = run_subprocess(argv, world.env)
        assert outcome.code == 0, outcome.stderr
    return run


# fmt: off
TARGETS: list[KillTarget] = [
    KillTarget("data prepare", "data prepare --corpus {big_corpus} --classes numbers "
               "--prepared-dir {out}/prepared"),
    KillTarget("train", "train --config {config} --run-dir {out}/run"),
    KillTarget("train (2 processes)", "train --config {config2} --run-dir {out}/run"),
    KillTarget("micro fit", "micro fit {trained} --only year -o {out}/micro.json"),
    KillTarget("ngram build", "ngram build --corpus {big_corpus} --out-dir {out}/model --order 5 "
               "--discount-fallback --classes numbers --prepared-dir {out}/prepared"),
]
# fmt: on


# -- what is compared ---------------------------------------------------------------------------


def _content(path: Path) -> object:
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            return {
                name: arrays[name].tobytes() + str(arrays[name].dtype).encode()
                for name in arrays.files
            }
    if path.name in TIMING_KEYS:
        values = json.loads(path.read_text(encoding="utf-8"))
        for key in TIMING_KEYS[path.name]:
            values.pop(key, None)
            values.get("meta", {}).pop(key, None)
        return values
    return path.read_bytes()


def outputs(out: Path) -> dict[str, object]:
    """Every file under ``out`` by its relative path (prepared-corpus cache entries by their
    content, not their key's place), as compared."""
    return {
        str(p.relative_to(out)): _content(p)
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in NOT_COMPARED
    }


def _temporaries(out: Path) -> list[str]:
    return [str(p.relative_to(out)) for p in out.rglob("*") if is_temporary(p)]


# -- running, killing, comparing --------------------------------------------------------------


def reference(target: KillTarget, world: World, folder: Path) -> tuple[dict[str, object], float]:
    """An uninterrupted run's outputs and wall time."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.monotonic()
    outcome = run_subprocess(target.command(world, folder), world.env, timeout=target.seconds_cap)
    seconds = time.monotonic() - started
    assert not ok_problems(outcome), f"{target.name}: {ok_problems(outcome)}\n{outcome.stderr}"
    return outputs(folder), seconds


# The moment "while writing": when the first temporary of an atomic write shows up.
WHILE_WRITING = None


def kill_at(argv: list[str], env: dict[str, str], moment: float | None, out: Path) -> bool:
    """Run ``nslm ARGV`` and SIGKILL it, with every process it started (torchrun's ranks),
    after ``moment`` seconds or, for WHILE_WRITING, as soon as a temporary file shows up
    under ``out``; whether it was still running when killed."""
    proc = subprocess.Popen(
        nslm_command(argv),
        env=subprocess_env(env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    if moment is WHILE_WRITING:
        while proc.poll() is None and not _temporaries(out):
            time.sleep(0.002)
    else:
        with contextlib.suppress(subprocess.TimeoutExpired):  # still running: kill it
            proc.wait(timeout=moment)
    if proc.poll() is not None:
        return False
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return True


def kill_point_problems(
    target: KillTarget,
    world: World,
    folder: Path,
    moment: float | None,
    expected: dict[str, object],
) -> tuple[bool, list[str]]:
    """Kill the target at ``moment`` (kill_at), run it again, compare: (whether the kill came
    before the end, the problems)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    killed = kill_at(target.command(world, folder), world.env, moment, folder)
    outcome = run_subprocess(target.rerun(world, folder), world.env, timeout=target.seconds_cap)
    problems = [f"the rerun: {p}" for p in ok_problems(outcome)]
    problems += [f"left a temporary {t}" for t in _temporaries(folder)]
    got = outputs(folder)
    problems += [
        f"{name} differs from the uninterrupted run's"
        for name in sorted(expected)
        if got.get(name) != expected[name]
    ]
    problems += [f"{name} is extra" for name in sorted(set(got) - set(expected))]
    return killed, problems


def kill_points(seed: int, count: int, seconds: float) -> list[float | None]:
    """``count`` moments, uniform over a run's ``seconds``, from ``seed``, then the moment
    the first atomic write is under way (a window too short for chance to find often)."""
    moments = np.random.default_rng(seed).uniform(0.0, seconds, count).round(2).tolist()
    return [*sorted(moments), WHILE_WRITING]
