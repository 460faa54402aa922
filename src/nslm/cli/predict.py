"""``nslm predict RUN PROMPT``: the top-k next tokens under the NNLM and the NSLM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from nslm.cli.options import run_argument
from nslm.errors import NslmError


@click.command("predict")
@run_argument()
@click.argument("prompt")
@click.option(
    "-k",
    "k",
    type=click.IntRange(1, 100),
    default=10,
    show_default=True,
    help="How many next tokens to list.",
)
@click.option(
    "--lambda",
    "lam",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Ensemble weight of the NNLM [the λ of RUN/tables_test.json, else 0: pure].",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def predict_command(run: Path, prompt: str, k: int, lam: float | None, as_json: bool) -> None:
    """Top-k next tokens of PROMPT under the NNLM and the NSLM, with P(class) × P_MM.

    Needs RUN/micro.json ('nslm micro fit RUN').
    """
    from nslm.config import total_threads
    from nslm.generation.predict import predict, render
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.scores.passes import use_threads

    if not (run / "micro.json").is_file():  # before the (slow) corpus load
        raise NslmError(f"predict needs {run / 'micro.json'}: run 'nslm micro fit {run}' first")
    loaded = load_run(run)
    use_threads(total_threads(loaded.cfg))
    micro = load_run_micro(loaded)
    if lam is None:
        lam = saved_lambda(run)
    result = predict(loaded, micro, prompt, k=k, lam=lam)
    click.echo(json.dumps(result, indent=1) if as_json else render(result))


def saved_lambda(run: Path) -> float:
    """λ of the numbers table from the last ``nslm eval`` (else the first table's), or 0."""
    path = Path(run) / "tables_test.json"
    if not path.is_file():
        return 0.0
    try:
        tables = json.loads(path.read_text(encoding="utf-8"))["tables"]
        first = tables.get("numbers") or next(iter(tables.values()))
        return float(first["lambda"])
    except (KeyError, ValueError, TypeError, StopIteration, json.JSONDecodeError):
        print(f"warning: ignoring unreadable {path}", file=sys.stderr)
        return 0.0
