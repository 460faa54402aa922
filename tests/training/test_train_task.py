"""The training loop is generic over a task (``training/task.py``): a model that is not a
stream LM trains, checkpoints and resumes through the same Trainer; validation every
``eval_every`` steps; the rate-halving schedule end to end. No corpus is needed: a toy task,
and the tiny byte LM on a synthetic corpus (``helpers.tiny_byte_config``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from torch import Tensor, nn

from helpers import make_byte_corpus, tiny_byte_config, train_cut_and_resumed
from nslm.config import TrainConfig, build_config
from nslm.errors import NslmError
from nslm.training.loop import Trainer, train
from nslm.training.task import make_task, task_class

# -- a task that is not a language model ----------------------------------------------------


class LineTask:
    """Fit y = 3x − 1 with one linear unit: stateless, its own batches, reshuffled with
    the epoch, its own validation figure and run-directory asset."""

    N, BATCH = 48, 8

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = nn.Linear(1, 1)
        self.stat_names, self.metric_names = ["mse"], ["mse"]
        self.state_fields: dict[str, Any] = {"line_points": self.N}
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(self.N, 1, generator=g)
        self.valid_x = torch.randn(16, 1, generator=g)
        self.epochs: list[int] = []

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> None:
        pass

    def n_batches(self) -> int:
        return self.N // self.BATCH

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)
        self.order = torch.randperm(self.N, generator=torch.Generator().manual_seed(epoch))

    def batches(self, start: int) -> Iterator[tuple[int, Tensor]]:
        for i in range(start, self.n_batches()):
            yield i, self.order[i * self.BATCH : (i + 1) * self.BATCH]

    def loss(self, module: nn.Module, batch: Tensor, hidden: Any) -> tuple[Tensor, Any, Any, int]:
        assert hidden is None  # nothing carried: the loop hands back what the task returned
        x = self.x[batch]
        err = (module(x) - (3 * x - 1)).pow(2).sum(dim=1)
        stats = torch.stack([err.sum().detach(), torch.tensor(float(len(err)))])[None]
        return err.mean(), stats, None, len(err)

    def validate(self) -> dict[str, float]:
        with torch.no_grad():
            return {"mse": float((self.model(self.valid_x) - (3 * self.valid_x - 1)).pow(2).mean())}

    def describe(self, figures: dict[str, float]) -> str:
        return f"valid mse {figures['mse']:.4f}"

    def final_results(self) -> dict[str, Any]:
        return {"valid_mse": self.validate()["mse"]}

    def write_assets(self, run_dir: Path) -> None:
        (run_dir / "line.json").write_text("{}")

    def check_resume(self, run_dir: Path, state: dict[str, Any]) -> None:
        if state.get("line_points") != self.N or not (run_dir / "line.json").is_file():
            raise NslmError(f"{run_dir} is not a line run")


def line_config(**overrides: Any) -> TrainConfig:
    values = dict(
        epochs=3,
        lr=0.3,
        lr_schedule="constant",
        clip=0.0,
        threads=1,
        progress=False,
        checkpoint_every=4,
        log_every=1,
        patience=10,
    )
    return build_config({**values, **overrides})


def records(run_dir: Path, event: str | None = None) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r.get("event") == event]


def checkpoint_weights(run_dir: Path) -> dict[str, Tensor]:
    pointer = json.loads((run_dir / "latest.json").read_text())
    return load_file(str(run_dir / pointer["checkpoint"] / "model.safetensors"))


def test_a_task_that_is_not_a_language_model_trains_through_the_loop(tmp_path: Path) -> None:
    task = LineTask()
    results = Trainer(line_config(), tmp_path / "run", task=task).run()
    assert (results["steps"], results["epochs"]) == (18, 3) and task.epochs == [0, 1, 2]
    run = tmp_path / "run"
    assert (run / "line.json").is_file() and (run / "config.json").is_file()
    assert json.loads((run / "results.json").read_text())["valid_mse"] == results["valid_mse"]
    steps = records(run)
    assert [r["step"] for r in steps] == list(range(1, 19)) and "loss_mse" in steps[0]
    valid = records(run, "valid")
    assert [r["step"] for r in valid] == [6, 12, 18]
    # the best weights are the result, and they learnt the line (from an mse of about 10)
    assert results["valid_mse"] == min(r["valid_mse"] for r in valid) < 1.0


def test_a_task_resumes_exactly_and_checks_its_run_dir(tmp_path: Path, monkeypatch) -> None:
    cfg = line_config()
    Trainer(cfg, tmp_path / "whole", task=LineTask()).run()
    real_step = Trainer._step

    def interrupted(self: Trainer, batch: Any) -> Any:
        if self.state["step"] == 10:  # after the checkpoint at step 8, inside epoch 1
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, tmp_path / "cut", task=LineTask()).run()
    monkeypatch.setattr(Trainer, "_step", real_step)
    (tmp_path / "cut" / "line.json").rename(tmp_path / "line.json")
    with pytest.raises(NslmError, match="not a line run"):
        Trainer(cfg, tmp_path / "cut", resume=True, task=LineTask())
    (tmp_path / "line.json").rename(tmp_path / "cut" / "line.json")
    resumed_task = LineTask()
    Trainer(cfg, tmp_path / "cut", resume=True, task=resumed_task).run()
    assert resumed_task.epochs == [1, 2]  # epoch 1 went on from its batch 2
    whole, cut = checkpoint_weights(tmp_path / "whole"), checkpoint_weights(tmp_path / "cut")
    for name, tensor in whole.items():
        torch.testing.assert_close(cut[name], tensor, atol=0, rtol=0)


def test_the_config_picks_the_stream_task() -> None:
    from nslm.training.stream_task import StreamLMTask

    assert task_class(line_config()) is StreamLMTask
    assert callable(make_task)


# -- validation every eval_every steps -------------------------------------------------------


def test_eval_every_validates_inside_epochs_and_keeps_the_best(tmp_path: Path) -> None:
    """Every 20 steps and at each epoch's end (94 batches); the best weights, wherever they
    were found, are the result; patience counts epochs only, and plateau lr decay too."""
    cfg = tiny_byte_config(
        make_byte_corpus(tmp_path / "c"),
        epochs=2,
        max_steps=0,
        eval_every=20,
        lr_schedule="plateau",
        patience=0,
        valid_tokens=2000,
    )
    results = train(cfg, tmp_path / "run")
    valid = records(tmp_path / "run", "valid")
    mid = [20, 40, 60, 80, 100, 120, 140, 160, 180]
    assert [r["step"] for r in valid] == sorted([*mid, 94, 188])
    assert [r["step"] for r in valid if r["mid_epoch"]] == mid
    assert results["epochs"] == 2 and all(r["lr"] == cfg.lr for r in valid)
    best = min(r["valid_ppl_nnlm"] for r in valid)
    assert results["valid_ppl_nnlm"] == pytest.approx(best, rel=1e-9)


# -- the rate-halving schedule end to end ----------------------------------------------------


def halving_config(corpus: Path, **overrides: Any) -> TrainConfig:
    values = dict(
        lr_schedule="halving",
        eval_every=5,
        max_steps=0,
        epochs=1,
        log_every=1,
        valid_tokens=1000,
    )
    return tiny_byte_config(corpus, **{**values, **overrides})


def test_rate_halving_follows_each_validation_and_stops(tmp_path: Path, capsys) -> None:
    """ε = 0.9: every validation after the first gains less than 90%, so the lr halves at
    steps 10, 15 and 20, and the third halving ends training mid-epoch at step 20."""
    cfg = halving_config(make_byte_corpus(tmp_path / "c"), halving_epsilon=0.9, max_halvings=3)
    results = train(cfg, tmp_path / "run")
    assert results["steps"] == 20
    assert "stopped after 3 lr halvings (halving_epsilon 0.9) at epoch 0 (partial: batch 20 of" in (
        capsys.readouterr().err
    )
    valid = records(tmp_path / "run", "valid")
    assert [(r["step"], r["halvings"]) for r in valid] == [(5, 0), (10, 1), (15, 2), (20, 3)]
    lr = cfg.lr
    assert [r["lr"] for r in valid] == [lr, lr / 2, lr / 4, lr / 8]
    used = {r["step"]: r["lr"] for r in records(tmp_path / "run")}  # the lr each step used
    assert used[10] == lr and used[11] == lr / 2 and used[16] == lr / 4


def test_rate_halving_decides_on_the_relative_gain(tmp_path: Path) -> None:
    """A real sequence of validation figures: the lr halved exactly at the validations whose
    gain on the previous one was under ε."""
    eps = 0.03
    cfg = halving_config(make_byte_corpus(tmp_path / "c"), halving_epsilon=eps, epochs=2)
    train(cfg, tmp_path / "run")
    valid = records(tmp_path / "run", "valid")
    figures = [r["valid_ppl_nnlm"] for r in valid]
    halved = [b["halvings"] - a["halvings"] for a, b in pairwise(valid)]
    assert valid[0]["halvings"] == 0
    assert halved == [int((p - c) / p < eps) for p, c in pairwise(figures)]
    assert 0 < sum(halved) < len(halved)  # some of each, or the test tells nothing


def test_rate_halving_resumes_exactly(tmp_path: Path, monkeypatch) -> None:
    """Interrupted after step 25 (checkpoint at 20), resumed: the same weights, lr and
    halving count as an uninterrupted run."""
    cfg = halving_config(
        make_byte_corpus(tmp_path / "c"), halving_epsilon=0.5, max_steps=40, checkpoint_every=10
    )
    train(cfg, tmp_path / "whole")
    train_cut_and_resumed(cfg, tmp_path / "cut", 25, monkeypatch)
    whole, cut = checkpoint_weights(tmp_path / "whole"), checkpoint_weights(tmp_path / "cut")
    for name, tensor in whole.items():
        torch.testing.assert_close(cut[name], tensor, atol=0, rtol=0)

    def final_state(run: Path) -> dict[str, Any]:
        pointer = json.loads((run / "latest.json").read_text())
        return json.loads((run / pointer["checkpoint"] / "state.json").read_text())

    a, b = final_state(tmp_path / "whole"), final_state(tmp_path / "cut")
    assert a["halving"] == b["halving"] and a["lr"] == b["lr"] and a["halving"]["halvings"] > 0
