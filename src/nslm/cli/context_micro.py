"""``nslm micro fit RUN --context``: fit and summarise the run's context-aware micro-models."""

from __future__ import annotations

import math
import time
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table


def fit_context(run: Path, components: int) -> None:
    from nslm.runs.context_micro import TRIED, fit_run_context, write_run_context
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro

    loaded = load_run(run)
    plain = load_run_micro(loaded)
    start = time.perf_counter()

    def progress(text: str) -> None:
        click.echo(f"  {text}  ({time.perf_counter() - start:.0f} s)", err=True)

    payload, tensors = fit_run_context(loaded, plain, components=components, progress=progress)
    path = write_run_context(loaded, payload, tensors)
    table = Table(title="context-aware micro-models: valid perplexity at the class's positions")
    for column in ("class", "plain P_MM", "mixture", "shifted", "shifted + mixture", "kept"):
        table.add_column(column)
    for name, entry in payload["classes"].items():
        tried = entry.get("valid_nll", {})
        cells = [f"{math.exp(tried[k]):.2f}" if k in tried else "-" for k in TRIED]
        kept = entry["kind"] if entry.get("kept") else entry.get("why", "no (plain is best)")
        table.add_row(f"<{name}>", *cells, kept)
    Console().print(table)
    click.echo(f"wrote {path} ({time.perf_counter() - start:.0f} s)")
