"""The Python API (``nslm.load``, src/nslm/api.py): every example of docs/python.md runs, on
the session's tiny runs linked under the names the page uses; each kind's object does what
its methods promise (proper scores, a prediction list in order, a generation that starts
with its prompt); and what is not a model is a one-line error.

``NSLM_API_EXAMPLES_OUT``: a file where the examples' test writes ``{"passed", "failed"}``
(benchmarks/house/house.py reads it as ``python_api_examples``).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

import nslm
from helpers import make_corpus, make_tagged_corpus

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "python.md"
EXAMPLE = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)


def examples() -> list[str]:
    return EXAMPLE.findall(PAGE.read_text(encoding="utf-8"))


def _train(config: str | None, run: Path, sets: list[str]) -> Path:
    from nslm.config import load_config
    from nslm.scores.passes import use_threads
    from nslm.training.loop import train

    use_threads(1)
    train(load_config(ROOT / config if config else None, sets), run)
    return run


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory, tiny_nslm_run: Path, tiny_byte_run: Path
) -> Path:
    """A folder whose runs/ holds a model of every kind under the names docs/python.md uses."""
    from nslm.ngram.build import build_model, raw_lines, raw_stream, raw_vocabulary

    root = tmp_path_factory.mktemp("api")
    (root / "runs").mkdir()
    (root / "runs" / "wt2-cpu").symlink_to(tiny_nslm_run)
    (root / "runs" / "byte-lm").symlink_to(tiny_byte_run)
    tagged = make_tagged_corpus(root / "tagged")
    _train(
        "configs/word-pos-ewt.toml",
        root / "runs" / "ewt-joint",
        [
            f"corpus='tagged:{tagged}'",
            *("hidden_size=16", "emb_size=8", "tag_emb_size=4", "shape_emb_size=4"),
            *("epochs=2", "progress=false", "batch_size=16"),
        ],
    )
    _train(
        "configs/tiny.toml",
        root / "runs" / "table4-d-rnn",
        [
            *("heads=['numeral']", "numeral_model='d-rnn'", "digit_size=8", "cutoffs=[4]"),
            *("max_steps=5", "test_tokens=2000"),
        ],
    )
    corpus = make_corpus(root / "raw", "the cat sat on the mat\nthe dog sat on the cat\n" * 20)
    lines = raw_lines(corpus / "train.txt")
    itos, unk = raw_vocabulary(lines)
    fallback = (0.5, 1.0, 1.5)  # lmplz's --discount_fallback: a corpus this small lacks counts
    build_model(raw_stream(lines, itos, unk), 5, discount_fallback=fallback).save(
        root / "runs" / "kn5"
    )
    return root


def test_every_example_of_the_page_runs(runs: Path, monkeypatch, capsys) -> None:
    blocks = examples()
    assert len(blocks) >= 6, "docs/python.md lost its examples"
    for system in ("wt2-cpu", "table4-d-rnn", "byte-lm", "ewt-joint", "kn5"):
        assert any(f'"runs/{system}"' in block for block in blocks), system
    monkeypatch.chdir(runs)
    failed = []
    for block in blocks:
        try:
            exec(compile(block, str(PAGE), "exec"), {"__name__": "__docs__"})
        except Exception as error:  # each failing example is reported, then the test fails
            failed.append(f"{block.splitlines()[2]} … {type(error).__name__}: {error}")
    out = os.environ.get("NSLM_API_EXAMPLES_OUT")
    if out:
        Path(out).write_text(
            json.dumps({"passed": len(blocks) - len(failed), "failed": len(failed)})
        )
    assert not failed, failed
    assert "0." in capsys.readouterr().out  # the examples printed their figures


def test_each_kind_opens_as_its_object(runs: Path) -> None:
    from nslm.api import ByteRun, NgramLM, NslmRun, NumeralRun, WordPosRun

    expected = {
        "wt2-cpu": NslmRun,
        "table4-d-rnn": NumeralRun,
        "byte-lm": ByteRun,
        "ewt-joint": WordPosRun,
        "kn5": NgramLM,
    }
    for name, cls in expected.items():
        model = nslm.load(runs / "runs" / name)
        assert type(model) is cls and model.kind == cls.kind, name


def test_a_word_lm_scores_proper_and_predicts_in_order(runs: Path) -> None:
    lm = nslm.load(runs / "runs" / "wt2-cpu")
    assert lm.has_micro
    text = "The bridge opened in 1932 in Zorbleton."  # Zorbleton: outside the vocabulary
    scored = lm.score(text)
    assert scored.tokens[-1] == "<eos>" and "Zorbleton" in scored.tokens
    finite = scored.log_probs[~np.isnan(scored.log_probs)]
    assert np.isfinite(finite).all() and (finite < 0).all()
    assert scored.bits_per_byte == pytest.approx(scored.nats / math.log(2) / len(text))
    guesses = lm.predict("The war began in 1914, and ended in", k=10)
    probs = [g.p for g in guesses]
    assert len(guesses) == 10 and probs == sorted(probs, reverse=True) and sum(probs) <= 1 + 1e-9
    assert all(g.readings for g in guesses)  # the NSLM says how each came about
    assert lm.generate("In 1990", max_tokens=5, seed=3) == lm.generate("In 1990", 5, seed=3)
    neural = nslm.load(runs / "runs" / "wt2-cpu", micro="none")
    assert not neural.has_micro and not neural.predict("In 1990", k=3)[0].readings


def test_a_byte_lm_is_a_distribution_over_bytes(runs: Path) -> None:
    lm = nslm.load(runs / "runs" / "byte-lm")
    guesses = lm.predict("abc", k=256)
    assert sum(g.p for g in guesses) == pytest.approx(1.0, abs=1e-5)
    scored = lm.score("héllo\n")
    assert scored.bytes == len("héllo\n".encode()) and len(scored.tokens) == scored.bytes
    assert lm.generate("ab", max_tokens=5, seed=0).startswith("ab")


def test_an_ngram_model_predicts_what_it_counted(runs: Path) -> None:
    lm = nslm.load(runs / "runs" / "kn5")
    assert lm.predict("the cat sat on the", k=1)[0].token in {"mat", "cat"}
    everything = lm.predict("the", k=len(lm.model.itos))
    assert sum(g.p for g in everything) == pytest.approx(1.0, abs=1e-6)
    assert lm.generate("the cat", max_tokens=4, seed=0).startswith("the cat")


@pytest.mark.parametrize("what", ["missing", "empty", "file"])
def test_what_is_not_a_model_is_a_one_line_error(tmp_path: Path, what: str) -> None:
    path = tmp_path / "x"
    if what == "empty":
        path.mkdir()
    elif what == "file":
        path.write_bytes(b"\x00\x01 not an ARPA file")
    with pytest.raises(nslm.NslmError) as error:
        nslm.load(path)
    assert "\n" not in str(error.value) and str(path) in str(error.value)
