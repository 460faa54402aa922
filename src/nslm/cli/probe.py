"""``nslm probe sentiment|pos RUN``: neuron probes of a byte-LM run (docs/probes.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nslm.cli.intervention_options import (
    intervention_of,
    intervention_options,
    wants_intervention,
)
from nslm.cli.options import (
    choice_option,
    int_range_option,
    json_option,
    out_dir_option,
    run_argument,
)
from nslm.files.json_policy import json_text

if TYPE_CHECKING:
    from nslm.byte_lm.probes.pipeline import ProbeSettings

_batch = int_range_option(
    "--batch-size", default=128, help="Texts per LSTM batch when reading states."
)
_json = json_option("Print the summary as JSON.")
_no_figures = click.option("--no-figures", is_flag=True, help="Write no PNG/HTML figures.")


def _log(message: str) -> None:
    click.echo(message, err=True)


def _settings(batch_size: int, no_figures: bool) -> ProbeSettings:
    """What every probe command shares: --batch-size, --no-figures, progress on stderr."""
    from nslm.byte_lm.probes.pipeline import ProbeSettings

    return ProbeSettings(batch_size=batch_size, figures=not no_figures, log=_log)


def _load(run: Path, name: str, intervene: dict[str, Any], out: Path | None):
    """The byte LM of ``run``, through the one front door to a run (threads set as it
    trained; no micro-models: a byte LM has none), with the units --ablate, --clamp and
    --steer name changed at every step: the probes then read the intervened model.

    And the folder the probes go to: ``out``, else RUN/probes/NAME, or
    RUN/probes/NAME-intervened: an intervened model's probes never overwrite the model's own.
    """
    from nslm.byte_lm.intervention import set_intervention
    from nslm.runs.open import open_run

    loaded = open_run(run, micro="none", byte_lm="nslm probe").loaded
    set_intervention(loaded.model, intervention_of(loaded, intervene))
    folder = run / "probes" / (name + "-intervened" * wants_intervention(intervene))
    return loaded, out or folder


@click.group("probe")
def probe_group() -> None:
    """Which neurons of a byte LM's cell state know sentiment, or part of speech.

    L1 logistic regression (scikit-learn) on the LSTM cell states, the best single neuron,
    and baselines; probes are saved as JSON, figures as PNG/HTML (RUN/probes/ by default).
    """


@probe_group.command("sentiment")
@run_argument()
@choice_option(
    "--dataset",
    "dataset",
    choices=["sst2", "imdb"],
    default="sst2",
    help="SST-2 sentences, or IMDB reviews.",
)
@int_range_option(
    "--last-bytes",
    help="Read only each text's last N bytes [IMDB: 128; SST-2: the whole sentence].",
)
@int_range_option(
    "--train-texts",
    "n_train",
    help="Train texts: the first N [SST-2: all 6,920; IMDB: 2,000 of the shuffled train file].",
)
@int_range_option(
    "--dev-texts",
    "n_dev",
    default=500,
    help="IMDB dev reviews, from the shuffled train file after the train ones.",
)
@int_range_option(
    "--test-texts",
    "n_test",
    help="IMDB test reviews: the first N of the shuffled test file [all 25,000].",
)
@click.option("--no-bow", is_flag=True, help="Skip the TF-IDF bag-of-words baseline.")
@click.option(
    "--verbatim",
    is_flag=True,
    help="Read the texts verbatim: no review framing, SST-2 left PTB-tokenised.",
)
@out_dir_option(
    "Folder for the summary, probes and figures [RUN/probes/sentiment-DATASET, "
    "sentiment-DATASET-intervened with --ablate, --clamp or --steer]."
)
@_batch
@_no_figures
@_json
@intervention_options
def sentiment_command(
    run: Path,
    dataset: str,
    last_bytes: int | None,
    n_train: int | None,
    n_dev: int,
    n_test: int | None,
    no_bow: bool,
    verbatim: bool,
    out: Path | None,
    batch_size: int,
    no_figures: bool,
    as_json: bool,
    **intervene: Any,
) -> None:
    """Sentiment probe: final cell, mean cell, mean hidden state and both means of each text.

    Each text is read as a review in the LM's training stream (after the separator, then a
    space); SST-2 is detokenised first (``--verbatim``: neither).

    Per feature, L1 logistic regression with C chosen on dev; test accuracy, non-zero
    weights, and the neuron with the largest |weight| thresholded alone (on train). The
    feature best on dev is the headline. Beside them: TF-IDF + logistic regression and the
    majority class, on the same splits.
    """
    from nslm.byte_lm.probes import pipeline

    if dataset == "imdb" and last_bytes is None:
        last_bytes = pipeline.DEFAULT_IMDB_LAST_BYTES
    loaded, out = _load(run, f"sentiment-{dataset}", intervene, out)
    summary = pipeline.sentiment(
        loaded,
        out,
        _settings(batch_size, no_figures),
        dataset=dataset,
        last_bytes=last_bytes,
        n_train=n_train,
        n_dev=n_dev,
        n_test=n_test,
        bow=not no_bow,
        raw=verbatim,
    )
    click.echo(json_text(summary) if as_json else render_sentiment(summary))


def render_sentiment(s: dict) -> str:
    sizes = ", ".join(f"{k} {v:,}" for k, v in s["sizes"].items())
    cut = f", last {s['last_bytes']} bytes" if s["last_bytes"] else ""
    cut += ", framed as reviews" if s.get("framed") else ", raw"
    lines = [f"{s['dataset']} ({sizes}{cut}): test accuracy", ""]
    lines.append(
        f"{'features':<18}{'C':>7}{'dev':>8}{'test':>8}{'non-zero':>10}{'neuron':>8}{'alone':>8}"
    )
    for name, p in s["poolings"].items():
        best = " *" if name == s["best_pooling"] else ""
        lines.append(
            f"{name:<18}{p['C']:>7g}{p['dev_acc']:>8.3f}{p['test_acc']:>8.3f}"
            f"{p['n_nonzero']:>6}/{p['n_neurons']:<4}{p['neuron']:>7}"
            f"{p['neuron_test_acc']:>8.3f}{best}"
        )
    if "bow" in s:
        lines.append(
            f"{'TF-IDF + LR':<18}{s['bow']['C']:>7g}{s['bow']['dev_acc']:>8.3f}"
            f"{s['bow']['test_acc']:>8.3f}"
        )
    lines.append(f"{'majority':<18}{'':>15}{s['majority']['test_acc']:>8.3f}")
    lines.append("")
    lines.append(
        "* best on dev; 'alone': the neuron with the largest |weight|, one threshold "
        "fitted on train"
    )
    return "\n".join(lines)


@probe_group.command("pos")
@run_argument()
@int_range_option(
    "--train-bytes",
    default=30_000,
    help="Bytes of EWT train (whole sentences, seeded order) the probes fit on.",
)
@int_range_option("--test-texts", "n_test", help="EWT test sentences: the first N [all 2,077].")
@choice_option(
    "--tags",
    "grouping",
    choices=["grouped", "ungrouped", "both"],
    default="both",
    help="Carvalho's grouped tags (NNS→NN, VB*→VB, …), raw XPOS, or both.",
)
@click.option(
    "-C",
    "C",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Inverse L1 strength of every tag's classifier [0.03].",
)
@out_dir_option(
    "Folder for the summaries, probes and figures [RUN/probes/pos, pos-intervened with "
    "--ablate, --clamp or --steer]."
)
@_batch
@_no_figures
@_json
@intervention_options
def pos_command(
    run: Path,
    train_bytes: int,
    n_test: int | None,
    grouping: str,
    C: float | None,
    out: Path | None,
    batch_size: int,
    no_figures: bool,
    as_json: bool,
    **intervene: Any,
) -> None:
    """Part-of-speech probes: one-vs-rest L1 logistic regression per tag on the cell state
    of every byte of UD EWT sentences (a byte's tag: its word's XPOS, SPACE between words).

    Accuracy, precision and recall (weighted over tags) on EWT test with all neurons and
    with each tag's top 1, 2, 3 neurons by |weight|; per tag, the same for its classifier
    alone (tag vs rest).
    """
    from nslm.byte_lm.probes import pipeline
    from nslm.byte_lm.probes.pos import POS_C

    groupings = ("grouped", "ungrouped") if grouping == "both" else (grouping,)
    C = POS_C if C is None else C
    loaded, out = _load(run, "pos", intervene, out)
    settings = _settings(batch_size, no_figures)
    summaries = pipeline.pos(
        loaded, out, settings, train_bytes=train_bytes, n_test=n_test, groupings=groupings, C=C
    )
    click.echo(json_text(summaries) if as_json else render_pos(summaries))


def render_pos(summaries: dict) -> str:
    lines = []
    for grouping, s in summaries.items():
        if grouping == "seconds":
            continue
        head = f"POS, {grouping} tags ({len(s['tags'])}): EWT test, {s['test_bytes']:,} bytes"
        lines.append(f"{head}; fit on {s['train_bytes']:,} train bytes")
        lines.append(f"{'k':<6}{'acc':>7}{'prec':>7}{'recall':>8}")
        for k, row in s["rows"].items():
            lines.append(f"{k:<6}{row['acc']:>7.3f}{row['precision']:>7.3f}{row['recall']:>8.3f}")
        space = s.get("space_top3_acc", float("nan"))
        lines.append(
            f"majority ({s['majority']['tag']}) {s['majority']['test_acc']:.3f}; "
            f"SPACE alone, top 3 neurons: {space:.3f}"
        )
        lines.append("")
    return "\n".join(lines).rstrip()
