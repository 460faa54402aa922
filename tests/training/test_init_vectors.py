"""``nslm train --init-vectors FILE`` (paper Table 5) on tiny real runs.

No GloVe file exists on these machines: each test writes a small GloVe-format file whose
words are WikiText-2 types (and some that are not), with the tiny config's 32 dimensions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from nslm.cli import main
from nslm.config import load_config
from nslm.training.loop import Trainer

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
DIM = 32  # configs/tiny.toml's emb_size
# "paris" is lower case, as in GloVe: Paris takes it through the lower-case fallback.
WORDS = ["the", "of", "paris", "1990", "London", "notawikitexttype", "alsonotone"]
pytestmark = pytest.mark.realdata


def write_vectors(path: Path, dim: int = DIM) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    rows = {w: rng.normal(size=dim).astype(np.float32) for w in WORDS}
    path.write_text("".join(f"{w} {' '.join(f'{x:.6f}' for x in v)}\n" for w, v in rows.items()))
    return {w: np.float32([f"{x:.6f}" for x in v]) for w, v in rows.items()}


def test_vectors_initialise_rows_and_grounding_keeps_its_dims(tmp_path: Path) -> None:
    vectors = write_vectors(tmp_path / "glove.txt")
    cfg = load_config(TINY, ["grounded=true", f"init_vectors='{tmp_path / 'glove.txt'}'"])
    trainer = Trainer(cfg, tmp_path / "run")
    stoi = trainer.task.corpus.vocab.stoi
    embed = trainer.model.backbone.embed
    for word, key in (("the", "the"), ("Paris", "paris"), ("1990", "1990")):
        np.testing.assert_allclose(embed.weight[stoi[word]].detach().numpy(), vectors[key])
    assert embed.fixed[stoi["1990"]].abs().sum() > 0  # grounding still appended
    report = json.loads((tmp_path / "run" / "init_vectors.json").read_text())
    # Types with a vector, exactly or through lower case ("The" → "the", "OF" → "of").
    found = sum(w in vectors or w.lower() in vectors for w in trainer.task.corpus.vocab.itos)
    assert found > 5 and "The" in stoi
    assert report["found"] == found and report["total"] == len(stoi) and report["dim"] == DIM
    assert report["coverage"] == pytest.approx(found / len(stoi))
    assert report["by_class"]["year"]["found"] == 1
    assert report["by_class"]["city"]["found"] == 2  # Paris, London


def test_cli_trains_and_reports_coverage(tmp_path: Path, capsys) -> None:
    write_vectors(tmp_path / "glove.txt")
    args = [
        "train",
        "--config",
        str(TINY),
        "--set",
        "max_steps=3",
        "--set",
        "test_tokens=500",
        "--set",
        "valid_tokens=500",
        "--run-dir",
        str(tmp_path / "run"),
        "--init-vectors",
        str(tmp_path / "glove.txt"),
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "init-vectors: " in err and " types (" in err and "d=32" in err
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["init_vectors"] == str((tmp_path / "glove.txt").resolve())
    assert json.loads((tmp_path / "run" / "init_vectors.json").read_text())["found"] > 5
    # Resuming takes the run's own config and its checkpoint's rows: no second vector file.
    again = ["train", "--resume", str(tmp_path / "run"), "--init-vectors", "x.txt"]
    assert main(again) == 2
    assert "drop --config, --set" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        ("wrong-dim", "vectors have 5 dimensions but emb_size is 32"),
        ("missing", "vector file not found"),
    ],
)
def test_bad_vector_files_are_one_line_errors(tmp_path: Path, capsys, make, needle) -> None:
    path = tmp_path / "glove.txt"
    if make == "wrong-dim":
        write_vectors(path, dim=5)
    torch.manual_seed(0)
    args = [
        "train",
        "--config",
        str(TINY),
        "--run-dir",
        str(tmp_path / "run"),
        "--init-vectors",
        str(path),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and needle in err and "\n" not in err
    assert not (tmp_path / "run").exists()  # refused before the run directory is made
