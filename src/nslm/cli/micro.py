"""``nslm micro fit|eval|list``; ``micro plot`` is in :mod:`nslm.cli.micro_plot`.

``micro fit RUN`` fits the micro-models of a training run (RUN/micro.json); without RUN,
``micro fit --corpus NAME|DIR -o FILE`` fits them on a prepared corpus alone, which needs
no language model: per class, the NSLM's perplexity depends on the micro-model only through
P_MM at the class's positions.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from nslm.cli.options import (
    DEFAULT_CORPUS,
    classes_option,
    corpus_option,
    file_option,
    int_range_option,
    json_option,
    list_option,
    out_option,
    prepared_dir_option,
    run_argument,
)
from nslm.data.prepare import prepare_corpus
from nslm.errors import NslmError

_corpus = corpus_option()
_classes = classes_option(help="Which classes the corpus is prepared with [all].", default=None)
_only = list_option("--only", help="Only these classes, e.g. year,city [every class].")
_plugin = click.option(
    "--plugin",
    "plugins",
    multiple=True,
    metavar="FILE.py|MODULE",
    help="A .py file or module that registers metrics/PDFs (repeatable).",
)


def corpus_source(command):
    """The options that say which prepared corpus and plug-ins a command reads: --corpus,
    --classes, --prepared-dir, --plugin."""
    for option in (_plugin, prepared_dir_option, _classes, _corpus):
        command = option(command)
    return command


def _load_plugins(plugins: tuple[str, ...]) -> None:
    from nslm.micro.plugins import load_plugin

    for plugin in plugins:
        load_plugin(plugin)


@click.group("micro")
def micro_group() -> None:
    """Fit, select, evaluate and plot the micro-models P_MM of the paper's Eq. 1.

    'micro fit RUN' fits those of a training run; the other modes work on a prepared corpus
    alone, since per class the NSLM's perplexity depends on the micro-model only through
    P_MM at the class's positions.
    """


@micro_group.command("fit")
@run_argument(required=False)
@click.option("--fast", is_flag=True, help="Leave the mixture of Gaussians out of the grid (~10×).")
@_only
@list_option("--metric", "metrics", help="Limit the grid to these metrics.")
@list_option("--pdf", "pdfs", help="Limit the grid to these PDFs.")
@_plugin
@file_option(
    "--class-file",
    help="TOML of classes (regex, metrics, pdfs) and plug-ins: with RUN it limits "
    "the grid of the run's classes, without RUN it adds user classes.",
)
@out_option("Where to write micro.json [RUN/micro.json; required without RUN].")
@_corpus
@_classes
@prepared_dir_option
@click.option(
    "--context",
    is_flag=True,
    help="After micro.json: fit RUN's context-aware "
    "micro-models (a gate or a shift on the LM's state, per class the best on "
    "valid).",
)
@int_range_option(
    "--components",
    high=20,
    default=3,
    help="With --context: grid cells per class, before the restricted parts.",
)
def fit(
    run: Path | None,
    fast: bool,
    only: tuple[str, ...],
    metrics: tuple[str, ...],
    pdfs: tuple[str, ...],
    plugins: tuple[str, ...],
    class_file: Path | None,
    out: Path | None,
    corpus: str | None,
    classes: str | None,
    prepared_dir: Path | None,
    context: bool,
    components: int,
) -> None:
    """Exhaustive {metric, PDF} grid search per class on validation (paper Table 1, step 4).

    With RUN (a training run): its corpus and classes; writes RUN/micro.json, the selected
    pair of every class, every fitted parameter and the validation perplexity of every grid
    cell. Without RUN: on --corpus alone (no LM), written to -o FILE. With --context, RUN's
    context-aware micro-models (RUN/micro_context.json; docs/context-micro-models.md).
    """
    from nslm.micro.metrics import get_metric
    from nslm.micro.pdfs import get_pdf

    if context:
        from nslm.cli.context_micro import fit_context

        if run is None or any(
            [fast, only, metrics, pdfs, plugins, class_file, out, corpus, classes, prepared_dir]
        ):
            raise NslmError(
                "--context takes RUN and --components only (after 'nslm micro fit RUN')"
            )
        fit_context(run, components)
        return

    _load_plugins(plugins)  # before the names are checked: a plug-in may define them
    for name in metrics:
        get_metric(name)  # an unknown name fails before minutes of preparation
    for name in pdfs:
        get_pdf(name)
    wanted = list(only) or None
    if run is not None:
        if corpus or classes or prepared_dir:
            raise NslmError("RUN brings its own corpus: drop --corpus, --classes, --prepared-dir")
        _fit_run(run, fast, wanted, _grid(metrics, pdfs), plugins, class_file, out)
        _keep_card(run)
        return
    if out is None:
        raise NslmError(
            "give RUN (a training run), or -o FILE to fit on --corpus alone [wikitext-2]"
        )
    if fast and not pdfs:
        from nslm.micro.pdfs import pdf_names
        from nslm.runs.micro import SLOW_PDFS

        pdfs = tuple(p for p in pdf_names() if p not in SLOW_PDFS)
    grid = _grid(metrics, pdfs)
    _fit_corpus(
        corpus or DEFAULT_CORPUS, classes or "all", prepared_dir, wanted, grid, class_file, out
    )


def _keep_card(run: Path) -> None:
    """RUN/README.md rewritten with what the run now has (docs/lm-eval.md, "Model cards")."""
    from nslm.pages.card import write_card

    write_card(run)


def _grid(metrics: tuple[str, ...], pdfs: tuple[str, ...]) -> dict[str, list[str] | None]:
    """The limits of the {metric, PDF} grid, as both fits take them (None: every one)."""
    return {"metrics": list(metrics) or None, "pdfs": list(pdfs) or None}


def _fit_run(
    run: Path,
    fast: bool,
    only: list[str] | None,
    grid: dict[str, list[str] | None],
    plugins: tuple[str, ...],
    class_file: Path | None,
    out: Path | None,
) -> None:
    from nslm.runs.load import load_run
    from nslm.runs.micro import fit_run_micro, write_run_micro

    loaded = load_run(run)
    start = time.perf_counter()

    def progress(name: str) -> None:
        click.echo(f"  grid search <{name}>  ({time.perf_counter() - start:.0f} s)", err=True)

    payload = fit_run_micro(
        loaded,
        only=only,
        fast=fast,
        plugins=plugins,
        class_file=class_file,
        progress=progress,
        **grid,
    )
    path = write_run_micro(loaded, payload, out)
    _print_summary(payload)
    click.echo(f"wrote {path} ({time.perf_counter() - start:.0f} s)")
    if out is None:  # the run's own micro.json: its open micro-models beside it
        from nslm.evaluation.open_report import fit_run_new_mass
        from nslm.runs.micro import load_run_micro
        from nslm.runs.open_micro import fit_run_open, write_run_open

        def fitting(name: str) -> None:
            elapsed = time.perf_counter() - start
            click.echo(f"  open micro-model <{name}>  ({elapsed:.0f} s)", err=True)

        plain = load_run_micro(loaded)
        models = fit_run_open(loaded, plain, fitting)
        new_mass = None
        if models:  # the new members' mass: the escape, a share of P(<unk>), or both
            fitting("new members' mass, chosen on valid")
            try:
                new_mass = fit_run_new_mass(loaded, plain, models)
                shift = new_mass[1]["known_shift"]["kept"]
                click.echo(
                    f"  new members' mass: {new_mass[0].how}; value classes' known-weight "
                    f"shift δ {shift:g}",
                    err=True,
                )
            except NslmError as exc:  # no valid text to choose on: the escape, as before
                click.echo(f"  new members' mass: the escape ({exc})", err=True)
        written = write_run_open(loaded, models, new_mass)
        click.echo(f"wrote {written} ({time.perf_counter() - start:.0f} s)")
        if only is None:  # the functions that compute numbers, for predict (docs/functions.md)
            from nslm.functions.run import fit_run_functions, write_run_functions

            click.echo("  functions (convert, season, age, …)", err=True)
            written = write_run_functions(Path(run), fit_run_functions(loaded))
            click.echo(f"wrote {written} ({time.perf_counter() - start:.0f} s)")


def _fit_corpus(
    corpus: str,
    classes: str,
    prepared_dir: Path | None,
    only: list[str] | None,
    grid: dict[str, list[str] | None],
    class_file: Path | None,
    out: Path,
) -> None:
    from nslm.micro.pipeline import fit_micro
    from nslm.micro.plugins import load_class_file
    from nslm.micro.store import write_micro_json

    users = load_class_file(class_file) if class_file else []
    console = Console(stderr=True)
    prepared = prepare_corpus(corpus, classes, cache_root=prepared_dir)
    if len(prepared.class_names) == 1 and not users:  # "word" alone: an empty micro.json
        where = f" and {class_file} defines none" if class_file else ""
        raise NslmError(f"nothing to fit: --classes {classes} tags no class{where}")
    with console.status("fitting") as status:
        _, payload = fit_micro(
            prepared,
            names=only,
            user_classes=users,
            progress=lambda name: status.update(f"grid search <{name}>"),
            **grid,
        )
    write_micro_json(out, payload)
    _print_summary(payload)
    console.print(f"wrote {out}")


@micro_group.command("eval")
@corpus_source
@file_option(
    "--micro-file", "micro_path", required=True, help="A micro.json from 'nslm micro fit'."
)
@json_option("Print JSON instead of a table.")
def eval_(
    corpus: str | None,
    classes: str | None,
    prepared_dir: Path | None,
    plugins: tuple[str, ...],
    micro_path: Path,
    as_json: bool,
) -> None:
    """P_MM vs class-unigram perplexity per class on valid and test, from a micro.json."""
    from nslm.evaluation.class_perplexity import perplexity
    from nslm.micro.model import unigram_log_probs
    from nslm.micro.store import load_micro_models

    _load_plugins(plugins)
    prepared = prepare_corpus(corpus or DEFAULT_CORPUS, classes or "all", cache_root=prepared_dir)
    models = load_micro_models(micro_path, prepared)
    rows = {}
    for name, model in models.items():
        rows[name] = {"metric": model.metric.name, "context": model.context, "pdf": model.pdf.name}
        for split_name in ("valid", "test"):
            split = prepared.splits[split_name]
            positions, index = model.cls.positions(split)
            log_mm = model.log_prob_targets(split)[positions]
            uni = unigram_log_probs(model.cls, model.unigram_alpha)[index]
            rows[name][split_name] = {
                "tokens": len(positions),
                "mm_ppl": perplexity(log_mm),
                "unigram_ppl": perplexity(uni),
            }
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        _print_summary({"classes": {n: {"selected": r, "evaluation": r} for n, r in rows.items()}})


@micro_group.command("list")
@_plugin
def list_(plugins: tuple[str, ...]) -> None:
    """The registered metrics and PDFs (including those of plug-ins)."""
    from nslm.micro.metrics import get_metric, metric_names
    from nslm.micro.pdfs import get_pdf, pdf_names

    _load_plugins(plugins)
    for name in metric_names():
        m = get_metric(name)
        click.echo(f"metric {name:10s} kind={m.kind:10s} needs={','.join(sorted(m.needs)) or '-'}")
    for name in pdf_names():
        click.echo(f"pdf    {name:10s} takes={','.join(sorted(get_pdf(name).accepts))}")


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.2f}"


def _print_summary(payload: dict) -> None:
    table = Table(title="micro-models: P_MM vs class-unigram perplexity (no LM involved)")
    table.add_column("class")
    table.add_column("metric + PDF (context)")
    for col in ("valid MM", "valid uni", "test MM", "test uni", "test tokens"):
        table.add_column(col, justify="right")
    for name, entry in payload["classes"].items():
        sel = entry["selected"]
        pdf = sel["pdf"]["name"] if isinstance(sel["pdf"], dict) else sel["pdf"]
        ev = entry.get("evaluation", {})
        v, t = ev.get("valid", {}), ev.get("test", {})
        table.add_row(
            f"<{name}>",
            f"{sel['metric']} + {pdf} ({sel['context']})",
            _fmt(v.get("mm_ppl")),
            _fmt(v.get("unigram_ppl")),
            _fmt(t.get("mm_ppl")),
            _fmt(t.get("unigram_ppl")),
            str(t.get("tokens", "-")),
        )
    Console(width=120).print(table)
