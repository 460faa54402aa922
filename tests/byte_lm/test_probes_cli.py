"""``nslm probe sentiment|pos RUN`` end to end on the tiny byte LM and a tiny labelled data
directory (no corpus needed), and the one-line errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_one_line_error, run_cli
from nslm.byte_lm.probes.estimators import load_probe
from nslm.cli import main


def test_probe_sentiment(tiny_byte_run: Path, labelled_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sst"
    assert main(["probe", "sentiment", str(tiny_byte_run), "--out-dir", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["poolings"]) == {
        "final_cell",
        "mean_cell",
        "mean_hidden",
        "mean_cell_hidden",
    }
    assert summary["framed"] is True
    assert summary["sizes"] == {"train": 120, "dev": 40, "test": 40}
    for key in ("all_acc", "one_neuron_acc"):
        assert 0.0 <= summary[key] <= 1.0
    assert summary["bow"]["test_acc"] > 0.9  # the label word is in every sentence
    for name in ("weights.png", "neuron_histogram.png", "neuron.json", "probe_mean_cell.json"):
        assert (out / name).is_file()
    assert load_probe(out / "probe_final_cell.json").coef_.shape == (1, 32)


def test_probe_pos(tiny_byte_run: Path, labelled_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "pos"
    args = ["probe", "pos", str(tiny_byte_run), "--out-dir", str(out), "--train-bytes", "1500"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "POS, grouped tags" in text and "POS, ungrouped tags" in text
    grouped = json.loads((out / "grouped" / "summary.json").read_text(encoding="utf-8"))
    ungrouped = json.loads((out / "ungrouped" / "summary.json").read_text(encoding="utf-8"))
    assert set(grouped["rows"]) == {"all", "1", "2", "3"}
    assert "NNS" in ungrouped["tags"] and "NNS" not in grouped["tags"]  # NNS → NN
    assert {"VB", "SPACE"} <= set(grouped["tags"])
    assert 1500 <= grouped["train_bytes"] < 1600  # whole sentences up to 1,500 bytes
    assert 0.0 <= grouped["space_top3_acc"] <= 1.0
    top1 = load_probe(out / "grouped" / "probe_1.json")
    assert (np.count_nonzero(top1.coef_, axis=1) <= 1).all()
    page = (out / "grouped" / "sentences_SPACE.html").read_text(encoding="utf-8")
    assert "café" in page or "SPACE" in page


def test_bad_input_is_one_line(tiny_byte_run: Path, tmp_path: Path) -> None:
    result = run_cli("probe", "sentiment", str(tmp_path / "nowhere"))
    assert_one_line_error(result, "no run at")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli(
        "probe",
        "pos",
        str(tiny_byte_run),
        "--out-dir",
        str(tmp_path / "o"),
        env={"NSLM_DATA_DIR": str(empty)},
    )
    assert_one_line_error(result, "no ud-english-ewt data")
    (empty / "sst2").mkdir()
    (empty / "sst2" / "train.txt").write_text("1 good\n", encoding="utf-8")
    (empty / "sst2" / "dev.txt").write_text("", encoding="utf-8")
    result = run_cli(
        "probe",
        "sentiment",
        str(tiny_byte_run),
        "--out-dir",
        str(tmp_path / "o"),
        env={"NSLM_DATA_DIR": str(empty)},
    )
    assert_one_line_error(result, "dev.txt: file is empty")


@pytest.mark.realdata
def test_a_word_lm_is_refused(tiny_nslm_run: Path, tmp_path: Path) -> None:
    result = run_cli("probe", "pos", str(tiny_nslm_run), "--out-dir", str(tmp_path / "o"))
    assert_one_line_error(result, "needs a byte-LM run")
