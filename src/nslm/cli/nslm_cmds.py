"""``nslm fit-micro RUN``, ``nslm predict RUN PROMPT`` and the tables of ``nslm eval RUN``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.evaluation.columns import ColumnSource
    from nslm.runs.load import LoadedRun

_run = click.argument("run", type=click.Path(file_okay=False, path_type=Path))


def _names(text: str | None) -> list[str] | None:
    return [n.strip().strip("<>") for n in text.split(",") if n.strip()] if text else None


@click.command("fit-micro")
@_run
@click.option("--fast", is_flag=True, help="Leave the mixture of Gaussians out of the grid (~10×).")
@click.option("--only", default=None, help="Comma-separated classes (default: every class).")
@click.option("--metric", "metrics", multiple=True, help="Limit the grid to these metrics.")
@click.option("--pdf", "pdfs", multiple=True, help="Limit the grid to these PDFs.")
@click.option(
    "--plugin",
    "plugins",
    multiple=True,
    help="A .py file or module that registers metrics/PDFs (repeatable).",
)
@click.option(
    "--class-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="TOML limiting the metrics/PDFs of the run's classes, and plug-ins.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write micro.json [RUN/micro.json].",
)
def fit_micro_command(
    run: Path,
    fast: bool,
    only: str | None,
    metrics: tuple[str, ...],
    pdfs: tuple[str, ...],
    plugins: tuple[str, ...],
    class_file: Path | None,
    out: Path | None,
) -> None:
    """Exhaustive {metric, PDF} grid search per class on validation, for RUN's corpus.

    Writes RUN/micro.json: the selected pair of every class, every fitted parameter, and the
    validation perplexity of every grid cell (paper Table 1, step 4).
    """
    from nslm.micro.metrics import get_metric
    from nslm.micro.pdfs import get_pdf
    from nslm.runs.load import load_run
    from nslm.runs.micro import fit_run_micro, write_run_micro

    loaded = load_run(run)
    from nslm.micro.plugins import load_plugin

    for plugin in plugins:
        load_plugin(plugin)  # before the names are checked: a plug-in may define them
    for name in metrics:
        get_metric(name)
    for name in pdfs:
        get_pdf(name)
    start = time.perf_counter()

    def progress(name: str) -> None:
        click.echo(f"  grid search <{name}>  ({time.perf_counter() - start:.0f} s)", err=True)

    payload = fit_run_micro(
        loaded,
        only=_names(only),
        fast=fast,
        metrics=list(metrics) or None,
        pdfs=list(pdfs) or None,
        plugins=plugins,
        class_file=class_file,
        progress=progress,
    )
    path = write_run_micro(loaded, payload, out)
    from nslm.cli.micro import _print_summary

    _print_summary(payload)
    click.echo(f"wrote {path} ({time.perf_counter() - start:.0f} s)")


def eval_tables(
    run: Path,
    splits: tuple[str, ...],
    lambda_objective: str = "table",
    max_tokens: int = 0,
    extra: Sequence[Callable[[LoadedRun], ColumnSource]] = (),
) -> dict:
    """Tables 2/3 of RUN for each split (λ tuned on valid); RUN/tables_<split>.json.

    ``extra``: factories that build a column source (a 5-gram, a cache, …) for the loaded run.
    """
    from nslm.config import total_threads
    from nslm.evaluation.report import evaluate_run, finite_or_none, render
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.scores.passes import use_threads
    from nslm.training.checkpoint import write_json_atomic

    loaded = load_run(run)
    use_threads(total_threads(loaded.cfg))
    micro = load_run_micro(loaded)
    sources = [make(loaded) for make in extra]
    results = {}
    for split in splits:
        result = evaluate_run(
            loaded,
            micro,
            split=split,
            lambda_objective=lambda_objective,
            max_tokens=max_tokens,
            extra=sources,
        )
        path = Path(run) / f"tables_{split}.json"
        write_json_atomic(path, finite_or_none(result))
        click.echo(render(result))
        click.echo(f"wrote {path}\n")
        results[split] = result
    return results


@click.command("predict")
@_run
@click.argument("prompt")
@click.option("-k", "k", type=click.IntRange(1, 100), default=10, show_default=True)
@click.option(
    "--lambda",
    "lam",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Ensemble weight of the NNLM [the λ of RUN/tables_test.json, else 0: pure].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def predict_command(run: Path, prompt: str, k: int, lam: float | None, as_json: bool) -> None:
    """Top-k next tokens of PROMPT under the NNLM and the NSLM, with P(class) × P_MM."""
    from nslm.config import total_threads
    from nslm.generation.predict import predict, render
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.scores.passes import use_threads

    loaded = load_run(run)
    use_threads(total_threads(loaded.cfg))
    micro = load_run_micro(loaded)
    if lam is None:
        lam = _saved_lambda(run)
    result = predict(loaded, micro, prompt, k=k, lam=lam)
    click.echo(json.dumps(result, indent=1) if as_json else render(result))


def _saved_lambda(run: Path) -> float:
    """λ of the numbers table from the last ``nslm eval`` (else the first table's), or 0."""
    path = Path(run) / "tables_test.json"
    if not path.is_file():
        return 0.0
    try:
        tables = json.loads(path.read_text(encoding="utf-8"))["tables"]
        first = tables.get("numbers") or next(iter(tables.values()))
        return float(first["lambda"])
    except (KeyError, ValueError, TypeError, StopIteration, json.JSONDecodeError):
        print(f"warning: ignoring unreadable {path}", file=sys.stderr)
        return 0.0


def check_split_names(splits: tuple[str, ...]) -> None:
    for s in splits:
        if s not in ("valid", "test"):
            raise NslmError(f"unknown split {s!r}")


def plot_run(run: Path, micro_path: Path | None, only: list[str] | None, out: Path | None) -> None:
    """``nslm micro plot RUN``: each selected PDF of RUN/micro.json over its training histogram."""
    from nslm.micro.plot import plot_model
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro

    loaded = load_run(run)
    models = load_run_micro(loaded, micro_path)
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
        click.echo(str(plot_model(model, loaded.corpus.train, out / name_png)))
