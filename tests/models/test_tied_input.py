"""Input embeddings tied to the output softmax (nslm.models.adaptive_input): one tensor on both
sides, exact distributions, saved once, resumed bit-exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import shared_layout, synthetic_layout, train_cut_and_resumed
from nslm.config import load_config
from nslm.errors import NslmError
from nslm.models.adaptive_input import TiedInput
from nslm.models.lm import LanguageModel
from nslm.runs.load import load_run
from nslm.training.loop import train
from nslm.training.precision import autocast_to, bf16_runs_on, training_precision

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
V = 90


def tied_model(softmax: str = "adaptive", *sets: str) -> LanguageModel:
    cfg = load_config(
        None,
        [
            f"softmax='{softmax}'",
            "emb_size=24",
            "hidden_size=24",
            "cutoffs=[10, 40]",
            "tie_weights=true",
            *sets,
        ],
    )
    torch.manual_seed(0)
    make_layout = shared_layout if cfg.hnlm_top == "shared" else synthetic_layout
    return LanguageModel(cfg, V, make_layout(V, 3, seed=2))


def test_adaptive_input_reads_the_softmax_weights() -> None:
    model = tied_model()
    embed = model.backbone.embed
    assert isinstance(embed, TiedInput)
    a = model.heads["nnlm"].softmax.adaptive
    x = torch.tensor([[3, 10, 45], [9, 39, 89]])
    got = embed(x)
    assert got.shape == (2, 3, 24)
    torch.testing.assert_close(got[0, 0], a.head.weight[3])
    torch.testing.assert_close(got[1, 0], a.head.weight[9])
    for (i, j), k, lo in [((0, 1), 0, 10), ((1, 1), 0, 10), ((0, 2), 1, 40), ((1, 2), 1, 40)]:
        project, output = a.tail[k]
        want = output.weight[x[i, j] - lo] @ project.weight
        torch.testing.assert_close(got[i, j], want)


@pytest.mark.parametrize("softmax", ["adaptive", "full"])
def test_tied_weights_are_one_tensor(softmax: str) -> None:
    """A change made on the output side is seen on the input side, and a gradient from the
    input side reaches the output weights."""
    model = tied_model(softmax)
    out = model.heads["nnlm"].softmax
    table = out.adaptive.head.weight if softmax == "adaptive" else out.linear.weight
    assert model.backbone.embed.weight is table
    names = [n for n, p in model.named_parameters() if p is table]
    assert len(names) == 1  # the optimizer sees it once
    word = torch.tensor([[2]])
    with torch.no_grad():
        table[2].add_(1.0)
    torch.testing.assert_close(model.backbone.embed(word)[0, 0], table[2])
    model.backbone.embed(word).sum().backward()
    assert table.grad[2].abs().sum() > 0 and table.grad[3].abs().sum() == 0


def test_a_tail_word_trains_its_cluster_matrices() -> None:
    model = tied_model()
    project, output = model.heads["nnlm"].softmax.adaptive.tail[1]
    model.backbone.embed(torch.tensor([[50]])).sum().backward()
    assert output.weight.grad[10].abs().sum() > 0 and output.weight.grad[11].abs().sum() == 0
    assert project.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["hnlm_top='shared'"],
        ["locked_dropout=true"],
        ["model='awd'", "weight_drop=0.3", "embed_dropout=0.2", "hidden_size=40"],
    ],
)
def test_tied_heads_sum_to_one(sets: list[str]) -> None:
    model = tied_model("adaptive", *sets).eval()
    with torch.no_grad():
        h, _ = model.features(torch.randint(0, V, (7, 3)))
        flat = h.reshape(-1, h.shape[-1])
        for head in model.heads.values():
            mass = torch.logsumexp(head.log_dist(flat).double(), dim=-1).exp().numpy()
            assert np.all(np.abs(mass - 1) < 1e-4)


def test_a_tied_model_trains_under_bf16_autocast() -> None:
    """In bfloat16 where this CPU runs it, else in the float32 a bf16 config falls back to."""
    model = tied_model("adaptive", "hnlm_top='shared'")
    words = np.flatnonzero(shared_layout(V, 3, seed=2).top_of_word >= 0)  # plain-word targets
    x = torch.as_tensor(np.random.default_rng(0).choice(words, (6, 3)))
    precision = training_precision(True, torch.device("cpu"), announce=False)
    assert precision == ("bfloat16" if bf16_runs_on("cpu") else "float32")
    with autocast_to(precision, torch.device("cpu")):
        loss, stats, _ = model(x, x, torch.zeros_like(x), torch.ones_like(x, dtype=torch.bool))
    loss.backward()
    assert torch.isfinite(loss) and stats.shape == (2, 2)
    assert model.heads["nnlm"].softmax.adaptive.tail[1][1].weight.grad is not None


def test_embedding_dropout_drops_whole_types_of_a_tied_input() -> None:
    from nslm.models.awd import embedding_dropout

    model = tied_model("adaptive", "model='awd'", "embed_dropout=0.5")
    x = torch.tensor([[3, 3, 50], [50, 12, 3]])
    torch.manual_seed(1)
    out = embedding_dropout(model.backbone.embed, x, 0.5, training=True)
    full = model.backbone.embed(x)
    for word in (3, 12, 50):
        rows = out[x == word]
        kept = full[x == word] * 2.0
        assert torch.equal(rows, torch.zeros_like(rows)) or torch.allclose(rows, kept)
        assert torch.equal(rows, rows[:1].expand_as(rows))  # every occurrence alike


def test_tied_model_has_fewer_parameters() -> None:
    def count(model: LanguageModel) -> int:
        return sum(p.numel() for p in model.parameters())

    plain = load_config(None, ["emb_size=24", "hidden_size=24", "cutoffs=[10, 40]"])
    untied = LanguageModel(plain, V, synthetic_layout(V, 3, seed=2))
    assert count(tied_model()) == count(untied) - V * 24


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["emb_size=16", "hidden_size=24"], "emb_size = hidden_size"),
        (["sparse_embedding=true"], "sparse_embedding"),
        (["model='transformer'"], "needs model 'lstm' or 'awd'"),
    ],
)
def test_tying_config_errors(sets: list[str], message: str) -> None:
    with pytest.raises(NslmError, match=message):
        load_config(None, ["emb_size=24", "hidden_size=24", "tie_weights=true", *sets])


def test_a_tied_run_saves_once_and_resumes_bit_exactly(tmp_path: Path, monkeypatch) -> None:
    sets = [
        "tie_weights=true",
        "locked_dropout=true",
        "dropout=0.2",
        "hnlm_top='shared'",
        "cutoffs=[200, 1000]",
        "max_steps=30",
        "checkpoint_every=10",
        "valid_tokens=1000",
        "test_tokens=1000",
    ]
    cfg = load_config(TINY, sets)
    whole = train(cfg, tmp_path / "whole")
    cut = train_cut_and_resumed(cfg, tmp_path / "cut", 15, monkeypatch)
    assert cut["test_ppl_nnlm"] == whole["test_ppl_nnlm"]
    a, b = load_run(tmp_path / "whole").model, load_run(tmp_path / "cut").model
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, atol=0, rtol=0, msg=name)
    # the shared table is one tensor again after loading
    assert b.backbone.embed.weight is b.heads["nnlm"].softmax.adaptive.head.weight
