"""The byte-level LSTM LM (docs/byte-lm.md): corpus, bits per byte, stateful training,
device, the config of Carvalho's size, generation coloured by a neuron, and bad input."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import (
    assert_one_line_error,
    make_byte_corpus,
    run_cli,
    tiny_byte_config,
    train_cut_and_resumed,
)
from nslm.byte_lm.colour import ansi, characters, html_page, rgb
from nslm.byte_lm.data import HELD_OUT, byte_split, imdb_split_reviews
from nslm.config import load_config
from nslm.data import prepare_corpus
from nslm.errors import NslmError
from nslm.models.lm import LanguageModel
from nslm.perplexity import accuracy, bits_per_token
from nslm.runs.load import kept_checkpoints, load_run
from nslm.scores.passes import Scorer
from nslm.training.loop import Trainer

ROOT = Path(__file__).resolve().parents[2]


# -- the corpus ------------------------------------------------------------------------------


def test_a_byte_corpus_reads_any_bytes_one_article_per_line(tmp_path: Path) -> None:
    corpus = prepare_corpus(f"bytes:{make_byte_corpus(tmp_path / 'c')}")
    test = corpus.test
    raw = (tmp_path / "c" / "test.txt").read_bytes()
    assert bytes(test.token_ids) == raw  # non-UTF-8 bytes included, byte for byte
    assert test.token_ids.dtype == np.uint8 and len(corpus.vocab) == 256
    assert corpus.vocab.unk_id == -1 and corpus.class_names == ("word",)
    assert test.article_ids[-1] + 1 == raw.count(b"\n")
    assert corpus.type_class_counts().sum() == len(corpus.train)


def test_byte_split_ends_each_article_with_a_newline() -> None:
    split = byte_split("valid", [b"ab", b"", b"c"])
    assert bytes(split.token_ids) == b"ab\n\nc\n"
    assert split.article_ids.tolist() == [0, 0, 0, 1, 2, 2]


@pytest.mark.realdata
def test_imdb_bytes_holds_out_reviews_and_never_reads_test(data_dir: Path, monkeypatch) -> None:
    import nslm.byte_lm.data as byte_data

    read: list[Path] = []
    real_read = byte_data.read_bytes

    def spy(path: Path) -> bytes:
        read.append(Path(path))
        return real_read(path)

    monkeypatch.setattr(byte_data, "read_bytes", spy)
    splits = imdb_split_reviews()
    assert sorted(p.name for p in read) == ["train.tsv.xz", "unsup.txt.xz"]  # never test
    assert len(splits["valid"]) == len(splits["test"]) == HELD_OUT
    assert not set(splits["train"]) & (set(splits["valid"]) | set(splits["test"]))
    assert len(splits["train"]) > 73_000
    assert imdb_split_reviews()["valid"] == splits["valid"]  # a fixed shuffle


# -- bits per byte -----------------------------------------------------------------------------


def test_bits_per_token_and_accuracy_by_hand() -> None:
    log_probs = np.array([np.nan, math.log(0.5), math.log(0.25)])
    assert bits_per_token(log_probs) == pytest.approx(1.5)
    assert accuracy(np.array([np.nan, 1.0, 0.0, 1.0])) == pytest.approx(2 / 3)


def test_a_uniform_byte_model_scores_eight_bits_per_byte(tmp_path: Path) -> None:
    """Zero output weights: every byte has probability 1/256, so exactly 8 bits per byte;
    the argmax (ties → lowest id) is byte 0, which never occurs: accuracy 0."""
    cfg = tiny_byte_config(make_byte_corpus(tmp_path / "c"))
    corpus = prepare_corpus(cfg.corpus)
    model = LanguageModel(cfg, 256, None)
    torch.nn.init.zeros_(model.heads["nnlm"].softmax.linear.weight)
    torch.nn.init.zeros_(model.heads["nnlm"].softmax.linear.bias)
    scores = Scorer(model, batch_size=4, bptt=16, accuracy=True).score(corpus.valid)
    assert bits_per_token(scores.nnlm) == pytest.approx(8.0, abs=1e-6)
    assert np.isnan(scores.nnlm[0]) and np.isfinite(scores.nnlm[1:]).all()
    assert accuracy(scores.correct) == 0.0


def test_training_reports_bits_per_byte_and_accuracy(tiny_byte_run: Path) -> None:
    import json

    results = json.loads((tiny_byte_run / "results.json").read_text())
    for split in ("valid", "test"):
        assert results[f"{split}_bpb"] == pytest.approx(math.log2(results[f"{split}_ppl_nnlm"]))
        assert 0.0 <= results[f"{split}_accuracy"] <= 1.0
    assert results["valid_bpb"] < 8.0  # it learnt something in 40 steps


# -- stateful TBPTT, device, checkpoints ---------------------------------------------------------


def test_a_stateful_batch_carries_state_and_a_reset_one_does_not(tmp_path: Path) -> None:
    cfg = tiny_byte_config(make_byte_corpus(tmp_path / "c"))
    trainer = Trainer(cfg, tmp_path / "run")
    streams = trainer.task.streams
    first, second = streams.batch(0, cfg.bptt), streams.batch(1, cfg.bptt)
    trainer._step(first)
    carried = trainer.hidden
    assert carried is not None and not carried[0].requires_grad  # detached: truncated BPTT
    model = trainer.model.eval()
    x1, x2 = (torch.from_numpy(b[0]).long() for b in (first, second))
    with torch.no_grad():
        whole, _ = model.features(torch.cat([x1, x2]))
        stateful, _ = model.features(x2, model.features(x1)[1])
        reset, _ = model.features(x2, None)
    torch.testing.assert_close(stateful, whole[len(x1) :], atol=1e-5, rtol=0)
    assert not torch.allclose(reset, whole[len(x1) :], atol=1e-3)


def test_the_device_option_is_honoured_on_cpu(tmp_path: Path, monkeypatch) -> None:
    cfg = tiny_byte_config(make_byte_corpus(tmp_path / "c"), device="cpu", max_steps=2)
    moved: list[torch.device] = []
    real_to = torch.nn.Module.to

    def spy(self, *args, **kwargs):
        moved.extend(a for a in args if isinstance(a, torch.device))
        return real_to(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "to", spy)
    trainer = Trainer(cfg, tmp_path / "run")
    assert trainer.device == torch.device("cpu") and torch.device("cpu") in moved
    assert all(p.device.type == "cpu" for p in trainer.model.parameters())
    trainer.run()


def test_a_missing_cuda_device_is_one_line(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    corpus = make_byte_corpus(tmp_path / "c")
    config = tmp_path / "tiny.toml"
    config.write_text(f'corpus = "bytes:{corpus}"\nclasses = "none"\nheads = ["nnlm"]\n')
    result = run_cli(
        "train", "--config", str(config), "--device", "cuda", "--run-dir", str(tmp_path / "run")
    )
    assert_one_line_error(result, "cuda")


def test_kept_checkpoints_are_not_rotated(tmp_path: Path) -> None:
    from nslm.training.loop import train

    cfg = tiny_byte_config(
        make_byte_corpus(tmp_path / "c"),
        keep_checkpoints_at_minutes=[1e-6, 2e-6],
        checkpoint_every=5,
    )
    train(cfg, tmp_path / "run")
    kept = kept_checkpoints(tmp_path / "run")
    assert list(kept) == [1e-6, 2e-6]
    for weights in kept.values():
        assert (weights.parent / "state.json").is_file()  # a whole, resumable checkpoint
        load_run(tmp_path / "run", weights=weights)


@pytest.mark.slow
def test_a_seed_size_config_builds_and_runs_a_step(tmp_path: Path) -> None:
    """configs/byte-lm-carvalho.toml (hidden 2,048, for a GPU): one step on a tiny batch, here
    on CPU; it must keep the device option and Carvalho's size."""
    corpus = make_byte_corpus(tmp_path / "c")
    cfg = load_config(
        ROOT / "configs" / "byte-lm-carvalho.toml",
        [
            f"corpus='bytes:{corpus}'",
            "device='cpu'",
            "batch_size=2",
            "bptt=8",
            "max_steps=1",
            "bf16=false",
            "valid_tokens=64",
            "test_tokens=64",
            "progress=false",
        ],
    )
    assert cfg.hidden_size >= 2048 and cfg.num_layers == 1
    trainer = Trainer(cfg, tmp_path / "run")
    before = trainer.model.backbone.lstm.weight_hh_l0.detach().clone()
    trainer._step(trainer.task.streams.batch(0, cfg.bptt))
    assert trainer.model.backbone.lstm.hidden_size == cfg.hidden_size
    assert not torch.equal(before, trainer.model.backbone.lstm.weight_hh_l0)


# -- generation coloured by a neuron --------------------------------------------------------------


def test_characters_keep_multibyte_characters_whole() -> None:
    assert characters("aé".encode()) == [("a", 0), ("é", 2)]
    assert characters(b"\xffb\xc3") == [("\ufffd", 0), ("b", 1), ("\ufffd", 2)]
    assert rgb(1.0) == (255, 0, 0) and rgb(-1.0) == (0, 0, 255) and rgb(0.0) == (255, 255, 255)


def test_ansi_and_html_colour_every_character() -> None:
    data = "né<b>\n".encode()
    values = np.array([1.0, 0.0, -1.0, 0.5, 0.5, 0.5, 0.5])
    coloured = ansi(data, values)
    assert "48;2;255;0;0mn" in coloured and "48;2;0;0;255mé" in coloured
    page = html_page(data, values, title="t")
    assert "rgb(0,0,255)" in page and ">&lt;</span>" in page and "<br>" in page


def test_generate_colours_by_a_neuron(tiny_byte_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "n3.html"
    args = [
        "generate",
        str(tiny_byte_run),
        "the movie",
        "--max-tokens",
        "40",
        "--temperature",
        "0.5",
        "--seed",
        "1",
        "--neuron",
        "3",
    ]
    result = run_cli(*args, "--html", str(page))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("\x1b[38;2;0;0;0;48;2;") and "\x1b[0m" in result.stdout
    assert page.read_text(encoding="utf-8").count("<span") >= len("the movie")
    again = run_cli(*args)
    assert again.stdout == result.stdout  # the seed fixes the sample
    # without --neuron the bytes are written as they are (they need not be UTF-8)
    plain = subprocess.run(
        [
            sys.executable,
            "-m",
            "nslm",
            "generate",
            str(tiny_byte_run),
            "the",
            "--max-tokens",
            "20",
        ],
        capture_output=True,
        check=True,
    )
    assert plain.stdout.startswith(b"the") and len(plain.stdout) == len("the") + 20 + 1


def test_bad_input_is_one_line(tiny_byte_run: Path, tiny_nslm_run: Path, tmp_path: Path) -> None:
    result = run_cli("generate", str(tiny_byte_run), "--neuron", "999")
    assert_one_line_error(result, "neuron 999")
    result = run_cli("generate", str(tiny_nslm_run), "--neuron", "1")
    assert_one_line_error(result, "byte-LM run")
    result = run_cli("eval", str(tiny_byte_run), "--model", "nslm")
    assert_one_line_error(result, "byte LM", "no NSLM")
    empty = make_byte_corpus(tmp_path / "e")
    (empty / "valid.txt").write_bytes(b"")
    with pytest.raises(NslmError, match="empty"):
        prepare_corpus(f"bytes:{empty}")
    with pytest.raises(NslmError, match=r"expected test\.txt"):
        (empty / "test.txt").unlink()
        prepare_corpus(f"bytes:{empty}")


def test_eval_reports_bits_per_byte_of_any_bytes(tiny_byte_run: Path, tmp_path: Path) -> None:
    import json

    out = tmp_path / "eval.json"
    result = run_cli("eval", str(tiny_byte_run), "--split", "test", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "bits per byte" in result.stdout
    trained = json.loads((tiny_byte_run / "results.json").read_text())
    assert json.loads(out.read_text())["test"]["bits_per_byte"] == pytest.approx(
        trained["test_bpb"], abs=1e-6
    )
    text = tmp_path / "latin1.txt"
    text.write_bytes("un film très réussi\n".encode("latin-1"))  # not UTF-8
    result = run_cli("eval", str(tiny_byte_run), "--text", str(text), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert 0 < json.loads(out.read_text())["text"]["bits_per_byte"] < 16


def test_resume_continues_a_byte_run_exactly(tmp_path: Path, monkeypatch) -> None:
    """Interrupted after step 25 (checkpoint at 20), resumed: the weights equal an
    uninterrupted run's, so the carried state and the narrow byte ids are restored."""
    from safetensors.torch import load_file

    from nslm.training.loop import train

    cfg = tiny_byte_config(make_byte_corpus(tmp_path / "c"), max_steps=30, checkpoint_every=10)
    train(cfg, tmp_path / "whole")
    train_cut_and_resumed(cfg, tmp_path / "cut", 25, monkeypatch)
    whole = load_file(str(tmp_path / "whole" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "cut" / "model.safetensors"))
    for name, tensor in whole.items():
        torch.testing.assert_close(resumed[name], tensor, atol=0, rtol=0)


def test_the_linear_schedule_decays_to_zero_over_steps_or_time(tmp_path: Path) -> None:
    from dataclasses import replace

    from nslm.training.optim import scheduled_lr

    cfg = tiny_byte_config(tmp_path, lr=4e-3)  # never trained: the corpus need not exist
    assert scheduled_lr(cfg, 4e-3, 0, 100, 0.0) == pytest.approx(4e-3)
    assert scheduled_lr(cfg, 4e-3, 50, 100, 0.0) == pytest.approx(2e-3)
    assert scheduled_lr(cfg, 4e-3, 100, 100, 0.0) == 0.0
    timed = replace(cfg, max_minutes=10.0)  # the time budget decides when it runs out first
    assert scheduled_lr(timed, 4e-3, 10, 10**6, 450.0) == pytest.approx(1e-3)
