"""The sentiment probe: L1 logistic regression on a byte LM's states of SST-2 or IMDB texts.

Features per text (:func:`nslm.byte_lm.probes.states.final_states`): ``final_cell``, the cell state
after the last byte (Carvalho's choice, after Radford et al. 2017), and two poolings over the
text, ``mean_cell`` and ``mean_hidden``, and both means side by side (``mean_cell_hidden``,
whose neuron indices ≥ H are hidden units). Per feature kind, C is chosen on dev and the probe
fitted on train; the best kind *on dev* gives the headline test accuracy. The neuron with the
largest |weight| of that probe, thresholded alone (threshold fitted on train), is the
"sentiment neuron". Beside them, on the same splits: TF-IDF (word uni+bigrams) + logistic
regression, and the majority class of train.

Each text is read the way the LM met a review in training (:func:`framed`): after the
separator that ends the previous review, and followed by a space (Radford et al. 2017 frame
their inputs the same way); SST-2's PTB tokens are put back into plain text first
(:func:`nslm.byte_lm.labelled.detokenise_ptb`). From the zero state with no separator, the LSTM
reads the first bytes as the middle of some review, and the probes lose points (docs/probes.md).

IMDB has no dev split: dev is taken from the (seeded-shuffled) train file after the train
subset, and reviews may be cut to their last ``last_bytes`` bytes (extraction time grows with
the bytes read; the end of a review is where its verdict usually sits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from nslm.byte_lm.data import ARTICLE_END
from nslm.byte_lm.labelled import LabelledTexts, detokenise_ptb, read_imdb, read_sst2
from nslm.byte_lm.probes.estimators import C_GRID, L1Probe, NeuronThreshold, fit_on_dev
from nslm.errors import NslmError

POOLINGS = ("final_cell", "mean_cell", "mean_hidden", "mean_cell_hidden")
SPLITS = ("train", "dev", "test")
BOW_GRID = (0.3, 1.0, 3.0, 10.0, 30.0)

# (loaded, texts, last_bytes=…, batch_size=…) → {"final_cell": (N, H), …}
Extractor = Callable[..., dict[str, np.ndarray]]


def sst2_splits(
    data_dir: Path | str | None = None, *, n_train: int | None = None, detokenise: bool = True
) -> dict[str, LabelledTexts]:
    """SST-2 train (its first ``n_train`` sentences, all when None), dev and test, as plain
    text unless ``detokenise`` is False."""
    splits = {
        "train": read_sst2("train", data_dir).head(n_train),
        "dev": read_sst2("dev", data_dir),
        "test": read_sst2("test", data_dir),
    }
    if detokenise:
        for name, data in splits.items():
            splits[name] = LabelledTexts([detokenise_ptb(t) for t in data.texts], data.labels)
    return splits


def imdb_splits(
    data_dir: Path | str | None = None,
    *,
    n_train: int = 2000,
    n_dev: int = 500,
    n_test: int | None = None,
) -> dict[str, LabelledTexts]:
    """IMDB train and dev from the shuffled train file (disjoint), test from the shuffled test
    file (its first ``n_test``, all 25,000 when None)."""
    train = read_imdb("train", data_dir)
    if n_train + n_dev > len(train):
        raise NslmError(f"IMDB train has {len(train)} reviews, not {n_train} + {n_dev}")
    return {
        "train": LabelledTexts(train.texts[:n_train], train.labels[:n_train]),
        "dev": LabelledTexts(
            train.texts[n_train : n_train + n_dev], train.labels[n_train : n_train + n_dev]
        ),
        "test": read_imdb("test", data_dir).head(n_test),
    }


def framed(texts: list[str], last_bytes: int | None = None, frame: bool = True) -> list[bytes]:
    """The bytes the probe reads of each text: its last ``last_bytes`` (all when None), after
    the review separator and before a space when ``frame``, as a review sits in the stream."""
    data = [t.encode("utf-8") for t in texts]
    if last_bytes is not None:
        if last_bytes < 1:
            raise NslmError("last_bytes must be positive")
        data = [d[-last_bytes:] for d in data]
    return [ARTICLE_END + d + b" " for d in data] if frame else data


def extract_features(
    loaded,
    splits: dict[str, LabelledTexts],
    *,
    last_bytes: int | None = None,
    frame: bool = True,
    batch_size: int = 64,
    extractor: Extractor | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> dict[str, dict[str, np.ndarray]]:
    """Per split, the pooled states of every text: ``{split: {pooling: (N, H)}}``."""
    if extractor is None:
        from nslm.byte_lm.probes.states import final_states as extractor
    features = {}
    for name, data in splits.items():
        texts = framed(data.texts, last_bytes, frame)
        log(f"states of {len(data):,} {name} texts ({sum(map(len, texts)):,} bytes)")
        features[name] = extractor(loaded, texts, batch_size=batch_size)
    return features


@dataclass
class SentimentResult:
    """What :func:`probe_sentiment` found; ``summary`` is its JSON."""

    summary: dict
    probes: dict[str, L1Probe] = field(default_factory=dict)  # per pooling
    neuron: NeuronThreshold | None = None
    best_pooling: str = ""


def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(pred == y))


def bow_classifier(splits: dict[str, LabelledTexts], grid=BOW_GRID):
    """TF-IDF word uni+bigrams + logistic regression (L2), C chosen on dev: the fitted
    ``(vectorizer, model)``, the C and its dev accuracy. The steering benchmark classifies
    generated reviews with it."""
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    X_train = vectorizer.fit_transform(splits["train"].texts)
    X_dev = vectorizer.transform(splits["dev"].texts)
    best = None
    for C in grid:
        model = LogisticRegression(C=C, max_iter=1000).fit(X_train, splits["train"].labels)
        dev = _accuracy(model.predict(X_dev), splits["dev"].labels)
        if best is None or dev > best[1]:
            best = (C, dev, model)
    C, dev, model = best
    return (vectorizer, model), C, dev, X_train.shape[1]


def bag_of_words(splits: dict[str, LabelledTexts], grid=BOW_GRID) -> dict:
    """:func:`bow_classifier`'s C, dev and test accuracy."""
    (vectorizer, model), C, dev, n_features = bow_classifier(splits, grid)
    test = _accuracy(
        model.predict(vectorizer.transform(splits["test"].texts)), splits["test"].labels
    )
    return {"C": C, "dev_acc": dev, "test_acc": test, "n_features": n_features}


def majority(splits: dict[str, LabelledTexts]) -> dict:
    """The most frequent train label, predicted for every test text."""
    label = int(np.bincount(splits["train"].labels).argmax())
    return {"label": label, "test_acc": _accuracy(label, splits["test"].labels)}


def probe_sentiment(
    features: dict[str, dict[str, np.ndarray]],
    splits: dict[str, LabelledTexts],
    *,
    grid=C_GRID,
    poolings=POOLINGS,
    bow: bool = True,
    log: Callable[[str], None] = lambda _: None,
) -> SentimentResult:
    """Fit and score the probes of every pooling, the best neuron, and the baselines."""
    for name in SPLITS:
        if name not in splits or len(splits[name]) == 0:
            raise NslmError(f"empty split: the sentiment probe needs texts in {name}")
    y = {name: splits[name].labels for name in SPLITS}
    result = SentimentResult(summary={"sizes": {n: len(splits[n]) for n in SPLITS}})
    per_pooling = {}
    for pooling in poolings:
        X = {name: features[name][pooling] for name in SPLITS}
        probe, dev_scores = fit_on_dev(X["train"], y["train"], X["dev"], y["dev"], grid)
        neuron = int(probe.top_neurons(1)[0])
        single = NeuronThreshold(neuron).fit(X["train"], y["train"])
        per_pooling[pooling] = {
            "C": probe.C,
            "dev_acc_by_C": {str(c): s for c, s in dev_scores.items()},
            "dev_acc": dev_scores[probe.C],
            "test_acc": float(probe.score(X["test"], y["test"])),
            "n_nonzero": probe.n_nonzero(),
            "n_neurons": int(X["train"].shape[1]),
            "neuron": neuron,
            "neuron_weight": float(probe.weights()[neuron]),
            "neuron_train_acc": float(single.train_accuracy_),
            "neuron_test_acc": _accuracy(single.predict(X["test"]), y["test"]),
        }
        result.probes[pooling] = probe
        log(
            f"{pooling}: C={probe.C} dev {per_pooling[pooling]['dev_acc']:.3f} "
            f"test {per_pooling[pooling]['test_acc']:.3f}, {probe.n_nonzero()} non-zero weights; "
            f"neuron {neuron} alone {per_pooling[pooling]['neuron_test_acc']:.3f}"
        )
    best = max(poolings, key=lambda p: per_pooling[p]["dev_acc"])  # chosen on dev, not test
    result.best_pooling = best
    result.neuron = NeuronThreshold(per_pooling[best]["neuron"]).fit(
        features["train"][best], y["train"]
    )
    result.summary.update(
        poolings=per_pooling,
        best_pooling=best,
        all_acc=per_pooling[best]["test_acc"],
        one_neuron_acc=per_pooling[best]["neuron_test_acc"],
        one_neuron_index=per_pooling[best]["neuron"],
        majority=majority(splits),
    )
    if bow:
        result.summary["bow"] = bag_of_words(splits)
        log(f"bag of words: test {result.summary['bow']['test_acc']:.3f}")
    return result
