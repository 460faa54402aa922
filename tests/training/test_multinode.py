"""Training across nodes with torchrun's c10d rendezvous (docs/training.md, "Several
machines"): two launchers on this machine act as two nodes of 1 process each.

Two nodes × 1 process must train exactly as one node × 2 processes with the same global
batch: the ranks, their streams and DDP's all-reduce are the same, and with two ranks each
gradient element is one sum a + b, which no change of order can round differently. So the
tolerance is zero: weights and logged losses bit for bit. (With more ranks the all-reduce's
order of additions may differ between layouts, which would show at float32 rounding, about
1e-7 relative per step; two ranks are what this machine's two cores allow.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nodes import (
    final_weights,
    kill_one_node_and_resume,
    losses,
    prepare,
    train_one_node,
    train_two_nodes,
)

STEPS = 60
pytestmark = [pytest.mark.slow, pytest.mark.realdata]


@pytest.fixture(scope="module")
def single_node(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    """The reference: one node, 2 processes, uninterrupted."""
    prepare(STEPS)
    run = tmp_path_factory.mktemp("one-node") / "run"
    train_one_node(run, STEPS)
    return run


def assert_same_run(a: Path, b: Path) -> None:
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    got, want = losses(a), losses(b)
    assert [s for s, *_ in got] == list(range(5, STEPS + 1, 5))
    assert got == want


def test_two_nodes_train_exactly_as_one_node_with_two_processes(
    single_node: Path, tmp_path: Path
) -> None:
    train_two_nodes(tmp_path / "two", STEPS)
    assert (tmp_path / "two" / "results.json").is_file()
    assert_same_run(tmp_path / "two", single_node)


def test_a_killed_node_resumes_from_the_checkpoint(single_node: Path, tmp_path: Path) -> None:
    """SIGKILL of one node's launcher mid-run: its rank dies with it, the other node fails
    on its own within seconds, and both started again with ``--resume`` finish the run
    where the uninterrupted one ends."""
    run = tmp_path / "killed"
    report = kill_one_node_and_resume(run, STEPS, kill_after=20)
    assert not report["finished_before_kill"], "the run ended before a node could be killed"
    assert 20 <= report["checkpoint_step"] < STEPS
    assert report["survivor_exit_code"] not in (0, None), report
    assert report["processes_left_after_kill"] == []
    assert report["steps"] == STEPS
    assert_same_run(run, single_node)
