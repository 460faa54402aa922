"""Helpers shared by the real-data tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nslm.data import PreparedCorpus
from nslm.data.numbers import rejoin_numbers

TINY_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "tiny.toml"


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


def train_tiny_nslm(
    run_dir: Path, micro_classes: list[str], overrides: tuple[str, ...] = ()
) -> Path:
    """A tiny real run (configs/tiny.toml, 40 steps on a WikiText-2 slice) with fast-grid
    micro-models for ``micro_classes``: the shared starting point of the NSLM tests."""
    from nslm.config import load_config
    from nslm.runs.load import load_run
    from nslm.runs.micro import fit_run_micro, write_run_micro
    from nslm.scores.passes import use_threads
    from nslm.training.loop import train

    use_threads(1)
    sets = ["eval_tokens=2000", "max_steps=40", *overrides]
    train(load_config(TINY_CONFIG, sets), run_dir)
    loaded = load_run(run_dir)
    write_run_micro(loaded, fit_run_micro(loaded, only=micro_classes, fast=True))
    return run_dir
