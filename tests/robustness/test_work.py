"""Commands that write, met with a full disk, an output path through a file, and Ctrl-C
(robustness.work); and an unreadable input, which needs a user other than root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from robustness.runner import (
    Interrupt,
    command_line,
    error_problems,
    leftover_problems,
    run_in_process,
    run_subprocess,
)
from robustness.work import WORKS, Work, interrupted_problems, work_problems
from robustness.world import World

CASES = [
    pytest.param(work, kind, id=f"{work.command} [{kind}]")
    for work in WORKS
    for kind in work.kinds()
]


@pytest.mark.parametrize(("work", "kind"), CASES)
def test_a_write_that_fails_is_one_line_and_leaves_nothing_half_written(
    work: Work, kind: str, world: World, tmp_path: Path
) -> None:
    assert work_problems(work, kind, world, tmp_path / "case") == []


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root reads any file whatever its permissions: "
    "an unreadable input cannot be made here (CI runs as root)",
)
def test_an_unreadable_input_is_one_line(world: World, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_bytes((world.corpus / f"{split}.txt").read_bytes())
    (corpus / "train.txt").chmod(0)
    outcome = run_in_process(
        ["data", "prepare", "--corpus", str(corpus), "--prepared-dir", str(tmp_path / "prepared")],
        world.env,
    )
    assert error_problems(outcome, ("train.txt", "Permission denied")) == []


# Ctrl-C from the first moment nslm's handler is in (during torch's import) to inside the
# work: every moment is exit 130 and one line, never a traceback or death by the signal.
MOMENTS = [
    Interrupt("handler", 0.0),
    Interrupt("handler", 0.4),
    Interrupt("handler", 1.0),
    Interrupt("command", 0.0),
    Interrupt("command", 0.2),
]


@pytest.mark.parametrize("moment", MOMENTS, ids=[f"{m.stage}+{m.cpu_seconds}s" for m in MOMENTS])
def test_ctrl_c_at_any_moment_is_exit_130_and_one_line(
    moment: Interrupt, world: World, tmp_path: Path
) -> None:
    out = tmp_path / "out" / "prepared"
    out.parent.mkdir(parents=True)
    argv = command_line(
        "data prepare --corpus {huge_corpus} --classes numbers --prepared-dir {out}",
        {**vars(world), "out": out},
    )
    outcome = run_subprocess(argv, world.env, interrupt=moment)
    assert interrupted_problems(outcome) + leftover_problems(tmp_path / "out") == []
