"""``nslm serve RUN…``: the local web explorer over runs chosen at start-up (docs/report.md)."""

from __future__ import annotations

from pathlib import Path

import click

from nslm.cli.options import RunDir, int_range_option
from nslm.errors import NslmError


@click.command("serve")
@click.argument("runs", nargs=-1, required=True, type=RunDir())
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to bind; the default serves this machine only.",
)
@int_range_option("--port", high=65535, default=8000, help="Port to listen on.")
@int_range_option(
    "--max-prompt",
    default=2000,
    help="Longest prompt, prime or review a request may send (characters).",
)
@int_range_option(
    "--max-request-tokens",
    "max_tokens",
    default=200,
    help="Most tokens (bytes for a byte LM) a request may generate.",
)
@int_range_option(
    "--workers",
    high=16,
    default=1,
    help="Server processes, each with its own copy of the runs: up to one per "
    "core answers that many requests at once.",
)
def serve_command(
    runs: tuple[Path, ...], host: str, port: int, max_prompt: int, max_tokens: int, workers: int
) -> None:
    """Serve a web explorer of RUNS on http://HOST:PORT/ (JSON API under /api, its OpenAPI
    page at /docs): next tokens with the class × micro-model breakdown, generation, and a
    byte LM's neurons and sentiment probe.

    Each run is named by its folder's name; requests name runs, never paths.
    """
    from nslm.pages.explorer import Limits
    from nslm.pages.server import serve

    named: dict[str, Path] = {}
    for run in runs:
        if run.name in named:
            raise NslmError(f"two runs are named {run.name!r}: {named[run.name]} and {run}")
        named[run.name] = run
    click.echo(f"loading {len(named)} run(s) in {workers} process(es) …", err=True)
    limits = Limits(max_prompt_chars=max_prompt, max_tokens=max_tokens)
    click.echo(f"serving http://{host}:{port}/ (Ctrl-C stops)", err=True)
    serve(named, host=host, port=port, limits=limits, workers=workers)
