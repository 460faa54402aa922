"""``nslm predict RUN PROMPT``: the N best next tokens under the NNLM and the NSLM."""

from __future__ import annotations

from pathlib import Path

import click

from nslm.cli.options import (
    input_format_option,
    int_range_option,
    json_option,
    micro_kind_option,
    open_vocab_option,
    run_argument,
)
from nslm.errors import NslmError
from nslm.files.json_policy import json_text


@click.command("predict")
@run_argument()
@click.argument("prompt")
@int_range_option(
    "--n-best",
    "k",
    high=100,
    default=10,
    metavar="N",
    help="How many next tokens to list: the N likeliest.",
)
@click.option(
    "--lambda",
    "lam",
    type=click.FloatRange(0.0, 1.0),
    default=None,
    help="Ensemble weight of the NNLM [the Global λ of the last nslm eval, else 0: pure].",
)
@micro_kind_option
@input_format_option
@open_vocab_option("Also list the N best of")
@json_option("Print JSON.")
def predict_command(
    run: Path,
    prompt: str,
    k: int,
    lam: float | None,
    micro_kind: str,
    as_json: bool,
    input_format: str = "plain",
    open_vocab: bool | None = None,
) -> None:
    """The N best next tokens of PROMPT under the NNLM and the NSLM, with P(class) × P_MM.

    PROMPT is plain text ("in 1914, and died in"), tokenized by the run's rules; the first
    line shows how it was read. The lists show tokens as the model sees them. Needs
    RUN/micro.json ('nslm micro fit RUN'). With context-aware micro-models, each class also
    shows the gate's weights: which micro-model the context chose.

    When RUN/functions.json exists (written by 'nslm micro fit RUN'), the functions that
    compute the next number (a unit conversion, a season, an age; docs/functions.md) are
    mixed into the number classes.

    When RUN/open.json exists (also written by 'nslm micro fit RUN'), a third list follows:
    NSLM-open, whose open micro-models give years, numbers and places the vocabulary lacks
    their share of each class (marked *); --closed-vocab leaves it out.

    A Transformer run (docs/transformer.md) lists the next words of the Transformer alone and
    of the Transformer with micro-models, each word's share per class.
    """
    if run.kind == "transformer":
        _predict_transformer(run, prompt, k, as_json)
        return
    from nslm.generation.predict import predict
    from nslm.generation.predict_text import render
    from nslm.runs.open import open_run

    if not (run / "micro.json").is_file():  # before the (slow) load
        raise NslmError(f"predict needs {run / 'micro.json'}: run 'nslm micro fit {run}' first")
    if open_vocab is None:
        from nslm.runs.open_micro import OPEN_FILE

        open_vocab = (run / OPEN_FILE).is_file()
    opened = open_run(run, micro=micro_kind)
    open_models = None
    if open_vocab:  # before the prediction: a run without open.json fails at once
        from nslm.runs.open_micro import run_open_models

        # open micro-models extend the plain ones, whatever --micro chose for the NSLM
        open_models = run_open_models(opened.loaded, required=True)
    lam = opened.lam if lam is None else lam
    from nslm.functions.run import run_adjuster

    adjust = run_adjuster(opened.loaded)  # RUN/functions.json mixed into the number classes
    result = predict(
        opened.loaded, opened.micro, prompt, k=k, lam=lam, input_format=input_format, adjust=adjust
    )
    result["functions"] = adjust is not None
    if open_models is not None:
        from nslm.generation.open_predict import open_predict_many, render_open

        result["open"] = open_predict_many(
            opened.loaded,
            opened.micro,
            open_models,
            [prompt],
            k=k,
            lam=lam,
            input_format=input_format,
        )[0]
    text = render(result) + ("\n\n" + render_open(result["open"]) if "open" in result else "")
    click.echo(json_text(result) if as_json else text)


def _predict_transformer(run, prompt: str, k: int, as_json: bool) -> None:
    """``nslm predict`` on a Transformer run: its words and the mixture's (docs/transformer.md)."""
    from nslm.transformer.commands import open_transformer_run, predict

    got = predict(open_transformer_run(run.path), prompt, k=k)
    if as_json:
        click.echo(json_text(got))
        return
    weight = got["class_weight"]  # Σ_c λ_c · P(c | h): the micro-models' share here
    lines = [f"prompt: {prompt}", f"micro-models' weight Σ λ_c·P(c | h): {weight:.3f}"]
    if "Transformer+functions" in got:
        lines.append(
            f"functions' weight W: {got['function_weight']:.3f}"
            + (f" ({got['function_detail']})" if got["function_detail"] else "")
        )
    for model in ("Transformer", "Transformer+MM", "Transformer+functions"):
        if model not in got:
            continue
        lines.append(f"{model}:")
        for entry in got[model]:
            parts = entry.get("classes") or {}
            why = ", ".join(f"<{c}> {p:.3f}" for c, p in parts.items() if p > 0)
            lines.append(f"  {entry['word']:<16} {entry['p']:.4f}" + (f"  ({why})" if why else ""))
    click.echo("\n".join(lines))
