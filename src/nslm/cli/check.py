"""``nslm check [TEXT]``: flag the numbers of a text that disagree with what a function
computes from their context ("120 miles (150 km)": expected 193)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nslm.cli.options import input_format_option, json_option
from nslm.errors import NslmError
from nslm.files.json_policy import json_text


@click.command("check")
@click.argument("text", default="-", metavar="TEXT")
@click.option(
    "--threshold",
    type=click.FloatRange(min=0.0, min_open=True),
    default=None,
    metavar="TAU",
    help="Flag a number when the function's reading is TAU times likelier than any other "
    "[the τ chosen on WikiText-2 valid].",
)
@input_format_option
@json_option("Print the flags as JSON.")
def check_command(text: str, threshold: float | None, input_format: str, as_json: bool) -> None:
    """Flag each number of TEXT that disagrees with what a function computes from its context.

    TEXT is a file (plain text, .xz, or CoNLL-U: .conllu, .conllu.xz), or - (the default) for
    standard input; a form feed separates documents. The functions (unit conversions,
    seasons, ages, years after, percentages; 'docs/functions.md') are fitted on WikiText-2
    on first use (about a minute; $NSLM_DATA_DIR) and cached. Each flag shows the number,
    the value expected, the computation and how much likelier the function's reading is.
    Exit status: 0 when nothing is flagged, 1 when something is, 2 on bad input.
    """
    from nslm.data.conllu import conllu_text, is_conllu
    from nslm.data.textfile import read_text
    from nslm.functions.api import check_text

    if text == "-":
        body = sys.stdin.read()
        if not body.strip():
            raise NslmError("no text on standard input to check")
    else:
        path = Path(text)
        if path.is_dir():
            raise NslmError(f"{path} is a directory; give a text file")
        body = read_text(path)
        if is_conllu(path.name):
            body = conllu_text(body, str(path))
    result = check_text(body, threshold=threshold, input_format=input_format)
    if as_json:
        click.echo(json_text(result.to_json()))
    else:
        for flag in result.flags:
            click.echo(
                f'document {flag.document + 1}, "… {flag.context}": {flag.written}: expected '
                f"{flag.expected} ({flag.function}: {flag.detail}); {flag.ratio:.3g}× likelier"
            )
        click.echo(result.summary())
    if result.flags:
        sys.exit(1)
