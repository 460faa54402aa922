"""Commands that write, met with a full disk, an output path through a file, and Ctrl-C
(robustness.work); and an unreadable input, which needs a user other than root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from robustness.runner import error_problems, run_in_process
from robustness.work import WORKS, Work, work_problems
from robustness.world import World

CASES = [pytest.param(work, kind, id=f"{work.command} [{kind}]")
         for work in WORKS for kind in work.kinds()]  # fmt: skip


@pytest.mark.parametrize(("work", "kind"), CASES)
def test_a_write_that_fails_is_one_line_and_leaves_nothing_half_written(
    work: Work, kind: str, world: World, tmp_path: Path
) -> None:
    assert work_problems(work, kind, world, tmp_path / "case") == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file whatever its permissions: "
                    "an unreadable input cannot be made here (CI runs as root)")  # fmt: skip
def test_an_unreadable_input_is_one_line(world: World, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_bytes((world.corpus / f"{split}.txt").read_bytes())
    (corpus / "train.txt").chmod(0)
    outcome = run_in_process(["data", "prepare", str(corpus), "--prepared-dir",
                              str(tmp_path / "prepared")], world.env)  # fmt: skip
    assert error_problems(outcome, ("train.txt", "Permission denied")) == []
