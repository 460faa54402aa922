"""The increment experiment's synthetic corpus (paper Table 7): pairs of consecutive integers.

One pair per line, ``= n , n+1 =``, for n = 1 … N; about a tenth of the pairs are the test
split. Why each detail is as it is (measured; docs/experiments.md):

* Each pair is a WikiText article heading: a micro-model's context never crosses an article
  (docs/data.md, "Lines, tokens, articles"), so the second number's w_prev is the first and
  the first number has none.
* The comma between the numbers: a test pair's first number n has only ever been a *second*
  number in training (its own pair is the held-out one), always followed by ``=``. Read
  straight after it, the LSTM's P(<num> | h) for the next token drops (NSLM test perplexity
  1.2–2.6 at N = 100 without the comma); after the comma, always followed by a number, it is
  ≈ 1. An empty separator writes the bare ``n n+1``.
* A test pair's two numbers stay in the vocabulary (pairs n − 1 and n + 1 are training
  pairs), so the NNLM is not excused by ``<unk>``.
* ``train.txt`` holds several copies of the training pairs, each in a new order, so that an
  epoch is long enough at small N for the trainer's per-epoch validation and checkpoint to
  cost little. ``valid.txt`` is the first copy verbatim: the paper's NNLM is trained to
  memorise and the trainer keeps the weights best on validation. Unseen pairs there would
  keep the untrained weights; the pairs in another order would penalise the order of the
  training file, which the LSTM also learns, and stop memorisation early.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from nslm.errors import NslmError

MIN_N = 10  # below this the test split has one pair or none


def check_sizes(ns: list[int] | tuple[int, ...]) -> list[int]:
    """The corpus sizes to run, checked: at least one, each ≥ :data:`MIN_N`, no repeats."""
    if not ns:
        raise NslmError("give at least one corpus size, e.g. --sizes 100,1000,10000")
    for n in ns:
        if n < MIN_N:
            raise NslmError(f"N = {n}: the increment corpus needs N ≥ {MIN_N} pairs")
    if len(set(ns)) != len(ns):
        raise NslmError(f"a corpus size is given twice: {','.join(map(str, ns))}")
    return list(ns)


def split_pairs(n: int, test_fraction: float, rng: np.random.Generator) -> tuple[list, list]:
    """First numbers of the training and test pairs among ``k k+1`` for k = 1 … n.

    A test pair k is never next to another test pair nor at either end, so k (the second
    number of training pair k − 1) and k + 1 (the first of training pair k + 1) are both in
    the training vocabulary.
    """
    want = max(1, round(test_fraction * n))
    held: set[int] = set()
    for k in rng.permutation(np.arange(2, n)).tolist():  # 2 … n − 1: not at an end
        if len(held) == want:
            break
        if k - 1 not in held and k + 1 not in held:
            held.add(k)
    return [k for k in range(1, n + 1) if k not in held], sorted(held)


def pair_lines(firsts: list[int], separator: str, rng: np.random.Generator) -> str:
    """The pairs in a random order, one article heading each: `` = k , k+1 = ``."""
    sep = f" {separator.strip()}" if separator.strip() else ""
    return "".join(f" = {k}{sep} {k + 1} = \n" for k in rng.permutation(firsts).tolist())


def write_corpus(
    directory: Path,
    n: int,
    *,
    test_fraction: float,
    separator: str,
    epoch_pairs: int,
    seed: int,
) -> dict[str, int]:
    """Write train/valid/test.txt for size ``n`` into ``directory``; return the pair counts.

    The same ``seed`` and ``n`` always give the same files.
    """
    rng = np.random.default_rng([seed, n])
    train, test = split_pairs(n, test_fraction, rng)
    repeats = math.ceil(epoch_pairs / len(train))
    copies = [pair_lines(train, separator, rng) for _ in range(repeats)]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.txt").write_text("".join(copies), encoding="utf-8")
    (directory / "valid.txt").write_text(copies[0], encoding="utf-8")  # see the docstring
    (directory / "test.txt").write_text(pair_lines(test, separator, rng), encoding="utf-8")
    return {"n": n, "train_pairs": len(train), "test_pairs": len(test), "repeats": repeats}


def second_numbers(split) -> np.ndarray:
    """The scored positions: a class token with another before it in its article (one pair
    per article), i.e. each pair's second number, where the diff metric applies."""
    from nslm.micro.history import previous_index

    is_num = split.rule_class_ids > 0
    return np.flatnonzero(is_num & (previous_index(is_num, split.article_ids) >= 0))
