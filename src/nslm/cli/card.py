"""``nslm card RUN``: the run's model card, RUN/README.md (docs/lm-eval.md, "Model cards")."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("card")
@click.argument("run", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The card's file [RUN/README.md].",
)
def card_command(run: Path, out: Path | None) -> None:
    """Write RUN's model card: what it is, how it was made, its figures, how to load it."""
    from nslm.pages.card import write_card

    click.echo(f"wrote {write_card(run, out)}")
