"""Grounded embeddings (paper Table 6): fixed value / lat-lon dimensions after the learnt ones.

Synthetic checks that the fixed part never trains, real-corpus checks of the scaling for a
known year and city, and a tiny real run that trains, saves and reloads a grounded model.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from helpers import synthetic_layout
from nslm.config import load_config
from nslm.errors import NslmError
from nslm.models.grounding import GroundedEmbedding, grounding_table, scale_number
from nslm.models.lm import LanguageModel
from nslm.runs.load import load_run
from nslm.scores.passes import Scorer, head_of
from nslm.training.loop import train

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"


def grounded_model(*sets: str) -> LanguageModel:
    cfg = load_config(
        None,
        [
            "grounded=true",
            "emb_size=8",
            "hidden_size=12",
            "num_layers=2",
            "softmax='full'",
            "dropout=0.1",
            *sets,
        ],
    )
    torch.manual_seed(0)
    model = LanguageModel(cfg, 40, synthetic_layout(40, 3, seed=1))
    table = torch.linspace(-1, 1, 40 * 3).reshape(40, 3)
    model.backbone.embed.set_fixed(table)
    return model


@pytest.mark.parametrize(
    "sets",
    [
        ["model='lstm'"],
        ["model='lstm'", "locked_dropout=true"],
        ["model='awd'", "embed_dropout=0.2", "weight_drop=0.2"],
        ["model='awd'", "tie_weights=true", "emb_size=12"],
    ],
    ids=["lstm", "lstm-locked", "awd", "awd-tied"],
)
def test_fixed_dimensions_are_never_trained(sets: list[str]) -> None:
    model = grounded_model(*sets)
    embed = model.backbone.embed
    assert isinstance(embed, GroundedEmbedding)
    fixed_before = embed.fixed.clone()
    learnt_before = embed.weight.detach().clone()
    # Not a parameter: no optimizer can see it.
    assert all(p is not embed.fixed for p in model.parameters())
    assert not embed.fixed.requires_grad
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    x = torch.randint(0, 40, (6, 3))
    y = torch.randint(0, 40, (6, 3))
    for _ in range(3):
        opt.zero_grad()
        loss, _, _ = model(x, y, torch.zeros_like(y), torch.ones_like(y, dtype=torch.bool))
        loss.backward()
        assert embed.fixed.grad is None
        opt.step()
    assert torch.equal(embed.fixed, fixed_before)
    assert not torch.equal(embed.weight, learnt_before)  # the learnt part did train
    # The LSTM reads both parts: token 5's input vector ends with its fixed row.
    assert torch.equal(embed(torch.tensor([5]))[0, -3:], fixed_before[5])


def test_tied_weights_share_only_the_learnt_part() -> None:
    model = grounded_model("model='awd'", "tie_weights=true", "emb_size=12")
    assert model.heads["nnlm"].softmax.linear.weight is model.backbone.embed.weight
    assert model.backbone.embed.weight.shape == (40, 12)
    assert model.backbone.embed.embedding_dim == 15


def test_a_tied_adaptive_lstm_keeps_its_fixed_dimensions() -> None:
    """The default layout (tied 2-layer LSTM, adaptive softmax) grounded: the learnt part of
    each input vector is the softmax's own row, the last three are the fixed ones, and the
    fixed part is saved as a buffer while the tied rows are saved once."""
    model = grounded_model(
        "emb_size=12",
        "hidden_size=12",
        "softmax='adaptive'",
        "cutoffs=[10, 25]",
        "tie_weights=true",
    )
    embed = model.backbone.embed
    assert isinstance(embed, GroundedEmbedding) and embed.embedding_dim == 15
    head = model.heads["nnlm"].softmax.adaptive.head.weight
    assert embed.weight is head
    got = embed(torch.tensor([3, 30]))
    torch.testing.assert_close(got[0, :12], head[3])
    assert torch.equal(got[:, 12:], embed.fixed[[3, 30]])
    project, output = model.heads["nnlm"].softmax.adaptive.tail[1]
    torch.testing.assert_close(got[1, :12], output.weight[30 - 25] @ project.weight)
    names = [n for n, p in model.named_parameters() if p is head]
    assert len(names) == 1


def test_grounded_needs_an_lstm_backbone() -> None:
    with pytest.raises(NslmError, match="grounded"):
        load_config(None, ["grounded=true", "model='transformer'"])


def test_number_scaling() -> None:
    np.testing.assert_allclose(
        scale_number([0.0, 9.0, 1990.0, -99.0]), [0.0, 0.1, math.log10(1991) / 10, -0.2]
    )
    assert scale_number(1e12) == 1.0  # clipped: beyond 10^10


@pytest.mark.realdata
def test_grounding_values_of_a_known_year_and_city(wt2_all, wt2_places) -> None:
    table = grounding_table(wt2_all)
    stoi = wt2_all.vocab.stoi
    assert table.dtype == np.float32 and table.shape == (len(wt2_all.vocab), 3)
    np.testing.assert_allclose(table[stoi["1990"]], [math.log10(1991) / 10, 0, 0], rtol=1e-6)
    lat, lon = wt2_all.type_coords()[stoi["Paris"]]
    assert abs(lat - 48.86) < 0.1 and abs(lon - 2.35) < 0.1  # GeoNames' Paris
    np.testing.assert_allclose(table[stoi["Paris"]], [0, lat / 90, lon / 180], rtol=1e-6)
    assert not table[stoi["the"]].any()
    # Every fixed value lies in [-1, 1]; numbers and places are grounded, nothing else.
    assert np.abs(table).max() <= 1.0
    types = np.flatnonzero(table.any(axis=1))
    class_types = np.unique(np.concatenate([wt2_all.class_vocab(c) for c in range(1, 11)]))
    assert np.isin(types, class_types).all()
    # A places-only corpus leaves numbers ungrounded: they are plain words there.
    places = grounding_table(wt2_places)
    assert not places[wt2_places.vocab.stoi["1990"]].any()
    assert places[wt2_places.vocab.stoi["Paris"]].any()


@pytest.mark.realdata
@pytest.mark.parametrize(("model", "tied"), [("lstm", False), ("awd", False), ("lstm", True)])
def test_tiny_grounded_run_trains_saves_and_loads(
    tmp_path: Path, wt2_all, model: str, tied: bool
) -> None:
    sets = [
        "grounded=true",
        f"model='{model}'",
        "max_steps=15",
        "test_tokens=1000",
        "valid_tokens=1000",
        f"tie_weights={str(tied).lower()}",
    ]
    cfg = load_config(TINY, sets)
    results = train(cfg, tmp_path / "run")
    saved = load_file(str(tmp_path / "run" / "model.safetensors"))
    np.testing.assert_array_equal(saved["backbone.embed.fixed"].numpy(), grounding_table(wt2_all))
    if not tied:  # a tied run's learnt rows are the softmax's, saved under the head's name
        learnt = saved["backbone.embed.trainable.weight"]
        assert learnt.shape == (len(wt2_all.vocab), cfg.emb_size)
    loaded = load_run(tmp_path / "run", corpus=wt2_all)
    fixed = loaded.model.backbone.embed.fixed.numpy()
    np.testing.assert_array_equal(fixed, grounding_table(wt2_all))  # untouched by training
    scorer = Scorer(loaded.model, batch_size=cfg.eval_batch_size, bptt=cfg.bptt)
    scores = scorer.score(head_of(loaded.corpus.test, 1000))
    assert scores.perplexity("nnlm") == pytest.approx(results["test_ppl_nnlm"], rel=1e-6)
