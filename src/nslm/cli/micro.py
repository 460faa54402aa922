"""``nslm micro fit|eval|plot|list``: micro-models on a prepared corpus, with no LM."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from nslm.cli.options import cache_option
from nslm.data.prepare import prepare_corpus
from nslm.data.tagging import CLASS_CHOICES

_corpus = click.option("--corpus", default="wikitext-2", show_default=True, help="Corpus name/dir.")
_classes = click.option(
    "--classes", type=click.Choice(CLASS_CHOICES), default="all", show_default=True,
    help="Which classes the corpus is prepared with.",
)  # fmt: skip
_only = click.option("--only", default=None, help="Comma-separated classes (default: all).")
_cache = cache_option
_plugin = click.option(
    "--plugin", "plugins", multiple=True,
    help="A .py file or module that registers metrics/PDFs (repeatable).",
)  # fmt: skip


def _split_names(text: str | None) -> list[str] | None:
    return [n.strip().strip("<>") for n in text.split(",") if n.strip()] if text else None


def _load_plugins(plugins: tuple[str, ...]) -> None:
    from nslm.micro.plugins import load_plugin

    for plugin in plugins:
        load_plugin(plugin)


@click.group("micro")
def micro_group() -> None:
    """Fit, select, evaluate and plot micro-models (paper Eq. 1) on a prepared corpus.

    Per class, the NSLM's perplexity depends on the micro-model only through P_MM at the
    class's positions, so selection and its evaluation need no language model.
    """


@micro_group.command("fit")
@_corpus
@_classes
@_only
@_cache
@_plugin
@click.option("--class-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="TOML file of user classes (regex, metrics, pdfs) and plug-ins.")  # fmt: skip
@click.option("--metric", "metrics", multiple=True, help="Limit the grid to these metrics.")
@click.option("--pdf", "pdfs", multiple=True, help="Limit the grid to these PDFs.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write micro.json.")  # fmt: skip
def fit(corpus: str, classes: str, only: str | None, cache_dir: Path | None,
        plugins: tuple[str, ...], class_file: Path | None, metrics: tuple[str, ...],
        pdfs: tuple[str, ...], out: Path) -> None:  # fmt: skip
    """Grid-search {metric, PDF} per class on validation; write every cell and the winner."""
    from nslm.micro.metrics import get_metric
    from nslm.micro.pdfs import get_pdf
    from nslm.micro.pipeline import fit_micro
    from nslm.micro.plugins import load_class_file
    from nslm.micro.store import write_micro_json

    _load_plugins(plugins)
    for name in metrics:
        get_metric(name)  # an unknown name fails before minutes of preparation
    for name in pdfs:
        get_pdf(name)
    users = load_class_file(class_file) if class_file else []
    console = Console(stderr=True)
    prepared = prepare_corpus(corpus, classes, cache_root=cache_dir)
    with console.status("fitting") as status:
        _, payload = fit_micro(
            prepared,
            names=_split_names(only),
            user_classes=users,
            metrics=list(metrics) or None,
            pdfs=list(pdfs) or None,
            progress=lambda name: status.update(f"grid search <{name}>"),
        )
    write_micro_json(out, payload)
    _print_summary(payload)
    console.print(f"wrote {out}")


@micro_group.command("eval")
@_corpus
@_classes
@_cache
@_plugin
@click.option("--micro", "micro_path", type=click.Path(dir_okay=False, path_type=Path),
              required=True, help="A micro.json from 'nslm micro fit'.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def eval_(corpus: str, classes: str, cache_dir: Path | None, plugins: tuple[str, ...],
          micro_path: Path, as_json: bool) -> None:  # fmt: skip
    """P_MM vs class-unigram perplexity per class on valid and test, from a micro.json."""
    from nslm.evaluation.perplexity import perplexity
    from nslm.micro.model import unigram_log_probs
    from nslm.micro.store import load_micro_models

    _load_plugins(plugins)
    prepared = prepare_corpus(corpus, classes, cache_root=cache_dir)
    models = load_micro_models(micro_path, prepared)
    rows = {}
    for name, model in models.items():
        rows[name] = {"metric": model.metric.name, "context": model.context,
                      "pdf": model.pdf.name}  # fmt: skip
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


@micro_group.command("plot")
@click.argument("run", required=False, type=click.Path(file_okay=False, path_type=Path))
@_corpus
@_classes
@_only
@_cache
@_plugin
@click.option("--micro", "micro_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Plot the selected models of this micro.json.")  # fmt: skip
@click.option("--metric", default=None, help="Without --micro: fit this metric (e.g. diff).")
@click.option("--pdf", default=None, help="Without --micro: fit this PDF (e.g. gaussian).")
@click.option("--context", type=click.Choice(["class", "family"]), default="class")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the PNG files [RUN/plots with RUN].")  # fmt: skip
def plot(run: Path | None, corpus: str, classes: str, only: str | None, cache_dir: Path | None,
         plugins: tuple[str, ...], micro_path: Path | None, metric: str | None,
         pdf: str | None, context: str, out: Path | None) -> None:  # fmt: skip
    """Draw each fitted PDF over its training histogram (paper Figure 2: year diff).

    With RUN (a training run after ``nslm fit-micro RUN``): the run's corpus and micro.json.
    """
    from nslm.errors import NslmError
    from nslm.micro.classdata import builtin_class
    from nslm.micro.model import MicroModel
    from nslm.micro.plot import plot_model
    from nslm.micro.store import load_micro_models

    _load_plugins(plugins)
    if run is not None:
        from nslm.cli.nslm_cmds import plot_run

        plot_run(run, micro_path, _split_names(only), out)
        return
    if out is None:
        raise NslmError("give --out DIR (or a RUN directory)")
    prepared = prepare_corpus(corpus, classes, cache_root=cache_dir)
    wanted = _split_names(only)
    if micro_path is not None:
        models = load_micro_models(micro_path, prepared)
        models = {n: m for n, m in models.items() if wanted is None or n in wanted}
    elif metric and pdf:
        names = wanted or list(prepared.class_names[1:])
        models = {
            n: MicroModel(builtin_class(prepared, n), metric, pdf, context=context).fit(
                prepared.train
            )
            for n in names
        }
    else:
        raise NslmError("give --micro micro.json, or both --metric and --pdf")
    for name, model in models.items():
        path = plot_model(
            model, prepared.train, out / f"{name}_{model.metric.name}_{model.pdf.name}.png"
        )
        click.echo(str(path))


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
            f"<{name}>", f"{sel['metric']} + {pdf} ({sel['context']})",
            _fmt(v.get("mm_ppl")), _fmt(v.get("unigram_ppl")),
            _fmt(t.get("mm_ppl")), _fmt(t.get("unigram_ppl")), str(t.get("tokens", "-")),
        )  # fmt: skip
    Console(width=120).print(table)
