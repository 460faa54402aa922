"""The fixed-window (Bengio 2003) backbone: window semantics, state carry, a normalised
output through the shared head, and that it learns a window-sized dependency."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from helpers import train_tiny_nslm
from nslm.cli import main
from nslm.models.fixed_window import FixedWindowBackbone
from nslm.models.heads import NNLMHead

VOCAB = 30


def make(context: int, dropout: float = 0.0) -> FixedWindowBackbone:
    torch.manual_seed(0)
    return FixedWindowBackbone(VOCAB, 8, 16, context, dropout).eval()


def test_features_depend_only_on_the_window() -> None:
    model = make(context=3)
    x = torch.randint(0, VOCAB, (12, 2))
    h, _ = model(x)
    t = 8
    outside, inside = x.clone(), x.clone()
    outside[t - 3, 0] = (x[t - 3, 0] + 1) % VOCAB  # x_{t-3}: not among the last 3 inputs
    inside[t - 2, 0] = (x[t - 2, 0] + 1) % VOCAB  # x_{t-2}: in the window
    h_out, _ = model(outside)
    h_in, _ = model(inside)
    torch.testing.assert_close(h_out[t], h[t])
    assert not torch.allclose(h_in[t, 0], h[t, 0])
    torch.testing.assert_close(h_in[t, 1], h[t, 1])  # the other stream is untouched


def test_state_carries_the_window_across_tbptt_windows() -> None:
    for context in (1, 2, 4):
        model = make(context)
        x = torch.randint(0, VOCAB, (20, 3))
        whole, _ = model(x)
        first, state = model(x[:7])
        second, state = model(x[7:9], state)  # shorter than the window
        third, _ = model(x[9:], state)
        torch.testing.assert_close(torch.cat([first, second, third]), whole)


def test_stream_start_uses_zero_padding() -> None:
    model = make(context=3)
    assert torch.all(model.embed.weight[model.pad] == 0)
    x = torch.randint(0, VOCAB, (4, 1))
    h, _ = model(x)
    padded, _ = model(torch.cat([torch.full((2, 1), model.pad), x]))
    torch.testing.assert_close(h, padded[2:])


def test_head_distribution_sums_to_one() -> None:
    model = make(context=4)
    head = NNLMHead(model.out_dim, VOCAB, "full", [], 4.0)
    h, _ = model(torch.randint(0, VOCAB, (6, 2)))
    probs = head.log_dist(h.reshape(-1, model.out_dim)).exp().sum(-1)
    torch.testing.assert_close(probs, torch.ones_like(probs), atol=1e-4, rtol=0)


def test_learns_a_dependency_two_words_back() -> None:
    """y_t = x_{t-1}: with a 2-word window the model learns it (loss → 0); with a 1-word
    window it cannot do better than chance (the pattern is random)."""
    torch.manual_seed(1)
    x = torch.randint(0, 8, (200, 4))
    y = torch.roll(x, 1, dims=0)
    losses = {}
    for context in (1, 2):
        torch.manual_seed(2)
        model = FixedWindowBackbone(VOCAB, 16, 32, context, 0.0)
        head = NNLMHead(model.out_dim, VOCAB, "full", [], 4.0)
        opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=0.02)
        for _ in range(150):
            h, _ = model(x)
            flat = h[1:].reshape(-1, model.out_dim)
            loss = head.nll(flat, y[1:].reshape(-1), torch.zeros(flat.shape[0])).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[context] = float(loss.detach())
    assert losses[2] < 0.1
    assert losses[1] > 1.5  # chance is log 8 ≈ 2.08


@pytest.mark.realdata
def test_a_fixed_window_run_gets_the_per_class_tables(tmp_path: Path) -> None:
    """The window LM goes through the same evaluator as the LSTM: NNLM, HNLM and NSLM
    columns of Tables 2 and 3, on real WikiText-2, from one trained run."""
    run = train_tiny_nslm(tmp_path / "window", ["year", "city"], ("model='fixed-window'",))
    assert json.loads((run / "config.json").read_text())["model"] == "fixed-window"
    assert main(["eval", str(run), "--split", "test", "--prefix-tokens", "20000"]) == 0
    tables = json.loads((run / "tables_test.json").read_text())["tables"]
    for table, aggregate in (("numbers", "Numbers"), ("places", "Locations")):
        row = tables[table]["rows"][aggregate]
        assert {"NNLM", "HNLM", "NSLM"} <= set(row)
        assert all(math.isfinite(v) and v > 1 for v in row.values())
    year = tables["numbers"]["rows"]["year"]
    assert year["NSLM"] < year["NNLM"]  # the diff micro-model helps even a 40-step LM
