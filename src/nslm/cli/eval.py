"""``nslm eval RUN``: global perplexity of every head, or, with micro-models, the paper's
Tables 2 and 3 (plus the extra columns of cli/eval_extras.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nslm.cli.eval_extras import PaperExtras, paper_options
from nslm.cli.options import list_option, model_option, run_argument, use_nslm
from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.evaluation.columns import ColumnSource
    from nslm.runs.load import LoadedRun

SPLITS = ("valid", "test")


def eval_tables(
    run: Path,
    splits: Sequence[str],
    lambda_objective: str = "table",
    max_tokens: int = 0,
    extra: Sequence[Callable[[LoadedRun], ColumnSource]] = (),
) -> dict:
    """Tables 2/3 of RUN for each split (λ tuned on valid); RUN/tables_<split>.json.

    ``extra``: factories that build a column source (a 5-gram, a cache, …) for the loaded run.
    """
    from nslm.config import total_threads
    from nslm.evaluation.report import evaluate_run, finite_or_none, render
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.scores.passes import use_threads
    from nslm.training.checkpoint import write_json_atomic

    loaded = load_run(run)
    use_threads(total_threads(loaded.cfg))
    micro = load_run_micro(loaded)
    sources = [make(loaded) for make in extra]
    results = {}
    for split in splits:
        result = evaluate_run(
            loaded,
            micro,
            split=split,
            lambda_objective=lambda_objective,
            max_tokens=max_tokens,
            extra=sources,
        )
        path = Path(run) / f"tables_{split}.json"
        write_json_atomic(path, finite_or_none(result))
        click.echo(render(result))
        click.echo(f"wrote {path}\n")
        results[split] = result
    return results


@click.command("eval")
@run_argument()
@list_option("--split", "splits", choices=SPLITS, metavar="SPLIT[,SPLIT]",
             help="Splits to score: valid, test or both [valid,test].")  # fmt: skip
@model_option("Tables 2 and 3")
@click.option("--lambda-objective", type=click.Choice(["table", "global"]), default="table",
              show_default=True, help="With the NSLM: tune the ensemble's λ on valid "
              "Numbers/Locations (table) or Global perplexity.")  # fmt: skip
@click.option("--max-tokens", type=int, default=0, help="Score only a prefix (0 = all).")
@click.option("--ngram", "ngram_order", type=int, default=None, metavar="N",
              help="Add an N-gram column (modified KN on train) and, with the NSLM, an "
              "N-gram NSLM column; without it, the N-gram's global perplexity.")  # fmt: skip
@paper_options
def eval_command(
    run: Path,
    splits: tuple[str, ...],
    model_kind: str = "auto",
    lambda_objective: str = "table",
    max_tokens: int = 0,
    ngram_order: int | None = None,
    **paper: Any,
) -> None:
    """Global perplexity of every head of a trained RUN; writes RUN/eval.json.

    With the NSLM (RUN/micro.json, from 'nslm micro fit RUN'): the paper's Tables 2 and 3
    instead (NNLM, HNLM, NSLM ensemble, NSLM-pure per class), in RUN/tables_<split>.json.
    """
    from nslm.ngram.counting import MAX_ORDER

    splits = splits or SPLITS
    if ngram_order is not None and not 1 <= ngram_order <= MAX_ORDER:
        raise NslmError(f"--ngram must be between 1 and {MAX_ORDER}, got {ngram_order}")
    extras = PaperExtras(**paper)  # --cache, --crnn, --by-rarity (checked before any work)
    if extras.wanted:  # the extra columns exist only beside the NSLM tables
        if model_kind == "neural":
            raise NslmError("--cache, --crnn and --by-rarity need the NSLM, not --model neural")
        if not (run / "micro.json").is_file():
            raise NslmError(
                "--cache, --crnn and --by-rarity need RUN/micro.json: "
                f"run 'nslm micro fit {run}' first"
            )
    if extras.wanted or use_nslm(run, model_kind, "eval"):
        from nslm.evaluation.ngram_columns import ngram_source

        extra = [ngram_source(ngram_order)] if ngram_order else []
        eval_tables(run, splits, lambda_objective, max_tokens, extra=extras.factories(extra))
        extras.finish(run)
        return
    _eval_heads(run, splits, max_tokens, ngram_order)


def _eval_heads(run: Path, splits: Sequence[str], max_tokens: int, ngram_order: int | None) -> None:
    """Global perplexity of each neural head (and an n-gram's); RUN/eval.json."""
    from nslm.runs.load import load_run
    from nslm.scores.positions import score_split
    from nslm.training.checkpoint import write_json_atomic

    loaded = load_run(run)
    ngram = None
    if ngram_order:
        from nslm.evaluation.ngram_columns import ngram_global, ngram_source
        from nslm.evaluation.report import head_of

        ngram = ngram_source(ngram_order, with_nslm=False)(loaded)
    out: dict[str, dict[str, float]] = {}
    for split in splits:
        scores = score_split(
            loaded.model,
            loaded.corpus.splits[split],
            batch_size=loaded.cfg.eval_batch_size,
            bptt=loaded.cfg.bptt,
            max_tokens=max_tokens,
        )
        out[split] = {f"ppl_{h}": scores.perplexity(h) for h in loaded.cfg.heads}
        if ngram is not None:  # beside the heads, on the same positions
            part = head_of(loaded.corpus.splits[split], max_tokens)
            out[split][f"ppl_{ngram_order}-gram"] = ngram_global(ngram, part)
    write_json_atomic(run / "eval.json", out)
    for split, row in out.items():
        shown = "  ".join(f"{k.removeprefix('ppl_').upper()} {v:.2f}" for k, v in row.items())
        click.echo(f"{split}: global perplexity  {shown}")
