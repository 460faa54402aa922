"""Plain helpers shared by several test modules (fixtures live in conftest.py).

No test module imports from another test module: what two modules share is here.
"""

from __future__ import annotations

import lzma
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from hypothesis import strategies as st

from nslm.data import PreparedCorpus
from nslm.data.numbers import rejoin_numbers

if TYPE_CHECKING:
    from nslm.models.hnlm_layout import HNLMLayout

ROOT = Path(__file__).resolve().parents[1]
TINY_CONFIG = ROOT / "configs" / "tiny.toml"

# The micro-model classes of the session's tiny NSLM run (conftest.py ``tiny_nslm_run``): the
# union of what its users test. Every other class keeps the HNLM's neural within-class softmax.
TINY_MICRO_CLASSES = ["year", "convert", "city"]

# The longest a test waits for a child process before calling it hung. A guard, not a timing
# assertion: generous enough that a machine busy with other work (the suite's check under
# load runs two busy loops beside it) is slow, not failed.
HANG_SECONDS = 1800


# -- real-data lookups ----------------------------------------------------------------------


def find(corpus: PreparedCorpus, split: str, text: str) -> int:
    """Position of the first occurrence of ``text`` (WikiText tokens) in a prepared split."""
    ids = corpus.vocab.encode(rejoin_numbers(text).split())
    stream = corpus.splits[split].token_ids
    windows = np.lib.stride_tricks.sliding_window_view(stream, len(ids))
    hits = np.flatnonzero((windows == ids).all(axis=1))
    assert hits.size, f"{text!r} does not occur in {split}"
    return int(hits[0])


def classes_at(corpus: PreparedCorpus, split: str, text: str) -> list[tuple[str, str]]:
    start = find(corpus, split, text)
    s = corpus.splits[split]
    n = len(rejoin_numbers(text).split())
    return [
        (corpus.vocab.itos[s.token_ids[i]], corpus.class_names[s.rule_class_ids[i]])
        for i in range(start, start + n)
        if s.rule_class_ids[i]
    ]


# -- tiny real runs -------------------------------------------------------------------------


def train_tiny_nslm(
    run_dir: Path, micro_classes: list[str], overrides: tuple[str, ...] = ()
) -> Path:
    """A tiny real run (configs/tiny.toml, 40 steps on a WikiText-2 slice) with fast-grid
    micro-models for ``micro_classes``. Tests take the session's runs from conftest.py
    (``tiny_nslm_run``, ``tiny_nslm_copy``, …) rather than training their own."""
    from nslm.config import load_config
    from nslm.runs.load import load_run
    from nslm.runs.micro import fit_run_micro, write_run_micro
    from nslm.scores.passes import use_threads
    from nslm.training.loop import train

    use_threads(1)
    sets = ["test_tokens=2000", "max_steps=40", *overrides]
    train(load_config(TINY_CONFIG, sets), run_dir)
    loaded = load_run(run_dir)
    write_run_micro(loaded, fit_run_micro(loaded, only=micro_classes, fast=True))
    return run_dir


def copy_run(run: Path, dest: Path) -> Path:
    """A private copy of a trained run, for tests that write into it (tables, caches, CRNNs)."""
    shutil.copytree(run, dest)
    return dest


# -- a tiny byte LM (no corpus needed) ------------------------------------------------------

BYTE_WORDS = [
    "the",
    "movie",
    "was",
    "great",
    "bad",
    "fine",
    "awful",
    "good",
    "plot",
    "actor",
    "scene",
    "café",
    "naïve",
]


def make_byte_corpus(directory: Path, seed: int = 0) -> Path:
    """A ``bytes:DIR`` corpus of short random "reviews", one a line; test.txt also holds
    bytes that are not UTF-8 (a byte LM reads them as they are)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)

    def lines(n: int) -> bytes:
        rows = (" ".join(rng.choice(BYTE_WORDS, size=rng.integers(3, 20))) for _ in range(n))
        return ("\n".join(rows) + "\n").encode("utf-8")

    (directory / "train.txt").write_bytes(lines(400))
    (directory / "valid.txt").write_bytes(lines(30))
    (directory / "test.txt").write_bytes(lines(30) + b"\xff\xfe not UTF-8\n")
    return directory


def tiny_byte_config(corpus_dir: Path, **overrides):
    """A tiny one-layer byte LSTM (32 units) on a ``bytes:DIR`` corpus, 40 steps."""
    from nslm.config import build_config

    values = dict(
        corpus=f"bytes:{corpus_dir}",
        classes="none",
        heads=["nnlm"],
        softmax="full",
        num_layers=1,
        emb_size=16,
        hidden_size=32,
        dropout=0.0,
        batch_size=8,
        bptt=32,
        epochs=1,
        max_steps=40,
        lr=3e-3,
        lr_schedule="linear",
        threads=1,
        progress=False,
        checkpoint_every=20,
        eval_batch_size=4,
    )
    values.update(overrides)
    return build_config(values)


def train_tiny_byte_lm(root: Path, **overrides) -> Path:
    """Train the tiny byte LM into ``root/run`` (its corpus in ``root/corpus``)."""
    from nslm.training.loop import train

    train(tiny_byte_config(make_byte_corpus(root / "corpus"), **overrides), root / "run")
    return root / "run"


# -- the command line as a subprocess -------------------------------------------------------

GOOD_LINES = " \n = Title = \n \n The year 1990 followed 1989 in Paris . \n"


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nslm", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=HANG_SECONDS,
    )


def make_corpus(directory: Path, train: bytes | str = GOOD_LINES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("valid", "test"):
        (directory / f"{split}.txt").write_text(GOOD_LINES, encoding="utf-8")
    payload = train.encode("utf-8") if isinstance(train, str) else train
    (directory / "train.txt").write_bytes(payload)
    return directory


# A tiny corpus of years in three articles (test_micro_cli.py, test_cli_consistency.py)
YEARS_TRAIN = (
    " = Alpha = \n In 1990 and 1991 and 1992 , then 1993 and 1994 . \n"
    " = Beta = \n From 1800 and 1801 ; 1802 , 1803 and 1805 . \n"
    " = Gamma = \n In 1700 and 1701 and 1703 , 1702 . \n"
)
YEARS_EVAL = " = Delta = \n In 1990 and 1991 and 1993 , 1992 . \n"


def make_years_corpus(directory: Path, train: str = YEARS_TRAIN, other: str = YEARS_EVAL) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.txt").write_text(train, encoding="utf-8")
    for split in ("valid", "test"):
        (directory / f"{split}.txt").write_text(other, encoding="utf-8")
    return directory


# A tiny POS-tagged corpus (``tagged:DIR``): DET NOUN VERB DET NOUN . sentences
# (test_word_pos_cli.py, the robustness battery)
LEXICON = {
    "DET": ["the", "a"],
    "NOUN": ["dog", "cat", "house", "idea", "Tree"],
    "VERB": ["runs", "sees", "likes", "walking"],
    ".": ["."],
}


def make_tagged_corpus(directory: Path, sizes: tuple[int, int, int] = (120, 20, 20)) -> Path:
    """train/valid/test.txt of ``word/TAG`` sentences, one a line (seeded)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    tags = ["DET", "NOUN", "VERB", "DET", "NOUN", "."]
    for name, n in zip(("train", "valid", "test"), sizes, strict=True):
        lines = [" ".join(f"{rng.choice(LEXICON[t])}/{t}" for t in tags) for _ in range(n)]
        (directory / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


# -- random heads (test_heads.py, test_shared_top.py, test_models.py, test_grounding.py) -----

# A random head: vocabulary size, classes, feature width, softmax kind, seed.
HEAD_CASES = {
    "vocab": st.integers(12, 300),
    "n_classes": st.integers(1, 5),
    "dim": st.integers(2, 24),
    "kind": st.sampled_from(["full", "adaptive"]),
    "seed": st.integers(0, 10_000),
}


def synthetic_layout(vocab: int, n_classes: int, seed: int) -> HNLMLayout:
    """Random class vocabularies, some overlapping (a number type can be in two classes)."""
    from nslm.models.hnlm_layout import HNLMLayout

    rng = np.random.default_rng(seed)
    members = [np.zeros(0, np.int64)]
    for _ in range(n_classes):
        size = int(rng.integers(1, max(2, vocab // 4)))
        members.append(np.sort(rng.choice(vocab, size=size, replace=False)).astype(np.int64))
    is_class = np.zeros(vocab, bool)
    for m in members:
        is_class[m] = True
    words = np.flatnonzero(~is_class)
    order = rng.permutation(len(words) + n_classes)
    top_of_word = np.full(vocab, -1, np.int64)
    top_of_word[words] = order[: len(words)]
    top_of_tag = np.concatenate([[-1], order[len(words) :]]).astype(np.int64)
    return HNLMLayout(vocab, top_of_word, top_of_tag, members)


def shared_layout(vocab: int, n_classes: int, seed: int) -> HNLMLayout:
    """``synthetic_layout``'s classes with the shared index maps (word id = top id)."""
    from nslm.models.hnlm_layout import HNLMLayout

    base = synthetic_layout(vocab, n_classes, seed)
    top_of_word = np.where(base.top_of_word >= 0, np.arange(vocab), -1)
    top_of_tag = np.concatenate([[-1], vocab + np.arange(n_classes)]).astype(np.int64)
    return HNLMLayout(vocab, top_of_word, top_of_tag, base.members)


def total_mass(log_dist: torch.Tensor) -> np.ndarray:
    return torch.logsumexp(log_dist.detach().double(), dim=-1).exp().numpy()


# -- labelled text for the probes ------------------------------------------------------------

SENTIMENT_WORDS = {0: ["bad", "awful", "dull"], 1: ["great", "fine", "good"]}
TAGGED = [
    ("the", "DT"),
    ("movie", "NN"),
    ("was", "VBD"),
    ("great", "JJ"),
    ("actors", "NNS"),
    ("play", "VBP"),
    ("well", "RB"),
    ("café", "NN"),
]


def _sst_lines(n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    return "".join(f"{y} the movie was {rng.choice(SENTIMENT_WORDS[y])} .\n" for y in labels)


def _conllu(n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        words = [TAGGED[i] for i in rng.integers(0, len(TAGGED), rng.integers(3, 9))]
        rows = [f"{i}\t{w}\t{w}\tX\t{t}\t_\t0\tdep\t_\t_" for i, (w, t) in enumerate(words, 1)]
        out.append("\n".join(rows) + "\n\n")
    return "".join(out)


def write_labelled_data(root: Path) -> Path:
    """Small synthetic sst2/ and ud-english-ewt/ folders under ``root`` (a data directory)."""
    (root / "sst2").mkdir(parents=True)
    for i, (split, n) in enumerate([("train", 120), ("dev", 40), ("test", 40)]):
        (root / "sst2" / f"{split}.txt").write_text(_sst_lines(n, i), encoding="utf-8")
    (root / "ud-english-ewt").mkdir()
    for i, (split, n) in enumerate([("train", 60), ("dev", 5), ("test", 20)]):
        with lzma.open(root / "ud-english-ewt" / f"{split}.conllu.xz", "wt") as handle:
            handle.write(_conllu(n, i))
    return root


# -- an interrupted and resumed training --------------------------------------------------------


def train_cut_and_resumed(cfg, run_dir: Path, at_step: int, monkeypatch) -> dict:
    """Train ``cfg`` into ``run_dir``, stopped by a KeyboardInterrupt before step ``at_step``
    (as a kill would stop it), then ``--resume``; the resumed run's results."""
    import pytest

    from nslm.training.loop import Trainer, train

    real_step = Trainer._step

    def interrupted(self, batch):
        if self.state["step"] == at_step:
            raise KeyboardInterrupt
        return real_step(self, batch)

    monkeypatch.setattr(Trainer, "_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, run_dir)
    monkeypatch.setattr(Trainer, "_step", real_step)
    return train(cfg, run_dir, resume=True)


# -- the explorer server ------------------------------------------------------------------------


@contextmanager
def served(
    *runs: Path,
    seconds: float = 90,
    options: tuple[str, ...] = (),
    program: tuple[str, ...] = (sys.executable, "-m", "nslm"),
) -> Iterator[str]:
    """``nslm serve RUNS [OPTIONS]`` on a free loopback port for the block; yields its URL
    once ``/api/runs`` answers (the server exiting first, or not answering in ``seconds``,
    fails). ``program`` is the nslm to run (test_wheel: an installed wheel's script)."""
    import socket
    import time
    import urllib.request

    import pytest

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [*program, "serve", *map(str, runs), "--port", str(port), *options]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                urllib.request.urlopen(url + "/api/runs", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"the server exited: {proc.stderr.read()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not start in {seconds:g} s")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browser_mark():
    """The mark of a module that drives a real browser: skipped where chromium or Playwright is
    missing, except under CI (``CI`` set), where a missing browser is a failure (.ci/run
    installs both)."""
    import importlib.util

    import pytest

    missing = CHROMIUM is None or importlib.util.find_spec("playwright") is None
    if os.environ.get("CI"):
        return []
    return pytest.mark.skipif(missing, reason="needs chromium and playwright")


@contextmanager
def browser_page() -> Iterator:
    """A Playwright page in Debian's chromium (1200 × 900), closed after the block."""
    from playwright.sync_api import sync_playwright

    assert CHROMIUM is not None, "CI must install chromium"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1200, "height": 900})
        finally:
            browser.close()
