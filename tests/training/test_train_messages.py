"""What training says on stderr: why it stopped early, the lr in use, validation's size."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import HANG_SECONDS
from nslm.cli import main

TINY = Path(__file__).resolve().parents[2] / "configs" / "tiny.toml"


@pytest.mark.realdata
def test_an_early_stop_says_why_and_where(tmp_path: Path, capsys) -> None:
    sets = [
        "max_steps=200",
        "max_minutes=0.01",
        "valid_tokens=400",
        "test_tokens=400",
        "lr_schedule='cosine'",
        "progress=true",
        "log_every=1000",
    ]
    args = [
        "train",
        "--config",
        str(TINY),
        *(x for s in sets for x in ("--set", s)),
        "--run-dir",
        str(tmp_path),
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "stopped by the time budget (0.01 min) at epoch 0 (partial: batch " in err
    assert "validating on 400 tokens" in err
    epoch = next(line for line in err.splitlines() if line.startswith("epoch 0 (partial)"))
    # the cosine schedule's lr at the last step, not the base lr of 0.003
    assert "valid ppl" in epoch and not epoch.endswith("lr 0.003")


@pytest.mark.slow
@pytest.mark.realdata
def test_launched_ranks_do_not_warn_about_unused_parameters(tmp_path: Path) -> None:
    """``processes = 2``: DDP's find_unused_parameters warning (a long line per rank at the
    first step) is filtered in the ranks nslm launches; the result is what torchrun gives."""
    import json
    import os
    import subprocess
    import sys

    sets = [
        "processes=2",
        "max_steps=4",
        "checkpoint_every=0",
        "valid_tokens=500",
        "test_tokens=500",
        "batch_size=8",
    ]
    args = [x for s in sets for x in ("--set", s)]
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CPP_LOG_LEVEL"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nslm",
            "train",
            "--config",
            str(TINY),
            *args,
            "--run-dir",
            str(tmp_path / "run"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "find_unused_parameters" not in done.stderr
    assert json.loads(done.stdout)["steps"] == 4
