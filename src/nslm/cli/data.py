"""``nslm data prepare|stats``."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from nslm.cli.options import (
    DEFAULT_CORPUS,
    classes_option,
    corpus_option,
    json_option,
    out_option,
    prepared_dir_option,
)
from nslm.data.custom import parse_class_rule
from nslm.data.prepare import prepare_corpus
from nslm.data.stats import corpus_stats
from nslm.files.atomic import write_json_atomic

rule_option = click.option(
    "--class-rule",
    "class_rules",
    multiple=True,
    metavar="NAME=REGEX",
    help="Add a user-defined class: tokens the regex matches in full (repeatable).",
)


@click.group("data")
def data_group() -> None:
    """Find, prepare and describe corpora.

    --corpus NAME|DIR is a known corpus name (wikitext-2), looked up in
    $NSLM_DATA_DIR, then ~/.cache/nslm, then downloaded; or a directory holding
    train/valid/test files.
    """


@data_group.command("prepare")
@corpus_option()
@classes_option()
@rule_option
@prepared_dir_option
def prepare(
    corpus: str | None,
    classes: str,
    class_rules: tuple[str, ...],
    prepared_dir: Path | None,
) -> None:
    """Re-join numbers, chunk places, tag classes and build the vocabulary; cache the result."""
    corpus = corpus or DEFAULT_CORPUS
    rules = [parse_class_rule(r) for r in class_rules]
    console = Console(stderr=True)
    with console.status(f"preparing {corpus} (classes: {classes})"):
        prepared = prepare_corpus(corpus, classes, cache_root=prepared_dir, class_rules=rules)
    sizes = ", ".join(f"{s} {len(x):,}" for s, x in prepared.splits.items())
    console.print(
        f"prepared {corpus}: vocabulary {len(prepared.vocab):,} types; tokens {sizes}; "
        f"cache key {prepared.meta['cache_key']}"
    )


@data_group.command("stats")
@corpus_option()
@classes_option()
@rule_option
@prepared_dir_option
@json_option("Print JSON instead of tables.")
@out_option("Also write the JSON to this file.")
def stats(
    corpus: str | None,
    classes: str,
    class_rules: tuple[str, ...],
    prepared_dir: Path | None,
    as_json: bool,
    out: Path | None,
) -> None:
    """Token, type and OOV counts per class and split, and how ambiguous places resolved."""
    corpus = corpus or DEFAULT_CORPUS
    rules = [parse_class_rule(r) for r in class_rules]
    prepared = prepare_corpus(corpus, classes, cache_root=prepared_dir, class_rules=rules)
    result = corpus_stats(prepared)
    if out is not None:
        write_json_atomic(out, result, indent=2)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        _print_tables(result, [s for s in ("train", "valid", "test") if s in result])


@data_group.command("lm-eval-tasks")
@click.option(
    "--out-dir",
    "out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The folder the tasks' data and YAML files go into.",
)
def lm_eval_tasks(out: Path) -> None:
    """Write nslm's offline lm-eval tasks into --out-dir (data and YAML, from $NSLM_DATA_DIR):
    then ``nslm lm-eval run --include_path DIR --tasks nslm_number_cloze …``."""
    from nslm.lm_eval.tasks import build_tasks

    counts = build_tasks(out)
    for name, n in counts.items():
        click.echo(f"{name}: {n:,} items")
    click.echo(f"wrote {out} (use --include_path {out})")


def _print_tables(result: dict, splits: list[str]) -> None:
    console = Console()
    table = Table(title=f"{result['corpus']}: class tokens (in-vocabulary types, OOV tokens)")
    table.add_column("class")
    table.add_column("|V_c|", justify="right")
    for split in splits:
        table.add_column(split, justify="right")
    for name, size in result["class_vocab_sizes"].items():
        cells = []
        for split in splits:
            row = result[split]["classes"][name]
            cells.append(f"{row['tokens']:,} ({row['types']:,}, {row['oov']:,})")
        table.add_row(f"<{name}>", f"{size:,}", *cells)
    totals = [f"{result[s]['tokens']:,}" for s in splits]
    table.add_row("all tokens", f"{result['vocab_size']:,}", *totals)
    console.print(table)
    if result["ambiguous_places"]:
        amb = Table(title="ambiguous place names (fixed rule: state > country > city)")
        for col in ("name", "candidates", "resolved to", *splits):
            amb.add_column(col)
        for name, row in sorted(result["ambiguous_places"].items()):
            counts = [str(row["tokens"].get(s, 0)) for s in splits]
            amb.add_row(name, " / ".join(row["candidates"]), row["resolved_to"], *counts)
        console.print(amb)
