"""A trained run is self-contained: RUN/assets.json + assets.npz (nslm.runs.assets).

The session's tiny real run (conftest.py: configs/tiny.toml, 40 steps, fast micro-models for
``TINY_MICRO_CLASSES``) is copied elsewhere and used with no corpus anywhere to be found:
``predict`` and ``generate`` work, ``eval`` of a split says in one line that it needs the corpus.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from helpers import TINY_MICRO_CLASSES, copy_run
from nslm.cli import main
from nslm.data import PreparedCorpus
from nslm.errors import NslmError
from nslm.micro.store import load_micro_models
from nslm.runs.assets import ASSETS_JSON, ASSETS_NPZ, RunCorpus, read_run_assets
from nslm.runs.load import load_run

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def run(tiny_nslm_run: Path) -> Path:
    """The session's tiny run, read only: the tests that change a run work on a copy."""
    return tiny_nslm_run


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """No corpus and no prepared cache anywhere, and any download attempt recorded."""
    monkeypatch.delenv("NSLM_DATA_DIR", raising=False)
    monkeypatch.delenv("NSLM_CACHE_DIR", raising=False)
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(empty))
    attempts: list[str] = []

    def no_network(url, *args, **kwargs):
        attempts.append(str(getattr(url, "full_url", url)))
        raise OSError("network disabled in this test")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    return attempts


def test_assets_hold_what_the_model_side_reads(run: Path, wt2_all: PreparedCorpus) -> None:
    assert (run / ASSETS_JSON).is_file() and (run / ASSETS_NPZ).is_file()
    assets = read_run_assets(run)
    assert isinstance(assets, RunCorpus) and isinstance(assets, PreparedCorpus)
    assert assets.vocab.itos == wt2_all.vocab.itos
    np.testing.assert_array_equal(assets.vocab.counts, wt2_all.vocab.counts)
    assert assets.class_names == wt2_all.class_names
    for c in range(1, len(assets.class_names)):
        np.testing.assert_array_equal(assets.class_vocab(c), wt2_all.class_vocab(c))
    np.testing.assert_array_equal(assets.type_values(), wt2_all.type_values())
    np.testing.assert_array_equal(assets.type_coords(), wt2_all.type_coords())
    np.testing.assert_array_equal(assets.type_class_counts(), wt2_all.type_class_counts())
    assert assets.meta["unit_map"] == wt2_all.meta["unit_map"]
    assert len(assets.meta["cache_key"]) == 24  # the prepared-cache entry trained on
    assert "files" not in assets.meta  # no paths of the training machine
    # each class's training counts come from the assets, as they came from the train split
    train = wt2_all.train
    year = wt2_all.class_id("year")
    in_year = train.token_ids[train.class_ids == year]
    counts = assets.type_class_counts()[:, year]
    np.testing.assert_array_equal(counts, np.bincount(in_year, minlength=len(assets.vocab)))


def test_micro_models_load_the_same_from_the_assets(run: Path, wt2_all: PreparedCorpus) -> None:
    from_assets = load_micro_models(run / "micro.json", read_run_assets(run))
    from_corpus = load_micro_models(run / "micro.json", wt2_all)
    assert list(from_assets) == list(from_corpus) == TINY_MICRO_CLASSES
    test = wt2_all.test
    for name, mm in from_assets.items():
        other = from_corpus[name]
        a, b = mm.cls.candidates, other.cls.candidates
        np.testing.assert_array_equal(a.vocab_ids, b.vocab_ids)
        np.testing.assert_array_equal(a.counts, b.counts)
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.coords, b.coords)
        positions, _ = mm.cls.positions(test)
        ctx = mm.cls.context(test, positions[:50], mm.context)
        np.testing.assert_array_equal(mm.log_prob(ctx), other.log_prob(ctx))


def test_a_copied_run_predicts_and_generates_without_the_corpus(
    run: Path, tmp_path: Path, offline: list[str], capsys: pytest.CaptureFixture
) -> None:
    copy = copy_run(run, tmp_path / "elsewhere" / "tiny")
    assert main(["predict", str(copy), "The war ended in 1918 and began in"]) == 0
    out = capsys.readouterr().out
    assert "NNLM" in out and "<year>" in out
    args = ["generate", str(copy), "In 1990 the band", "--max-tokens", "12"]
    assert main([*args, "--seed", "3", "--show-classes"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("In 1990 the band") and len(text.split()) > 4
    loaded = load_run(copy)
    assert isinstance(loaded.corpus, RunCorpus)
    assert "test" in loaded.corpus.splits  # naming a split loads nothing
    assert offline == []  # nothing was downloaded, nothing tried


def test_scoring_a_split_of_a_copied_run_needs_the_corpus(
    run: Path, tmp_path: Path, offline: list[str], capsys: pytest.CaptureFixture
) -> None:
    copy = copy_run(run, tmp_path / "tiny")
    assert main(["eval", str(copy), "--split", "test"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # "using the NSLM", then the error
    assert [line for line in lines if line.startswith("error:")] == lines[-1:]
    assert lines[-1].startswith("error: scoring a split needs the corpus wikitext-2: ")
    assert "NSLM_DATA_DIR" in lines[-1]
    assert offline == []
    with pytest.raises(NslmError, match="needs the corpus"):
        load_run(copy).corpus.train  # noqa: B018 (the property does the loading)


def test_a_run_loads_its_splits_from_the_corpus_when_there_is_one(
    run: Path, wt2_all: PreparedCorpus
) -> None:
    corpus = load_run(run).corpus
    np.testing.assert_array_equal(corpus.splits["test"].token_ids, wt2_all.test.token_ids)
    np.testing.assert_array_equal(corpus.valid.rule_class_ids, wt2_all.valid.rule_class_ids)


def test_a_run_without_assets_reads_its_corpus_and_is_not_written(
    run: Path, tmp_path: Path
) -> None:
    old = copy_run(run, tmp_path / "old")
    (old / ASSETS_JSON).unlink()
    (old / ASSETS_NPZ).unlink()
    before = sorted((p.name, p.stat().st_mtime_ns) for p in old.iterdir())
    loaded = load_run(old)  # prepares the corpus, as before assets existed
    assert sorted((p.name, p.stat().st_mtime_ns) for p in old.iterdir()) == before
    mine = read_run_assets(run)
    assert loaded.corpus.vocab.itos == mine.vocab.itos
    np.testing.assert_array_equal(loaded.corpus.type_class_counts(), mine.type_class_counts())


def test_damaged_or_mixed_assets_are_one_line_errors(run: Path, tmp_path: Path) -> None:
    bad = copy_run(run, tmp_path / "bad")
    with np.load(bad / ASSETS_NPZ, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["pair_counts"] = arrays["pair_counts"] + 1
    np.savez(bad / ASSETS_NPZ, **arrays)
    with pytest.raises(NslmError, match="does not match"):
        load_run(bad)
    (bad / ASSETS_NPZ).write_bytes(b"not a zip")
    with pytest.raises(NslmError, match="unreadable"):
        load_run(bad)
    payload = json.loads((bad / ASSETS_JSON).read_text())
    payload["vocab_fingerprint"] = "0" * 16
    (bad / ASSETS_JSON).write_text(json.dumps(payload))
    with pytest.raises(NslmError, match="other vocabulary"):
        load_run(bad)
    (bad / ASSETS_JSON).write_text("{")
    with pytest.raises(NslmError, match=r"unreadable assets\.json"):
        load_run(bad)
