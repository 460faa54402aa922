"""``nslm experiment …``: the paper's synthetic experiments, e.g. ``increment`` (Table 7)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from nslm.cli.options import config_option, dir_option, list_option, out_option
from nslm.errors import NslmError


@click.group("experiment")
def experiment_group() -> None:
    """The paper's synthetic experiments (Table 7: the increment function)."""


@experiment_group.command("increment")
@list_option(
    "--sizes",
    metavar="N[,N…]",
    help="Corpus sizes N: pairs 'n , n+1' for n = 1 … N (--sizes 100,1000,10000).",
)
@out_option("Write the results as JSON here (rewritten after each N).")
@config_option("Experiment settings (TOML, as configs/increment.toml) [built-in defaults].")
@click.option("--epochs", type=int, default=None, help="Passes over train.txt [60].")
@click.option(
    "--minutes", type=float, default=None, help="Training time limit per N (0 = none) [0]."
)
@click.option("--seed", type=int, default=None, help="Corpus split and initialisation [1].")
@dir_option(
    "--work-dir",
    help="Keep the corpora and runs here [a temporary directory, removed afterwards].",
)
def increment_command(
    sizes: tuple[str, ...],
    out: Path | None,
    config: Path | None,
    epochs: int | None,
    minutes: float | None,
    seed: int | None,
    work_dir: Path | None,
) -> None:
    """Table 7: the NNLM memorises 'n , n+1' pairs but fails on unseen ones, not the NSLM.

    The NSLM uses a diff micro-model (the paper's Eq. 4). Prints the train and test
    perplexity of both per N.
    """
    from nslm.cli.train import _ensure_passive_openmp
    from nslm.experiments.increment import IncrementConfig, format_table, run_increment
    from nslm.experiments.increment_data import check_sizes
    from nslm.files.atomic import write_json_atomic

    try:
        numbers = [int(n) for n in sizes]
    except ValueError:
        raise NslmError(f"--sizes takes whole numbers, not {','.join(sizes)!r}") from None
    checked = check_sizes(numbers)
    overrides: dict[str, Any] = {
        k: v
        for k, v in (("epochs", epochs), ("max_minutes", minutes), ("seed", seed))
        if v is not None
    }
    if config is not None:
        cfg = IncrementConfig.from_toml(config, **overrides)
    else:
        cfg = IncrementConfig.build(overrides)
    _ensure_passive_openmp()  # it trains: wait passively in OpenMP, as `nslm train` does
    start = time.perf_counter()

    def say(text: str) -> None:
        click.secho(f"[{time.perf_counter() - start:5.0f} s] {text}", err=True, bold=True)

    def done(result: dict[str, Any]) -> None:
        if out is not None:
            write_json_atomic(out, result)

    result = run_increment(checked, cfg, work_dir=work_dir, say=say, done=done, progress=True)
    click.echo(format_table(result))
    if out is not None:
        click.echo(f"results written to {out}", err=True)
