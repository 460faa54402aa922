"""What a probe's accuracy is worth: control tasks and random-unit baselines.

- **Control task** (Hewitt & Liang 2019, "Designing and Interpreting Probes with Control
  Tasks"): every word type gets a tag drawn at random from the empirical tag distribution,
  once (a fixed seed), so the control tags are a function of the word alone; the bytes of a
  word inherit its tag, as they inherit its real one. The same probe fitted on the control
  tags shows what it can memorise; **selectivity** = accuracy − control accuracy. For the
  sentiment probes the control is the labels shuffled (a seeded permutation).
- **Random units** (Donnelly & Roegiest 2019, "On Interpretability and Feature
  Representations: An Analysis of the Sentiment Neuron"): the same probe on k units drawn at
  random, over many draws, against the probe on its top k units; the gap is what choosing
  the units bought.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from nslm.byte_lm.labelled import SPACE, TaggedSentence, Token, byte_tags
from nslm.byte_lm.probes.estimators import C_GRID, L1Probe
from nslm.byte_lm.probes.pos import ByteData, group_tag

CONTROL_SEED = 0
DRAWS = 20  # random draws per k: the issue asks for ≥ 20


def byte_types(sentence: TaggedSentence) -> list[str]:
    """The word type of every byte of ``sentence`` (the bytes :func:`byte_tags` gives):
    each word's form, ``SPACE`` for a separator. A multiword token is cut where its tags
    are: byte_tags itself, with each word's form standing in for its tag."""
    as_forms = [Token(t.text, [(f, f) for f, _ in t.words], t.space_after) for t in sentence.tokens]
    return byte_tags(TaggedSentence(as_forms))[1]


class ControlTask:
    """Hewitt & Liang's control task for POS: ``fit`` reads the tag distribution of the
    words (each word once, separators included, as the probe's train bytes hold them); then
    the control tag of a type is a draw from it seeded by (seed, the type), the same for
    every occurrence, in train or test, seen before or not."""

    def __init__(self, seed: int = CONTROL_SEED) -> None:
        self.seed = seed

    def fit(self, sentences: Sequence[TaggedSentence], grouped: bool) -> ControlTask:
        counts: Counter[str] = Counter()
        for sentence in sentences:
            for i, token in enumerate(sentence.tokens):
                counts.update(group_tag(t) if grouped else t for _, t in token.words)
                counts[SPACE] += token.space_after and i < len(sentence.tokens) - 1
        self.tags_ = np.array(sorted(counts))
        p = np.array([counts[t] for t in self.tags_], dtype=np.float64)
        self.p_ = p / p.sum()
        return self

    def tag(self, word_type: str) -> str:
        # crc32, not hash(): Python salts str hashes per process; a control must not move
        rng = np.random.default_rng([self.seed, zlib.crc32(word_type.encode("utf-8"))])
        return str(self.tags_[rng.choice(len(self.tags_), p=self.p_)])

    def byte_tags(self, sentences: Sequence[TaggedSentence]) -> np.ndarray:
        """The control tag of every byte of ``sentences``, in :func:`byte_dataset` order."""
        memo: dict[str, str] = {}  # one draw per type, not per byte
        out = []
        for sentence in sentences:
            for word_type in byte_types(sentence):
                if word_type not in memo:
                    memo[word_type] = self.tag(word_type)
                out.append(memo[word_type])
        return np.asarray(out)


def control_data(data: ByteData, tags: np.ndarray) -> ByteData:
    """The same bytes and states with the control tags."""
    if len(tags) != len(data):
        raise ValueError(f"{len(tags)} control tags for {len(data)} bytes")
    return ByteData(data.X, tags, data.sentence, data.texts)


def shuffled_labels(labels: np.ndarray, seed: int = CONTROL_SEED) -> np.ndarray:
    """The sentiment control: the same labels in a seeded random order."""
    return np.random.default_rng(seed).permutation(np.asarray(labels))


def random_units(n_units: int, k: int, n_rows: int, rng: np.random.Generator) -> list[list[int]]:
    """k distinct units drawn at random for each of ``n_rows`` classifiers."""
    return [np.sort(rng.choice(n_units, size=k, replace=False)).tolist() for _ in range(n_rows)]


def fit_units_on_dev(
    X: dict[str, np.ndarray],
    y: dict[str, np.ndarray],
    neurons: list[list[int]],
    grid: Sequence[float] = C_GRID,
) -> tuple[L1Probe, float]:
    """An :class:`L1Probe` restricted to ``neurons``, C chosen on dev as the all-unit probe's
    is (:func:`nslm.byte_lm.probes.estimators.fit_on_dev`); returns it and its test accuracy."""
    best, best_dev = None, -1.0
    for C in sorted(grid):
        probe = L1Probe(C=C, neurons=neurons).fit(X["train"], y["train"])
        dev = float(probe.score(X["dev"], y["dev"]))
        if dev > best_dev:
            best, best_dev = probe, dev
    return best, float(best.score(X["test"], y["test"]))


def spread(values: Sequence[float]) -> dict:
    """Mean, standard deviation (n − 1), min and max of the draws."""
    v = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(v.mean()),
        "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "min": float(v.min()),
        "max": float(v.max()),
        "draws": len(v),
    }


def random_baseline(
    score: Callable[[list[list[int]]], float],
    n_units: int,
    k: int,
    n_rows: int,
    draws: int = DRAWS,
    seed: int = 0,
) -> dict:
    """``score`` (a probe fitted and tested on the given units per classifier) over
    ``draws`` random choices of k units: mean ± sd."""
    rng = np.random.default_rng([seed, k])
    return spread([score(random_units(n_units, k, n_rows, rng)) for _ in range(draws)])
