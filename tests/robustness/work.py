"""The battery's second table: commands that write, each met with a full disk, an output path
that runs through a file, and Ctrl-C in the middle of its work.

- ``disk_full``: a subprocess whose files may not grow past half the largest file the command
  writes (``RLIMIT_FSIZE``; the write that crosses it raises EFBIG, as a full disk raises
  ENOSPC): one error line that says so, and the output folder holds no temporary and no
  half-written file.
- ``out_under_a_file``: ``-o`` names a path under a regular file: one error line naming it.
- ``interrupted``: SIGINT (Ctrl-C) while the command works (its ``long`` command line, which
  runs for seconds): exit 130 with ``error: interrupted``, nothing half-written. nslm asks
  no questions, so there is no prompt to interrupt.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from robustness.inputs import toml_text
from robustness.runner import (
    Interrupt,
    Outcome,
    command_line,
    error_problems,
    leftover_problems,
    ok_problems,
    run_in_process,
    run_subprocess,
)
from robustness.world import World

WORK_KINDS = ("disk_full", "out_under_a_file", "interrupted")
# Ctrl-C once the command has begun (its mark in $NSLM_STAGE_FILE) and worked one more
# CPU-second: inside its long work on an idle machine and on a loaded one alike.
IN_THE_WORK = Interrupt("command", cpu_seconds=1.0)


@dataclass(frozen=True)
class Work:
    """A command that writes ``out``: its command line (a template, as in robustness.table:
    ``{out}`` is where the output goes, ``{config}`` the world's training config,
    ``{long_config}`` one that trains for minutes), and one that works for seconds, to be
    interrupted (None: not interrupted)."""

    command: str
    out: str
    template: str
    long: str | None = None

    def kinds(self) -> tuple[str, ...]:
        return WORK_KINDS if self.long is not None else WORK_KINDS[:2]


def _config_file(world: World, name: str, **changes: object) -> Path:
    path = world.root / "configs" / f"{name}.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(toml_text(world.config(**changes)), encoding="utf-8")
    return path


def command_for(template: str, world: World, out: Path) -> list[str]:
    long_config = _config_file(world, "long", max_steps=10**6, epochs=10**4)
    values = {
        **vars(world),
        "out": out,
        "config": _config_file(world, "tiny"),
        "long_config": long_config,
    }
    return command_line(template, values)


# The table (a row a line or two, as a table reads; the formatter leaves it so).
# fmt: off
WORKS: list[Work] = [
    Work("data prepare", "prepared",
         "data prepare --corpus {corpus} --classes numbers --prepared-dir {out}",
         "data prepare --corpus {huge_corpus} --classes numbers --prepared-dir {out}"),
    Work("data stats", "stats.json",
         "data stats --corpus {corpus} --classes numbers --json -o {out}"),
    Work("train", "run", "train --config {config} --run-dir {out}",
         "train --config {long_config} --run-dir {out}"),
    Work("micro fit", "micro.json", "micro fit {run} --fast --only year -o {out}"),
    Work("micro fit --corpus", "micro.json", "micro fit --corpus {corpus} --classes numbers "
         "--only year --fast -o {out}", "micro fit --corpus {big_corpus} --classes numbers "
         "--only year -o {out} --prepared-dir {out}.prepared"),
    Work("eval", "tables.json", "eval {run} -o {out}",
         "eval {run} --crnn --crnn-steps 100000 --crnn-dir {out}.crnn -o {out}"),
    Work("eval --model neural", "eval.json", "eval {run} --model neural -o {out}"),
    Work("ngram build", "model", "ngram build --corpus {corpus} --out-dir {out} --order 3 "
         "--discount-fallback --classes numbers", "ngram build --corpus {huge_corpus} "
         "--out-dir {out} --order 5 --discount-fallback --classes numbers "
         "--prepared-dir {out}.prepared"),
    Work("ngram eval", "eval.json", "ngram eval {ngram} --corpus {corpus} --classes numbers "
         "--json -o {out}"),
    Work("ngram export-arpa", "model.arpa", "ngram export-arpa {ngram} -o {out}"),
    Work("experiment increment", "increment.json",
         "experiment increment --sizes 20 --epochs 1 -o {out}",
         "experiment increment --sizes 20 --epochs 100000 -o {out}"),
    Work("micro plot", "plots", "micro plot {run} --out-dir {out}"),
    Work("report", "report.html", "report {run} -o {out}"),
    Work("generate --html", "page.html", "generate {byte_run} the --neuron 0 --html "
         "{out} --max-tokens 20 --seed 1"),
    Work("probe sentiment", "probe",
         "probe sentiment {byte_run} --no-bow --train-texts 60 --out-dir {out}"),
]
# fmt: on


def work_env(world: World) -> dict[str, str]:
    return {**world.env, "NSLM_DATA_DIR": str(world.labelled)}


def _largest_file(folder: Path) -> int:
    sizes = [p.stat().st_size for p in folder.rglob("*") if p.is_file()] if folder.exists() else []
    assert sizes, f"{folder}: the command wrote nothing"
    return max(sizes) if folder.is_dir() else folder.stat().st_size


def written_size(work: Work, world: World, folder: Path) -> int:
    """The largest file ``work``'s command writes (a clean run in ``folder``)."""
    out = folder / "out" / work.out
    outcome = run_in_process(command_for(work.template, world, out), work_env(world))
    assert outcome.code == 0, f"{work.command}: the clean run fails: {outcome.stderr}"
    return out.stat().st_size if out.is_file() else _largest_file(out)


def work_problems(work: Work, kind: str, world: World, folder: Path) -> list[str]:
    """What is wrong with how ``work``'s command met ``kind`` (empty: all good)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    if kind == "out_under_a_file":
        (folder / "a-file").write_text("not a folder\n")
        argv = command_for(work.template, world, folder / "a-file" / work.out)
        outcome = run_in_process(argv, work_env(world))
        return error_problems(outcome, ("a-file",))
    out = folder / "out" / work.out
    out.parent.mkdir(parents=True)
    if kind == "disk_full":
        limit = max(1, written_size(work, world, folder / "clean") // 2)
        argv = command_for(work.template, world, out)
        outcome = run_subprocess(argv, work_env(world), file_size_limit=limit)
        return error_problems(outcome, ("File too large",)) + leftover_problems(folder / "out")
    assert kind == "interrupted" and work.long is not None
    argv = command_for(work.long, world, out)
    outcome = run_subprocess(argv, work_env(world), interrupt=IN_THE_WORK)
    return interrupted_problems(outcome) + leftover_problems(folder / "out")


def interrupted_problems(outcome: Outcome) -> list[str]:
    """Exit 130 and ``error: interrupted`` as the one error line, no traceback."""
    if outcome.code == 0:
        return [*ok_problems(outcome), "finished before the interrupt: make its work longer"]
    problems = error_problems(outcome, code=130)
    if outcome.stderr_lines()[-1:] != ["error: interrupted"]:
        problems.append(f"last line {outcome.stderr_lines()[-1:]}, not 'error: interrupted'")
    return problems
