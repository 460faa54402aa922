"""The increment experiment (paper Table 7): the corpus, the scored positions, the CLI and the
N = 100 result itself. The corpus is synthetic by design, so no test here needs real data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import assert_one_line_error, run_cli
from nslm.cli import main
from nslm.data import prepare_corpus
from nslm.data.custom import parse_class_rule
from nslm.experiments.increment import CLASS_RULE, IncrementConfig
from nslm.experiments.increment_data import second_numbers, split_pairs, write_corpus

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _pairs(text: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+) (?:, )?(\d+)", text)]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(10, 3000), fraction=st.floats(0.01, 0.49), seed=st.integers(0, 2**16))
def test_test_pairs_are_unseen_but_in_vocabulary(n: int, fraction: float, seed: int) -> None:
    train, test = split_pairs(n, fraction, np.random.default_rng(seed))
    assert sorted(train + test) == list(range(1, n + 1))  # every pair exactly once
    assert test and not set(train) & set(test)
    seconds_in_train = {k + 1 for k in train}  # numbers seen as a second number
    for k in test:
        # both numbers of a test pair occur in training, only never together
        assert k in seconds_in_train and k + 1 in set(train)


def test_corpus_files(tmp_path: Path) -> None:
    sizes = write_corpus(tmp_path, 50, test_fraction=0.1, separator=",", epoch_pairs=100, seed=3)
    text = {s: (tmp_path / f"{s}.txt").read_text() for s in ("train", "valid", "test")}
    assert sizes == {"n": 50, "train_pairs": 45, "test_pairs": 5, "repeats": 3}
    for split in text.values():
        assert all(re.fullmatch(r" = \d+ , \d+ = ", line) for line in split.splitlines())
        assert all(b == a + 1 for a, b in _pairs(split))
    train = _pairs(text["train"])
    assert len(train) == 3 * 45 and len(set(train)) == 45
    # the copies are in different orders; validation is the first copy verbatim
    assert train[:45] != train[45:90] and _pairs(text["valid"]) == train[:45]
    assert not set(_pairs(text["test"])) & set(train)
    again = tmp_path / "again"
    write_corpus(again, 50, test_fraction=0.1, separator=",", epoch_pairs=100, seed=3)
    assert (again / "train.txt").read_text() == text["train"]  # reproducible


def test_bare_separator_writes_n_n_plus_1(tmp_path: Path) -> None:
    write_corpus(tmp_path, 20, test_fraction=0.1, separator="", epoch_pairs=1, seed=1)
    lines = (tmp_path / "test.txt").read_text().splitlines()
    assert all(re.fullmatch(r" = (\d+) (\d+) = ", line) for line in lines)


def test_only_second_numbers_are_scored(tmp_path: Path) -> None:
    write_corpus(tmp_path, 30, test_fraction=0.1, separator=",", epoch_pairs=1, seed=2)
    corpus = prepare_corpus(
        tmp_path, "none", cache_root=tmp_path / "cache", class_rules=[parse_class_rule(CLASS_RULE)]
    )
    for split in ("train", "test"):
        data = corpus.splits[split]
        where = second_numbers(data)
        tokens = corpus.vocab.decode(data.token_ids)
        assert len(where) == len(_pairs((tmp_path / f"{split}.txt").read_text()))
        for t in where:  # "= a , b =": b is scored, and its article starts at "="
            assert tokens[t - 3 : t + 2] == ["=", str(int(tokens[t]) - 1), ",", tokens[t], "="]
            assert data.article_ids[t - 3] == data.article_ids[t]
        # one pair per article: the micro-model's w_prev never comes from another pair
        assert len(np.unique(data.article_ids)) == len(where)


def test_config_file_matches_the_defaults() -> None:
    assert IncrementConfig.from_toml(CONFIGS / "increment.toml") == IncrementConfig()


def test_n100_reproduces_table7(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The paper's qualitative result at N = 100: the NNLM memorises the training pairs and
    fails on unseen ones; the NSLM (Eq. 4, diff micro-model) is ≈ 1 on both."""
    out = tmp_path / "increment.json"
    assert main(["experiment", "increment", "--sizes", "100", "--out", str(out)]) == 0
    shown = capsys.readouterr()
    assert "NNLM train" in shown.out and "N=100" in shown.err
    result = json.loads(out.read_text())
    row = result["results"]["100"]
    assert row["sizes"]["train_pairs"] == 90 and row["sizes"]["test_pairs"] == 10
    assert row["micro_model"]["metric"] == "diff"
    assert row["nnlm_train"] < 1.1  # memorised (paper: 1.0)
    assert row["nnlm_test"] > 50  # no better than guessing among the ~100 numbers (paper: 99.1)
    assert row["nslm_train"] < 1.1
    assert row["nslm_test"] < 1.5  # generalises (paper: 1.0)
    assert result["config"] == IncrementConfig().to_json()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--sizes", "5"], "N ≥ 10"),
        (["--sizes", "-3"], "N ≥ 10"),
        (["--sizes", "100,1"], "N ≥ 10"),
        ([], "at least one corpus size"),
        (["--sizes", "100", "--sizes", "100"], "given twice"),
        (["--sizes", "100", "--epochs", "0"], "epochs must be positive"),
        (["--sizes", "100", "--minutes", "-1"], "max_minutes"),
    ],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "r.json"
    assert main(["experiment", "increment", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and needle in err[0]
    assert not out.exists()


def test_bad_config_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("hidden = 100\n")
    assert main(["experiment", "increment", "--sizes", "100", "--config", str(bad)]) == 2
    assert "unknown key 'hidden'" in capsys.readouterr().err
    bad.write_text('lr = "fast"\n')
    assert main(["experiment", "increment", "--sizes", "100", "--config", str(bad)]) == 2
    assert "wants a float" in capsys.readouterr().err


def test_bad_n_from_the_shell() -> None:
    assert_one_line_error(run_cli("experiment", "increment", "--sizes", "1"), "N ≥ 10")
    assert_one_line_error(run_cli("experiment", "increment", "--sizes", "ten"), "--sizes")
