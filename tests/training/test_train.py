"""Tiny real training runs: the eval API, exact resume after SIGKILL, the CLI, and DDP.

All runs use ``configs/tiny.toml`` (a 20k-token WikiText-2 slice, a 1×32 LSTM, ≤ 120 steps).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers import HANG_SECONDS
from nodes import ranks_of
from nslm.cli import main
from nslm.config import load_config
from nslm.runs.load import load_run
from nslm.scores.passes import Scorer, head_of, next_token_log_probs
from nslm.training.loop import train
from nslm.training.precision import bf16_runs_on

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
pytestmark = pytest.mark.realdata


def run_cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "nslm", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    cfg = load_config(TINY, ["test_tokens=4000"])
    results = train(cfg, run_dir)
    assert np.isfinite(results["valid_ppl_nnlm"]) and np.isfinite(results["test_ppl_hnlm"])
    return run_dir


def test_run_dir_contents(tiny_run: Path) -> None:
    for name in ("config.json", "vocab.json", "layout.json", "model.safetensors", "results.json"):
        assert (tiny_run / name).is_file(), name
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if "tokens_per_s" in r]
    assert steps and all(r["tokens_per_s"] > 0 for r in steps)
    # Training lowers the loss of both heads from their uniform-guess start (ln V ≈ 10.5).
    assert steps[-1]["loss_nnlm"] < 8.0 and steps[-1]["loss_hnlm"] < 8.0


def test_eval_api_shapes_and_consistency(tiny_run: Path) -> None:
    loaded = load_run(tiny_run)
    split = head_of(loaded.corpus.valid, 3000)
    scores = Scorer(loaded.model, loaded.classes, batch_size=4, bptt=20).score(split)
    for arr in (scores.nnlm, scores.hnlm, scores.top):
        assert arr is not None and arr.shape == split.token_ids.shape and arr.dtype == np.float64
        assert np.isnan(arr[0]) and np.all(np.isfinite(arr[1:3000]))
        assert np.all(arr[1:3000] <= 0)
    cls = split.class_ids[1:3000]
    # At word positions the class probability is the word's own top-level probability,
    # which is the whole HNLM score (Eq. 3 has no second factor there).
    words = np.flatnonzero(cls == 0) + 1
    assert np.allclose(scores.top[words], scores.hnlm[words])
    classes = np.flatnonzero(cls > 0) + 1
    assert len(classes) and np.all(scores.top[classes] >= scores.hnlm[classes] - 1e-9)


def test_full_distributions_sum_to_one_at_random_positions(tiny_run: Path) -> None:
    loaded = load_run(tiny_run)
    tokens = loaded.corpus.valid.token_ids
    rng = np.random.default_rng(0)
    for t in rng.integers(1, 400, size=4):
        history = tokens[:t].tolist()
        dists = next_token_log_probs(loaded.model, history)
        for head in ("nnlm", "hnlm"):
            total = np.exp(dists[head]).sum()
            assert abs(total - 1) < 1e-4, (head, t, total)
        tags = dists["hnlm_classes"]
        assert np.isnan(tags[0]) and np.all(tags[1:][~np.isnan(tags[1:])] <= 0)
        # The eval API gives the same NNLM score for the token that follows.
        prefix = head_of(loaded.corpus.valid, int(t) + 1)
        scores = Scorer(loaded.model, batch_size=1, bptt=500).score(prefix)
        assert scores.nnlm[t] == pytest.approx(dists["nnlm"][tokens[t]], abs=1e-4)


def test_eval_cli(tiny_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tiny_run), "--split", "valid", "--prefix-tokens", "3000"]) == 0
    out = capsys.readouterr().out
    assert "NNLM" in out and "HNLM" in out
    assert json.loads((tiny_run / "eval.json").read_text())["valid"]["ppl_nnlm"] > 1


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    pointer = json.loads((run_dir / "latest.json").read_text())
    return load_file(str(run_dir / pointer["checkpoint"] / "model.safetensors"))


def wait_for_checkpoint(run_dir: Path, step: int, victim: subprocess.Popen) -> None:
    """Until ``run_dir`` has a checkpoint at ``step`` or later; the run must still be going."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        pointer = run_dir / "latest.json"
        if pointer.is_file() and json.loads(pointer.read_text())["step"] >= step:
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"no checkpoint at step {step} within 240 s")
    assert victim.poll() is None, "the run ended before it could be killed"


@pytest.mark.slow
def test_resume_after_sigkill_gives_identical_weights(tmp_path: Path) -> None:
    sets = ["--set", "max_steps=120", "--set", "checkpoint_every=10", "--set", "test_tokens=2000"]
    full = run_cli("train", "--config", str(TINY), *sets, "--run-dir", str(tmp_path / "full"))
    killed_dir = tmp_path / "killed"
    victim = run_cli("train", "--config", str(TINY), *sets, "--run-dir", str(killed_dir))
    wait_for_checkpoint(killed_dir, 30, victim)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    killed_at = json.loads((killed_dir / "latest.json").read_text())["step"]
    assert killed_at < 120 and not (killed_dir / "results.json").exists()
    resumed = run_cli("train", "--resume", str(killed_dir))
    assert resumed.wait(timeout=HANG_SECONDS) == 0, resumed.stderr.read() if resumed.stderr else ""
    assert full.wait(timeout=HANG_SECONDS) == 0
    a, b = final_weights(tmp_path / "full"), final_weights(killed_dir)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def train_losses(run_dir: Path) -> list[tuple[int, float, float]]:
    """Logged (step, NNLM loss, HNLM loss); after a resume a step's last line counts."""
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    by_step = {
        r["step"]: (r["step"], r["loss_nnlm"], r["loss_hnlm"]) for r in recs if "loss_nnlm" in r
    }
    return [by_step[k] for k in sorted(by_step)]


def assert_same_training(ddp_dir: Path, one_dir: Path, steps: int) -> None:
    """Same weights and same logged losses, step for step (no dropout, same 8 streams)."""
    a, b = final_weights(ddp_dir), final_weights(one_dir)
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-5, rtol=1e-4), key
    got, want = train_losses(ddp_dir), train_losses(one_dir)
    assert [s for s, *_ in got] == [s for s, *_ in want] == list(range(5, steps + 1, 5))
    assert np.allclose([x[1:] for x in got], [x[1:] for x in want], rtol=1e-5)
    pointer = json.loads((ddp_dir / "latest.json").read_text())
    assert json.loads((ddp_dir / pointer["checkpoint"] / "state.json").read_text())["world"] == 2


DDP_SETS = ["log_every=5", "dropout=0.0", "test_tokens=500", "batch_size=8"]


def train_two_ranks_and_one(tmp_path: Path, sets: list[str]) -> None:
    """TINY with ``sets`` under torchrun with 2 ranks (tmp_path/ddp) and as 1 process
    (tmp_path/one)."""
    flags = [x for s in sets for x in ("--set", s)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ddp = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "nslm",
            "train",
            "--config",
            str(TINY),
            *flags,
            "--run-dir",
            str(tmp_path / "ddp"),
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert ddp.returncode == 0, ddp.stderr[-2000:]
    single = run_cli("train", "--config", str(TINY), *flags, "--run-dir", str(tmp_path / "one"))
    assert single.wait(timeout=HANG_SECONDS) == 0


@pytest.mark.slow
def test_ddp_two_gloo_processes_match_one_process(tmp_path: Path) -> None:
    """torchrun with 2 ranks × 4 streams steps in sync and reproduces 1 process × 8 streams."""
    sets = [*DDP_SETS, "max_steps=20", "checkpoint_every=0"]
    train_two_ranks_and_one(tmp_path, sets)
    assert_same_training(tmp_path / "ddp", tmp_path / "one", 20)


@pytest.mark.slow
def test_ddp_ranks_take_the_same_mid_epoch_validation_and_halving_decisions(
    tmp_path: Path,
) -> None:
    """Validation every 4 steps drives the rate halving (ε = 0.5: every validation after the
    first halves); rank 0's figures are broadcast, so 2 ranks halve, and stop after 3
    halvings, in step with 1 process."""
    sets = [
        *DDP_SETS,
        "max_steps=40",
        "checkpoint_every=0",
        "eval_every=4",
        "lr_schedule='halving'",
        "halving_epsilon=0.5",
        "max_halvings=3",
    ]
    train_two_ranks_and_one(tmp_path, sets)
    assert_same_training(tmp_path / "ddp", tmp_path / "one", 16)
    for run in ("ddp", "one"):
        recs = [json.loads(x) for x in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        valid = [(r["step"], r["halvings"]) for r in recs if r.get("event") == "valid"]
        assert valid == [(4, 0), (8, 1), (12, 2), (16, 3)], run


@pytest.mark.slow
def test_processes_key_launches_ddp_that_dies_with_it_and_resumes(tmp_path: Path) -> None:
    """``processes = 2`` makes ``nslm train`` become torchrun with 2 ranks that all-reduce
    sparse embedding gradients. SIGKILL of that one pid takes the ranks with it; ``--resume``
    relaunches 2 ranks, and the result is what one uninterrupted process gives."""
    sets = [*DDP_SETS, "max_steps=60", "checkpoint_every=10", "sparse_embedding=true"]
    flags = [x for s in sets for x in ("--set", s)]
    single = run_cli("train", "--config", str(TINY), *flags, "--run-dir", str(tmp_path / "one"))
    killed = tmp_path / "ddp"
    victim = run_cli(
        "train", "--config", str(TINY), *flags, "--set", "processes=2", "--run-dir", str(killed)
    )
    wait_for_checkpoint(killed, 20, victim)
    ranks = [pid for pid in ranks_of(killed) if pid != victim.pid]
    assert len(ranks) == 2, ranks
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ranks_of(killed), "ranks outlived the killed launcher"
    assert not (killed / "results.json").exists()
    resumed = run_cli("train", "--resume", str(killed))
    out, err = resumed.communicate(timeout=HANG_SECONDS)
    assert resumed.returncode == 0, err[-2000:]
    assert json.loads(out)["steps"] == 60  # rank 0's results, printed once
    assert single.wait(timeout=HANG_SECONDS) == 0
    assert_same_training(killed, tmp_path / "one", 60)
    # The embedding's rows went to SparseAdam: its own param group, an integer step count.
    pointer = json.loads((killed / "latest.json").read_text())
    optim = json.loads((killed / pointer["checkpoint"] / "optim.json").read_text())
    assert len(optim["param_groups"]) == 2 and isinstance(optim["scalars"]["0"]["step"], int)


@pytest.mark.parametrize(
    "sets",
    [
        ["model='awd'", "tie_weights=true", "softmax='full'", "weight_drop=0.2", "emb_size=32"],
        ["model='transformer'", "n_heads=2", "ff_size=64", "num_layers=1"],
        ["model='fixed-window'", "context=4"],
    ],
    ids=["awd-tied", "transformer", "fixed-window"],
)
def test_other_backbones_train_save_and_load(tmp_path: Path, sets: list[str]) -> None:
    cfg = load_config(TINY, [*sets, "max_steps=15", "test_tokens=1000", "valid_tokens=1000"])
    results = train(cfg, tmp_path / "run")
    assert np.isfinite(results["test_ppl_nnlm"]) and np.isfinite(results["test_ppl_hnlm"])
    loaded = load_run(tmp_path / "run")
    scorer = Scorer(loaded.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt)
    scores = scorer.score(head_of(loaded.corpus.test, 1000))
    # The saved and reloaded weights (tied ones stored once) score exactly as in training.
    assert scores.perplexity("nnlm") == pytest.approx(results["test_ppl_nnlm"], rel=1e-6)


def test_corrupt_or_pickled_weights_are_refused(tiny_run: Path, tmp_path: Path) -> None:
    """Weights are read with safetensors only: a pickle in their place is an error, never
    executed."""
    import pickle
    import shutil

    from nslm.errors import NslmError

    copy = tmp_path / "copy"
    shutil.copytree(tiny_run, copy)
    (copy / "model.safetensors").write_bytes(pickle.dumps({"weight": [1, 2, 3]}))
    with pytest.raises(NslmError, match="cannot read weights"):
        load_run(copy)
    assert main(["eval", str(copy)]) == 2


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (None, "no checkpoint yet"),
        ({"world": 2, "step": 10}, "made by an older nslm"),
    ],
    ids=["no-checkpoint", "old-per-rank-batch"],
)
def test_ddp_resume_errors_are_one_line_before_any_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], state: dict | None, message: str
) -> None:
    """Resuming a `processes = 2` run that cannot be resumed fails in the launching process,
    with one line and exit 2, instead of inside torchrun's ranks."""
    from nslm.config import load_config as load
    from nslm.training import checkpoint as ck

    run = tmp_path / "run"
    run.mkdir()
    ck.write_json_atomic(run / "config.json", load(TINY, ["processes=2"]).to_json())
    if state is not None:
        (run / "ckpt-00000010").mkdir()
        ck.write_json_atomic(run / "ckpt-00000010" / "state.json", state)
        ck.write_json_atomic(run / "latest.json", {"checkpoint": "ckpt-00000010", "step": 10})
    assert main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_bf16_run_is_evaluated_in_float32(tmp_path: Path) -> None:
    """Trained under bf16 autocast where this CPU runs it (else in float32, and results.json
    says so), scored in float32: the reported test perplexity is the float32 one, which a bf16
    pass over the same weights does not reproduce."""
    cfg = load_config(TINY, ["bf16=true", "max_steps=20", "valid_tokens=1000", "test_tokens=1500"])
    results = train(cfg, tmp_path / "run")
    here = "bfloat16" if bf16_runs_on("cpu") else "float32"
    assert results["precision"] == here
    loaded = load_run(tmp_path / "run")
    test = head_of(loaded.corpus.test, 1500)
    scorer = Scorer(loaded.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt)
    assert scorer.score(test).perplexity("nnlm") == pytest.approx(
        results["test_ppl_nnlm"], rel=1e-9
    )
    if here == "float32":
        return  # no bf16 pass to compare with on this CPU
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h, _ = loaded.model.features(
            torch.from_numpy(test.token_ids[:50].astype(np.int64))[:, None]
        )
    assert h.dtype == torch.bfloat16  # what scoring would see, were it to run under autocast
    with torch.autocast("cpu", dtype=torch.bfloat16):  # an outer autocast is switched off too
        inside = Scorer(loaded.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt).score(test)
    assert inside.perplexity("nnlm") == pytest.approx(results["test_ppl_nnlm"], rel=1e-6)


# oneDNN's ISA cap hides AVX-512 (and with it bf16) from torch: a CPU without bfloat16, made
# on any x86-64 machine, so the fallback is tested wherever the suite runs.
NO_BF16 = {"ONEDNN_MAX_CPU_ISA": "AVX2"}


@pytest.mark.parametrize("cpu", ["this CPU", "a CPU without bf16"])
def test_bf16_is_asked_for_and_the_run_records_the_precision_it_used(
    cpu: str, tmp_path: Path
) -> None:
    """``bf16 = true`` trains in bfloat16 where the CPU runs it; elsewhere in float32, with
    one notice line on stderr and ``"precision": "float32"`` in results.json."""
    env = NO_BF16 if cpu != "this CPU" else {}
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from nslm.training.precision import bf16_runs_on as f; print(f('cpu'))",
        ],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
    )
    runs_bf16 = probe.stdout.strip() == "True"
    if env:
        assert not runs_bf16, "the ISA cap should hide bf16"
    run = tmp_path / "run"
    proc = run_cli(
        "train",
        "--config",
        str(TINY),
        "--set",
        "bf16=true",
        "--set",
        "max_steps=6",
        "--set",
        "valid_tokens=500",
        "--set",
        "test_tokens=500",
        "--run-dir",
        str(run),
        env_extra=env,
    )
    _, err = proc.communicate(timeout=HANG_SECONDS)
    assert proc.returncode == 0, err
    notices = [line for line in err.splitlines() if "bfloat16" in line]
    results = json.loads((run / "results.json").read_text())
    if runs_bf16:
        assert results["precision"] == "bfloat16" and notices == []
    else:
        assert results["precision"] == "float32"
        assert len(notices) == 1 and "training in float32" in notices[0]


def test_weights_are_kept_every_n_steps(tmp_path: Path) -> None:
    """``keep_weights_every``: RUN/kept/step-NNNNNNN.safetensors at each multiple of N (a
    learning curve's points), each the weights of that step."""
    cfg = load_config(
        TINY,
        [
            "max_steps=12",
            "keep_weights_every=4",
            "valid_tokens=500",
            "test_tokens=500",
            "eval_every=0",
            "checkpoint_every=0",
        ],
    )
    train(cfg, tmp_path / "run")
    kept = sorted(p.name for p in (tmp_path / "run" / "kept").glob("step-*.safetensors"))
    assert kept == [f"step-{s:07d}.safetensors" for s in (4, 8, 12)]
    first, last = (load_file(tmp_path / "run" / "kept" / k) for k in (kept[0], kept[-1]))
    assert first.keys() == last.keys()
    assert any(not torch.equal(first[k], last[k]) for k in first)  # training moved them
    from nslm.runs.load import kept_weights, load_run

    found = kept_weights(tmp_path / "run")
    assert list(found) == [4, 8, 12]
    at_8 = load_run(tmp_path / "run", weights=found[8]).model.state_dict()
    kept_8 = load_file(found[8])
    assert all(torch.equal(at_8[k].float(), kept_8[k].float()) for k in kept_8)


def test_early_stopping_on_numbers_keeps_the_weights_best_at_the_numbers(tmp_path: Path) -> None:
    """``early_stopping_on = "numbers"``: validation's primary figure is the NNLM's perplexity
    at the number positions, and model.safetensors holds the weights best by it."""
    from nslm.data.numbers import number_positions
    from nslm.perplexity import perplexity

    sets = ["max_steps=30", "eval_every=10", "valid_tokens=3000", "test_tokens=500"]
    cfg = load_config(TINY, [*sets, "early_stopping_on=numbers", "checkpoint_every=0"])
    train(cfg, tmp_path / "run")
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    valid = [r for r in records if r.get("event") == "valid"]
    assert len(valid) == 3 and all("valid_ppl_numbers_nnlm" in r for r in valid)
    loaded = load_run(tmp_path / "run")
    split = head_of(loaded.corpus.valid, 3000)
    at = number_positions(split, loaded.corpus.class_names)
    assert len(at) > 20
    scores = Scorer(loaded.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt).score(split)
    best = min(r["valid_ppl_numbers_nnlm"] for r in valid)
    assert perplexity(scores.nnlm[at]) == pytest.approx(best, rel=1e-6)
    # the best by Numbers is not always the best overall: the kept weights follow Numbers
    overall = [r["valid_ppl_nnlm"] for r in valid if r["valid_ppl_numbers_nnlm"] == best]
    assert scores.perplexity("nnlm") == pytest.approx(overall[0], rel=1e-6)


def test_early_stopping_on_numbers_needs_number_classes() -> None:
    from nslm.errors import NslmError

    with pytest.raises(NslmError, match="early_stopping_on"):
        load_config(TINY, ["early_stopping_on=numbers", "classes=none"])
    with pytest.raises(NslmError, match="early_stopping_on"):
        load_config(TINY, ["early_stopping_on=words"])
