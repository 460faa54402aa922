"""Click options that several command groups share."""

from __future__ import annotations

from pathlib import Path

import click

cache_option = click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where prepared corpora are cached [$NSLM_CACHE_DIR or ~/.cache/nslm/prepared].",
)
