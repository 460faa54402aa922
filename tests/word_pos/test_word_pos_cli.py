"""Word+POS runs through the command line: train, resume, eval's table, generate, bad input.

A tiny synthetic tagged corpus (DET NOUN VERB DET NOUN .) keeps these fast; the real corpora
are read in tests/word_pos/test_tagged_data.py and trained on in benchmarks/word_pos/word_pos.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import make_tagged_corpus, run_cli

TINY = [
    "--set",
    "hidden_size=16",
    "--set",
    "emb_size=8",
    "--set",
    "tag_emb_size=4",
    "--set",
    "shape_emb_size=4",
    "--set",
    "epochs=20",
    "--set",
    "eval_every=20",
    "--set",
    "lr=0.01",
    "--set",
    "progress=false",
    "--set",
    "batch_size=16",
]


@pytest.fixture(scope="module")
def tagged_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tagged_corpus(tmp_path_factory.mktemp("tagged"))


@pytest.fixture(scope="module")
def joint_run(tagged_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("runs") / "joint"
    done = run_cli(
        "train",
        "--config",
        "configs/word-pos-ewt.toml",
        "--set",
        f"corpus=tagged:{tagged_dir}",
        *TINY,
        "--run-dir",
        str(run),
    )
    assert done.returncode == 0, done.stderr
    return run


def test_training_writes_the_comparison(joint_run: Path) -> None:
    results = json.loads((joint_run / "results.json").read_text())
    for key in (
        "test_word_ppl_gold_prev_tags",
        "test_word_ppl_predicted_tags",
        "test_joint_ppl",
        "test_tagger_acc",
        "test_tagger_mft_baseline_acc",
    ):
        assert results[key] is not None, key
    # a grammar this regular is learnt: tags are right and words are far likelier than chance
    assert results["test_tagger_acc"] > 0.9
    assert results["test_word_ppl_gold_prev_tags"] < 8.0
    # the joint never beats its own marginal: P(w, t) ≤ P(w)
    assert results["test_joint_ppl"] >= results["test_word_ppl_gold_prev_tags"] - 1e-9


def test_eval_prints_the_table(joint_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "eval.json"
    done = run_cli("eval", str(joint_run), "--split", "test", "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "word ppl, gold prev tags" in done.stdout and "most-frequent-tag acc" in done.stdout
    figures = json.loads(out.read_text())["test"]
    results = json.loads((joint_run / "results.json").read_text())
    # eval and the end of training are the same function on the same weights
    assert figures["joint_ppl"] == pytest.approx(results["test_joint_ppl"], rel=1e-9)


def test_generate_samples_word_tag_pairs(joint_run: Path) -> None:
    done = run_cli("generate", str(joint_run), "the dog", "--max-tokens", "12", "--seed", "3")
    assert done.returncode == 0, done.stderr
    pairs = done.stdout.split()
    assert pairs[:2] == ["the/DET", "dog/NOUN"]  # the prompt, tagged by the model
    tags = {p.rpartition("/")[2] for p in pairs}
    assert tags <= {"DET", "NOUN", "VERB", "."}


@pytest.mark.parametrize(
    ("line", "message"),
    [("the/DET dog", "has no tag"), ("the dog\tDET", "2 words but 1 tag")],
)
def test_a_malformed_corpus_is_one_line(
    tagged_dir: Path, tmp_path: Path, line: str, message: str
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in ("valid", "test"):
        (bad / f"{name}.txt").write_text((tagged_dir / f"{name}.txt").read_text())
    (bad / "train.txt").write_text("the/DET dog/NOUN ./.\n" + line + "\n")
    done = run_cli(
        "train",
        "--config",
        "configs/word-pos-ewt.toml",
        "--set",
        f"corpus=tagged:{bad}",
        *TINY,
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "train.txt:2" in done.stderr and message in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_tag_unseen_in_train_is_one_line(tagged_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "train.txt").write_text((tagged_dir / "train.txt").read_text())
    (bad / "valid.txt").write_text((tagged_dir / "valid.txt").read_text())
    (bad / "test.txt").write_text("the/DET dog/NOUN barks/VBZ\n")
    done = run_cli(
        "train", "--config", "configs/word-pos-ewt.toml", "--set", f"corpus=tagged:{bad}", *TINY
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "test.txt:1" in done.stderr and "VBZ" in done.stderr


def test_a_word_pos_model_needs_a_tagged_corpus() -> None:
    done = run_cli("train", "--config", "configs/word-pos-ewt.toml", "--set", "corpus=wikitext-2")
    assert done.returncode == 2 and "tagged corpus" in done.stderr


def test_a_word_pos_run_resumes_exactly(tagged_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """Interrupted after a checkpoint, resumed: the same weights as a run never stopped."""
    from safetensors.torch import load_file

    from nslm.config import build_config
    from nslm.training.loop import Trainer

    cfg = build_config(
        {
            "model": "word-pos",
            "corpus": f"tagged:{tagged_dir}",
            "classes": "none",
            "hidden_size": 16,
            "emb_size": 8,
            "tag_emb_size": 4,
            "shape_emb_size": 4,
            "batch_size": 16,
            "epochs": 2,
            "checkpoint_every": 5,
            "progress": False,
            "dropout": 0.3,
            "optimizer": "adam",
            "lr": 0.01,
        }
    )
    Trainer(cfg, tmp_path / "whole").run()
    real_step = Trainer._step

    def interrupted(self: Trainer, batch) -> object:
        if self.state["step"] == 12:  # after the checkpoint at step 10, inside epoch 1
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        Trainer(cfg, tmp_path / "cut").run()
    monkeypatch.setattr(Trainer, "_step", real_step)
    Trainer(cfg, tmp_path / "cut", resume=True).run()
    whole = load_file(str(tmp_path / "whole" / "model.safetensors"))
    cut = load_file(str(tmp_path / "cut" / "model.safetensors"))
    assert whole.keys() == cut.keys()
    for name, tensor in whole.items():
        assert (cut[name] == tensor).all(), name
