"""``nslm micro plot``: each fitted PDF over its training histogram (paper Figure 2)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from nslm.cli.micro import _load_plugins, _only, corpus_source
from nslm.cli.options import (
    DEFAULT_CORPUS,
    choice_option,
    file_option,
    list_option,
    out_dir_option,
    run_argument,
)
from nslm.data.prepare import prepare_corpus
from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.runs.kinds import RunRef


@click.command("plot")
@run_argument(required=False)
@corpus_source
@_only
@file_option(
    "--micro-file",
    "micro_path",
    help="Plot the selected models of this micro.json [RUN/micro.json with RUN].",
)
@list_option(
    "--metric",
    "metrics",
    help="Without --micro-file: fit these metrics (e.g. diff), each with every --pdf.",
)
@list_option("--pdf", "pdfs", help="Without --micro-file: fit these PDFs (e.g. gaussian).")
@choice_option(
    "--metric-context",
    choices=["class", "family"],
    default="class",
    help="Without --micro-file: the metric's context, the previous "
    "token of the same class or of the same family (numbers, places).",
)
@out_dir_option("Directory for the PNG files [RUN/plots with RUN].")
def plot(
    run: RunRef | None,
    corpus: str | None,
    classes: str | None,
    only: tuple[str, ...],
    prepared_dir: Path | None,
    plugins: tuple[str, ...],
    micro_path: Path | None,
    metrics: tuple[str, ...],
    pdfs: tuple[str, ...],
    metric_context: str,
    out: Path | None,
) -> None:
    """Draw each fitted PDF over its training histogram (paper Figure 2: year diff).

    With RUN (a training run after 'nslm micro fit RUN'): the run's corpus and micro.json.
    """
    from nslm.micro.classdata import builtin_class
    from nslm.micro.model import MicroModel
    from nslm.micro.plot import plot_model
    from nslm.micro.store import load_micro_models

    _load_plugins(plugins)
    if run is not None:
        _plot_run(run, micro_path, list(only) or None, out)
        return
    if out is None:
        raise NslmError("give --out-dir DIR (or a RUN directory)")
    prepared = prepare_corpus(corpus or DEFAULT_CORPUS, classes or "all", cache_root=prepared_dir)
    wanted = list(only) or None
    if micro_path is not None:
        selected = load_micro_models(micro_path, prepared)
        models = [(n, m) for n, m in selected.items() if wanted is None or n in wanted]
    elif metrics and pdfs:
        names = wanted or list(prepared.class_names[1:])
        models = [
            (n, MicroModel(builtin_class(prepared, n), m, p, context=metric_context))
            for n in names
            for m in metrics
            for p in pdfs
        ]
        models = [(n, model.fit(prepared.train)) for n, model in models]
    else:
        raise NslmError("give --micro-file micro.json, or both --metric and --pdf")
    for name, model in models:
        path = plot_model(
            model, prepared.train, out / f"{name}_{model.metric.name}_{model.pdf.name}.png"
        )
        click.echo(str(path))


def _plot_run(
    run: RunRef, micro_path: Path | None, only: list[str] | None, out: Path | None
) -> None:
    """``nslm micro plot RUN``: each selected PDF of RUN/micro.json over its training histogram
    (a Transformer run's micro.json is fitted on its corpus alone, as a word run's)."""
    from nslm.micro.plot import plot_model

    if run.kind == "transformer":
        from nslm.transformer.commands import run_micro_models

        corpus, models = run_micro_models(run.path, micro_path)
        train = corpus.train
    else:
        from nslm.runs.load import load_run
        from nslm.runs.micro import load_run_micro

        loaded = load_run(run)
        train, models = loaded.corpus.train, load_run_micro(loaded, micro_path)
    if only:
        unknown = [n for n in only if n not in models]
        if unknown:
            raise NslmError(
                f"no micro-model for <{unknown[0]}> in {run}; it has: {', '.join(models)}"
            )
        models = {n: m for n, m in models.items() if n in only}
    out = out or Path(run) / "plots"
    for name, model in models.items():
        name_png = f"{name}_{model.metric.name}_{model.pdf.name}.png"
        click.echo(str(plot_model(model, train, out / name_png)))
