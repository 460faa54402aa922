"""``nslm report RUN [-o FILE]``: one self-contained HTML page of a run (docs/report.md)."""

from __future__ import annotations

from pathlib import Path

import click

from nslm.cli.options import out_option, run_argument


@click.command("report")
@run_argument()
@out_option("The HTML file to write [RUN/report.html].")
def report_command(run: Path, out: Path | None) -> None:
    """Write an HTML report of RUN: config, training curves, results, Tables 2 and 3 beside
    the paper's, micro-models and their fitted PDFs, rarity, probes (whatever RUN holds).

    The page is one file (styles and figures inline) and opens offline.
    """
    from nslm.pages.report import write_report

    path = write_report(run, out)
    click.echo(f"wrote {path}")
