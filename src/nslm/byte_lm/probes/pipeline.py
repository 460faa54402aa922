"""A probe end to end on a loaded byte-LM run: data → states → probes → JSON, probe files and
figures in one folder. ``nslm probe`` and ``benchmarks/neurons/neurons.py`` both call these.

Files, under ``out`` (``RUN/probes/<name>/`` by default):

- ``summary.json``: every figure the probe reports, the sizes, the settings;
- ``probe_*.json``: the fitted probes (:func:`nslm.byte_lm.probes.estimators.load_probe`);
- ``*.png`` / ``*.html``: the figures of :mod:`nslm.byte_lm.probes.plots`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nslm.byte_lm.labelled import SPACE, read_ewt
from nslm.byte_lm.probes import plots
from nslm.byte_lm.probes.estimators import save_probe
from nslm.byte_lm.probes.pos import POS_C, TOP_KS, ByteData, byte_dataset, probe_pos, take_bytes
from nslm.byte_lm.probes.sentiment import (
    extract_features,
    imdb_splits,
    probe_sentiment,
    sst2_splits,
)
from nslm.files.atomic import write_json_atomic

Log = Callable[[str], None]
PLOT_TAGS = ("VB", "NN", "RB", "SPACE")  # Carvalho's examples (VB, RB, SPACE) and the nouns
DEFAULT_IMDB_LAST_BYTES = 128  # the full test set at 1024 units in minutes (docs/probes.md)


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True)
class ProbeSettings:
    """How a probe runs, whichever probe it is: ``batch_size`` texts per LSTM batch when
    reading states, ``figures`` (PNG/HTML beside the JSON, when there is an ``out`` folder),
    ``data_dir`` the labelled data's folder (``$NSLM_DATA_DIR`` when None), and ``log`` the
    progress lines."""

    batch_size: int = 128
    figures: bool = True
    data_dir: Path | str | None = None
    log: Log = _quiet


def sentiment(
    loaded,
    out: Path | None,
    settings: ProbeSettings = ProbeSettings(),
    *,
    dataset: str = "sst2",
    last_bytes: int | None = None,
    n_train: int | None = None,
    n_dev: int = 500,
    n_test: int | None = None,
    bow: bool = True,
    raw: bool = False,
) -> dict:
    """The sentiment probe of ``dataset`` (``sst2`` or ``imdb``); returns the summary.

    Texts are framed as reviews and SST-2 is detokenised (:mod:`nslm.byte_lm.probes.sentiment`)
    unless ``raw``; the bag-of-words baseline reads the same texts.

    SST-2 reads whole sentences; ``n_train`` limits its train split. IMDB: ``n_train``
    (default 2,000) and ``n_dev`` reviews of the shuffled train file, ``n_test`` of the
    shuffled test file (all 25,000 when None), each cut to its last ``last_bytes`` bytes.
    """
    start = time.perf_counter()
    data_dir, batch_size, log = settings.data_dir, settings.batch_size, settings.log
    if dataset == "sst2":
        splits = sst2_splits(data_dir, n_train=n_train, detokenise=not raw)
    else:
        splits = imdb_splits(data_dir, n_train=n_train or 2000, n_dev=n_dev, n_test=n_test)
    features = extract_features(
        loaded, splits, last_bytes=last_bytes, frame=not raw, batch_size=batch_size, log=log
    )
    result = probe_sentiment(features, splits, bow=bow, log=log)
    summary = {"dataset": dataset, "last_bytes": last_bytes, "framed": not raw, **result.summary}
    summary["seconds"] = time.perf_counter() - start
    if out is None:
        return summary
    for pooling, probe in result.probes.items():
        save_probe(
            out / f"probe_{pooling}.json",
            probe,
            dataset=dataset,
            features=pooling,
            last_bytes=last_bytes,
        )
    save_probe(out / "neuron.json", result.neuron, dataset=dataset, features=result.best_pooling)
    if settings.figures:
        best, neuron = result.best_pooling, result.neuron
        plots.weight_bars(
            result.probes[best].weights(),
            out / "weights.png",
            f"{dataset}: L1 logistic regression on {best}, weight per neuron",
        )
        plots.label_histogram(
            features["train"][best][:, neuron.neuron],
            splits["train"].labels == 1,
            out / "neuron_histogram.png",
            f"{dataset} train: neuron {neuron.neuron} ({best}) by label",
            threshold=neuron.threshold_,
        )
    write_json_atomic(out / "summary.json", summary)
    log(f"wrote {out}/summary.json, probe files and figures")
    return summary


def pos_data(
    loaded, train_bytes: int | None, n_test: int | None, settings: ProbeSettings
) -> tuple[ByteData, ByteData]:
    """Train bytes (whole sentences of EWT train, seeded, until ``train_bytes``) and EWT test
    (its first ``n_test`` sentences, all when None), with states and raw XPOS tags
    (:func:`regroup` groups them)."""
    train_sentences = take_bytes(read_ewt("train", settings.data_dir), train_bytes)
    test_sentences = read_ewt("test", settings.data_dir, limit=n_test)
    settings.log(
        f"states of {len(train_sentences):,} EWT train and {len(test_sentences):,} test sentences"
    )
    train = byte_dataset(loaded, train_sentences, grouped=False, batch_size=settings.batch_size)
    test = byte_dataset(loaded, test_sentences, grouped=False, batch_size=settings.batch_size)
    return train, test


def regroup(data: ByteData, grouped_tags: np.ndarray) -> ByteData:
    return ByteData(data.X, grouped_tags, data.sentence, data.texts)


def pos(
    loaded,
    out: Path | None,
    settings: ProbeSettings = ProbeSettings(),
    *,
    train_bytes: int | None = 30_000,
    n_test: int | None = None,
    groupings: Sequence[str] = ("grouped", "ungrouped"),
    C: float = POS_C,
    ks: Sequence[int] = TOP_KS,
    plot_tags: Sequence[str] = PLOT_TAGS,
) -> dict:
    """The POS probes, grouped and/or ungrouped tags, on one extraction; returns
    ``{grouping: summary}``."""
    from nslm.byte_lm.probes.pos import group_tag

    start = time.perf_counter()
    log = settings.log
    train, test = pos_data(loaded, train_bytes, n_test, settings)
    summaries = {}
    for grouping in groupings:
        if grouping == "grouped":
            tr = regroup(train, np.asarray([group_tag(t) for t in train.tags]))
            te = regroup(test, np.asarray([group_tag(t) for t in test.tags]))
        else:
            tr, te = train, test
        result = probe_pos(tr, te, C=C, ks=ks, log=lambda m, g=grouping: log(f"{g}: {m}"))
        summaries[grouping] = {"grouping": grouping, **result.summary}
        if out is None:
            continue
        folder = out / grouping
        for name, probe in result.probes.items():
            save_probe(folder / f"probe_{name}.json", probe, grouping=grouping, neurons=name)
        if settings.figures:
            pos_figures(result.probes["all"], tr, te, folder, plot_tags)
        write_json_atomic(folder / "summary.json", summaries[grouping])
        log(f"wrote {folder}/summary.json, probe files and figures")
    summaries["seconds"] = time.perf_counter() - start
    return summaries


def pos_figures(
    probe, train: ByteData, test: ByteData, folder: Path, tags: Sequence[str], n_sentences: int = 4
) -> None:
    """Per tag: weight bars, the top neuron's histogram (tag bytes vs the rest, on train), and
    a few test sentences coloured by that neuron."""
    known = set(probe.classes_.tolist())
    cuts = np.flatnonzero(np.diff(test.sentence)) + 1  # sentence boundaries in the byte rows
    rows, states = np.split(test.tags, cuts), np.split(test.X, cuts)
    for tag in [t for t in tags if t in known]:
        neuron = int(probe.top_neurons(1, tag)[0])
        safe = "SPACE" if tag == SPACE else "".join(c if c.isalnum() else "_" for c in tag)
        plots.weight_bars(
            probe.weights(tag),
            folder / f"weights_{safe}.png",
            f"POS {tag}: L1 logistic regression weight per neuron",
        )
        plots.label_histogram(
            train.X[:, neuron],
            train.tags == tag,
            folder / f"histogram_{safe}.png",
            f"neuron {neuron}: bytes tagged {tag} vs the rest (EWT train)",
            names=("no match", "match"),
        )
        # the first test sentences that hold the tag, long enough to show some context
        chosen = [i for i, row in enumerate(rows) if tag in row]
        chosen = [i for i in chosen if len(test.texts[i]) >= 40][:n_sentences] or chosen[:1]
        plots.sentence_html(
            [test.texts[i] for i in chosen],
            [states[i] for i in chosen],
            [rows[i].tolist() for i in chosen],
            neuron,
            tag,
            folder / f"sentences_{safe}.html",
            f"neuron {neuron}, the top neuron of the {tag} probe",
        )


__all__ = ["DEFAULT_IMDB_LAST_BYTES", "ProbeSettings", "pos", "sentiment"]
