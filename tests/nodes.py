"""nslm training on several "nodes" of this one machine, each a torchrun launcher joined by
torchrun's c10d rendezvous: what tests/training/test_multinode.py checks and
benchmarks/house/house.py measures (docs/training.md, "Several machines").

Everything stays on loopback: the rendezvous endpoint, the address each launcher gives the
others (``--local-addr``) and the interface gloo binds (``GLOO_SOCKET_IFNAME=lo``), so the
ranks never reach for the machine's own network address. Both "nodes" share one run
directory, as real nodes share it on a common filesystem.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from helpers import HANG_SECONDS

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.toml"
# No dropout, so two runs of the same streams take the same steps; a checkpoint every 10
# steps gives a resume something to start from; 8 streams split into 4 per rank.
SETS = ["log_every=5", "dropout=0.0", "test_tokens=500", "batch_size=8", "checkpoint_every=10"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    # One thread per rank, as `processes = 2` gives each; the C++ log level hides DDP's
    # find_unused_parameters notice, as nslm's own launch does (cli/train.py).
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
        "TORCH_CPP_LOG_LEVEL": "ERROR",
    }


def _flags(max_steps: int) -> list[str]:
    return [x for s in [*SETS, f"max_steps={max_steps}"] for x in ("--set", s)]


def prepare(max_steps: int) -> None:
    """Prepare the corpus once before the ranks start (nslm's own launch does the same), so
    that two nodes do not both prepare it into one cache."""
    from nslm.config import load_config
    from nslm.training.task import prepare_data

    prepare_data(load_config(TINY, [*SETS, f"max_steps={max_steps}"]))


def start_nodes(train_args: list[str], log_dir: Path, nnodes: int = 2) -> list[subprocess.Popen]:
    """One ``torchrun … -m nslm train TRAIN_ARGS`` per node, 1 process each, all joining a
    c10d rendezvous on a free loopback port. (c10d ranks the nodes as they join and says it
    ignores ``--node-rank``; it is given as a per-node command would give it.)"""
    port = free_port()
    log_dir.mkdir(parents=True, exist_ok=True)
    nodes = []
    for rank in range(nnodes):
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nnodes={nnodes}",
            f"--node-rank={rank}",
            "--nproc-per-node=1",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=127.0.0.1:{port}",
            f"--rdzv-id=nslm-{port}",
            "--local-addr=127.0.0.1",
            "-m",
            "nslm",
            "train",
            *train_args,
        ]
        log = (log_dir / f"node{rank}.log").open("a")
        nodes.append(subprocess.Popen(command, env=_env(), cwd=ROOT, stdout=log, stderr=log))
        log.close()  # the child holds its own copy
    return nodes


def wait_nodes(nodes: list[subprocess.Popen], log_dir: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    for node in nodes:
        try:
            code = node.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for n in nodes:
                n.kill()
            raise RuntimeError(f"the nodes did not finish in {timeout:g} s") from None
        if code:
            logs = "".join(p.read_text()[-1500:] for p in sorted(log_dir.glob("node*.log")))
            raise RuntimeError(f"a node exited with {code}:\n{logs}")


def train_two_nodes(run_dir: Path, max_steps: int) -> None:
    """A fresh run on 2 nodes × 1 process."""
    log_dir = run_dir.with_name(run_dir.name + "-logs")
    nodes = start_nodes(
        ["--config", str(TINY), *_flags(max_steps), "--run-dir", str(run_dir)], log_dir
    )
    wait_nodes(nodes, log_dir)


def train_one_node(run_dir: Path, max_steps: int) -> None:
    """The same run on 1 node × 2 processes: nslm's own torchrun launch (``processes=2``)."""
    command = [
        sys.executable,
        "-m",
        "nslm",
        "train",
        "--config",
        str(TINY),
        *_flags(max_steps),
        "--set",
        "processes=2",
        "--run-dir",
        str(run_dir),
    ]
    done = subprocess.run(
        command, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=HANG_SECONDS
    )
    if done.returncode:
        raise RuntimeError(f"the single-node run failed:\n{done.stderr[-2000:]}")


def kill_one_node_and_resume(run_dir: Path, max_steps: int, kill_after: int) -> dict:
    """Start a 2-node run, SIGKILL node 1's launcher (a machine lost) once a checkpoint at
    ``kill_after`` or later exists, let node 0 fail on its own, then start both nodes again
    with ``nslm train --resume``. What happened, for the caller to check."""
    log_dir = run_dir.with_name(run_dir.name + "-logs")
    nodes = start_nodes(
        ["--config", str(TINY), *_flags(max_steps), "--run-dir", str(run_dir)], log_dir
    )
    pointer = run_dir / "latest.json"
    deadline = time.monotonic() + 240
    while not (pointer.is_file() and json.loads(pointer.read_text())["step"] >= kill_after):
        if time.monotonic() > deadline or any(n.poll() is not None for n in nodes):
            for n in nodes:
                n.kill()
            raise RuntimeError(f"no checkpoint at step {kill_after} while both nodes ran")
        time.sleep(0.02)
    nodes[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    nodes[1].wait()
    try:  # its rank dies with it (parent-death signal); node 0's rank then fails in gloo
        survivor_code = nodes[0].wait(timeout=120)
    except subprocess.TimeoutExpired:
        nodes[0].kill()
        survivor_code = None
    survivor_seconds = time.monotonic() - killed_at
    checkpoint_step = json.loads(pointer.read_text())["step"]
    finished_early = (run_dir / "results.json").exists()
    gone = time.monotonic() + 30
    while (leftover := ranks_of(run_dir)) and time.monotonic() < gone:
        time.sleep(0.05)
    resumed = start_nodes(["--resume", str(run_dir)], log_dir)
    wait_nodes(resumed, log_dir)
    results = json.loads((run_dir / "results.json").read_text())
    return {
        "checkpoint_step": checkpoint_step,
        "survivor_exit_code": survivor_code,
        "survivor_seconds": round(survivor_seconds, 2),
        "finished_before_kill": finished_early,
        "processes_left_after_kill": leftover,
        "steps": results["steps"],
    }


def ranks_of(run_dir: Path) -> list[int]:
    """Processes whose command line names ``run_dir``: launchers and ranks still alive."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(run_dir).encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The last checkpoint's weights (the weights as training left them)."""
    pointer = json.loads((run_dir / "latest.json").read_text())
    return load_file(str(run_dir / pointer["checkpoint"] / "model.safetensors"))


def weight_difference(a: Path, b: Path) -> float:
    """The largest absolute difference between two runs' final weights."""
    wa, wb = final_weights(a), final_weights(b)
    assert wa.keys() == wb.keys()
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa)


def losses(run_dir: Path) -> list[tuple[int, float, float]]:
    """Logged (step, NNLM loss, HNLM loss); after a resume a step's last line counts."""
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_step = {
        r["step"]: (r["step"], r["loss_nnlm"], r["loss_hnlm"]) for r in recs if "loss_nnlm" in r
    }
    return [by_step[k] for k in sorted(by_step)]
