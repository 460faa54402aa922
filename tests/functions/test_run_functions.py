"""A run's functions (RUN/functions.json): fitted on its corpus, kept, and mixed into
``nslm predict`` and ``nslm.load(RUN).predict``, whose distribution still sums to one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import nslm
from helpers import copy_run
from nslm.cli import main
from nslm.functions.run import (
    FUNCTIONS_FILE,
    fit_run_functions,
    load_run_functions,
    write_run_functions,
)
from nslm.runs.load import load_run

PROMPT = "The river is 120 miles ("


@pytest.fixture(scope="module")
def run_with_functions(tiny_nslm_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's tiny run with its functions fitted (on its whole corpus)."""
    run = copy_run(tiny_nslm_run, tmp_path_factory.mktemp("functions") / "tiny")
    write_run_functions(run, fit_run_functions(load_run(run)))
    return run


def test_predict_mixes_the_functions_into_the_number_classes(
    run_with_functions: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(run_with_functions), PROMPT, "--json", "--closed-vocab"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["functions"] is True
    assert got["sums"]["nslm"] == pytest.approx(1.0, abs=1e-6)  # the whole distribution
    convert = next(c for c in got["classes"] if c["class"] == "<convert>")
    assert convert["model"].endswith("+ functions")
    functions = load_run_functions(run_with_functions)
    tokens = got["tokens"]
    weight, probs = functions.mixture(functions.firings(tokens, len(tokens)))
    corpus = load_run(run_with_functions).corpus
    members = {corpus.vocab.itos[i] for i in corpus.class_vocab("convert").tolist()}
    best = max((w for w in probs if w in members), key=probs.get)
    assert convert["top"][0]["token"] == best and convert["top"][0]["p_in_class"] > weight / 2
    api = nslm.load(run_with_functions).predict(PROMPT, k=5)
    assert [p.token for p in api] == [e["token"] for e in got["nslm"][:5]]


def test_a_run_without_functions_predicts_as_before(tiny_nslm_run: Path) -> None:
    assert not (tiny_nslm_run / FUNCTIONS_FILE).exists()
    assert load_run_functions(tiny_nslm_run) is None


def test_a_broken_functions_file_is_a_one_line_error(run_with_functions: Path) -> None:
    path = run_with_functions / FUNCTIONS_FILE
    saved = path.read_text(encoding="utf-8")
    try:
        path.write_text('{"version": 1, "functions": {"convert": {}}}', encoding="utf-8")
        assert main(["predict", str(run_with_functions), PROMPT, "--closed-vocab"]) == 2
    finally:
        path.write_text(saved, encoding="utf-8")
