"""``nslm ngram build|eval|export-arpa``: n-gram LMs scored by the same per-class evaluator."""

from __future__ import annotations

import math
import time
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from nslm.atomic import write_json_atomic
from nslm.cli.options import (
    DEFAULT_CORPUS,
    classes_option,
    corpus_option,
    out_option,
    prepared_dir_option,
)
from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepare_corpus
from nslm.errors import NslmError
from nslm.evaluation.class_perplexity import class_perplexities, perplexity
from nslm.json_policy import json_text
from nslm.ngram.arpa import read_arpa, write_arpa
from nslm.ngram.build import (
    METHODS,
    build_model,
    prepared_stream,
    raw_lines,
    raw_stream,
    raw_vocabulary,
    score_split,
)
from nslm.ngram.counting import MAX_ORDER
from nslm.ngram.model import EOS, NgramModel


@click.group("ngram")
def ngram_group() -> None:
    """N-gram LMs: modified Kneser-Ney (lmplz-compatible), MLE and add-k; ARPA in and out."""


@ngram_group.command("build")
# CORPUS OUT as positionals stay accepted (documented); --corpus and -o are the spelling
# every command shares.
@click.argument("positional", nargs=-1, metavar="[CORPUS] [OUT]")
@corpus_option(default=None, help="A known corpus name, or a directory of train/valid/test files.")
@out_option("The directory to write the model to.", directory=True)
@click.option("--order", type=int, default=5, show_default=True, help=f"n, 1..{MAX_ORDER}.")
@click.option(
    "--method",
    type=click.Choice(METHODS),
    default="kn",
    show_default=True,
    help="kn: modified Kneser-Ney; mle: maximum likelihood; add-k: add --k.",
)
@click.option("--k", "add_k", type=float, default=1.0, show_default=True, help="k of add-k.")
@classes_option(help="Which classes the corpus is prepared with.")
@click.option("--tagged", is_flag=True, help="Replace class tokens by their class tags.")
@click.option("--raw", is_flag=True, help="Use the raw text as lmplz reads it (no preparation).")
@click.option(
    "--discount-fallback",
    is_flag=True,
    help="Use KN discounts 0.5 1 1.5 where count-of-counts cannot give them (as lmplz).",
)
@prepared_dir_option
def build(
    positional: tuple[str, ...],
    corpus: str | None,
    out: Path | None,
    order: int,
    method: str,
    add_k: float,
    classes: str,
    tagged: bool,
    raw: bool,
    discount_fallback: bool,
    prepared_dir: Path | None,
) -> None:
    """Build an n-gram model of the corpus's train split into the directory -o OUT."""
    corpus, out = _corpus_and_out(positional, corpus, out)
    if not 1 <= order <= MAX_ORDER:
        raise NslmError(f"--order must be between 1 and {MAX_ORDER}, got {order}")
    if raw and tagged:
        raise NslmError("--raw and --tagged exclude each other (the raw text has no classes)")
    console = Console(stderr=True)
    started = time.perf_counter()
    if raw:
        lines = raw_lines(locate_corpus(corpus)["train"])
        itos, unk = raw_vocabulary(lines)
        stream = raw_stream(lines, itos, unk)
        source = {"corpus": corpus, "stream": "raw"}
    else:
        prepared = prepare_corpus(corpus, classes, cache_root=prepared_dir)
        stream = prepared_stream(prepared, "train", tagged=tagged)
        source = {
            "corpus": corpus,
            "classes": classes,
            "stream": "tagged" if tagged else "prepared",
            "cache_key": prepared.meta.get("cache_key"),
        }
    fallback = (0.5, 1.0, 1.5) if discount_fallback else None
    model = build_model(stream, order, method, add_k=add_k, discount_fallback=fallback)
    model.meta.update(source)
    model.meta["build_seconds"] = round(time.perf_counter() - started, 3)
    model.save(out)
    sizes = ", ".join(f"{k}-grams {n:,}" for k, n in enumerate(model.sizes(), start=1))
    console.print(f"built {order}-gram {method} model in {model.meta['build_seconds']} s: {sizes}")
    console.print(f"saved to {out}")


@ngram_group.command("eval")
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.option(
    "--split",
    type=click.Choice(["train", "valid", "test"]),
    default="test",
    show_default=True,
    help="The split to score.",
)
@corpus_option(default=None, help="Corpus to score on [the model's own; wikitext-2 for ARPA].")
@classes_option(default=None, help="Classes of the per-class rows [the model's own; all].")
@click.option("--raw", is_flag=True, help="Score an ARPA MODEL on the raw text stream.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@out_option(
    "Also write the JSON to this file (--output is the same option).", aliases=("--output",)
)
@prepared_dir_option
def evaluate(
    model_path: Path,
    split: str,
    corpus: str | None,
    classes: str | None,
    raw: bool,
    as_json: bool,
    out: Path | None,
    prepared_dir: Path | None,
) -> None:
    """Perplexity of MODEL (a model directory or an ARPA file), per class on prepared corpora."""
    model = load_model(model_path)
    meta = model.meta
    stream_kind = "raw" if raw else meta.get("stream", "prepared")
    corpus = corpus or meta.get("corpus", DEFAULT_CORPUS)
    started = time.perf_counter()
    if stream_kind == "raw":
        lines = raw_lines(locate_corpus(corpus)[split])
        tokens = [t for line in lines for t in (*line, EOS)]
        log_probs = model.score_ids(model.encode(tokens), first_nan=False)
        oov = sum(t not in model.stoi for t in tokens)
        result: dict = {
            "Global": {"ppl": perplexity(log_probs), "tokens": len(tokens)},
            "oov_tokens": oov,
        }
    else:
        prepared = prepare_corpus(
            corpus, classes or meta.get("classes", "all"), cache_root=prepared_dir
        )
        log_probs = score_split(model, prepared, split, tagged=stream_kind == "tagged")
        result = class_perplexities(log_probs, prepared.splits[split], prepared)
    seconds = time.perf_counter() - started
    zero = int(np.count_nonzero(np.isneginf(log_probs)))
    payload = {
        "model": str(model_path),
        "method": meta.get("method"),
        "order": model.order,
        "stream": stream_kind,
        "split": split,
        "zero_probability_tokens": zero,
        "seconds": round(seconds, 3),
        "rows": result,
    }
    if out is not None:
        write_json_atomic(out, payload, indent=2)
    if as_json:
        click.echo(json_text(payload, indent=2))
        return
    table = Table(
        title=f"{model.order}-gram {meta.get('method')} on {corpus} {split} ({stream_kind})"
    )
    for col in ("row", "perplexity", "tokens"):
        table.add_column(col, justify="left" if col == "row" else "right")
    for name, row in result.items():
        if isinstance(row, dict):
            ppl = row["ppl"]
            shown = "inf" if ppl == math.inf else ("-" if math.isnan(ppl) else f"{ppl:,.2f}")
            table.add_row(name, shown, f"{row['tokens']:,}")
    Console().print(table)
    if stream_kind == "tagged":
        Console().print("tagged stream: a class row is the perplexity of P(class tag | history)")
    if zero:
        Console().print(
            f"{zero:,} tokens got probability 0 (unseen n-grams), so the perplexity is infinite"
        )


@ngram_group.command("export-arpa")
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@click.argument(
    "out_arg", metavar="[OUT]", required=False, type=click.Path(dir_okay=False, path_type=Path)
)
@out_option("The ARPA file to write (or give it as OUT).")
def export_arpa(model_path: Path, out_arg: Path | None, out: Path | None) -> None:
    """Write MODEL as an ARPA file -o OUT (readable by KenLM, SRILM, …)."""
    if out and out_arg and out != out_arg:
        raise NslmError(f"two outputs given: -o {out} and {out_arg}; give one")
    out = out or out_arg
    if out is None:
        raise NslmError("give the ARPA file to write: -o FILE")
    model = load_model(model_path)
    write_arpa(model, out)
    Console(stderr=True).print(f"wrote {out} ({', '.join(f'{n:,}' for n in model.sizes())})")


def _corpus_and_out(
    positional: tuple[str, ...], corpus: str | None, out: Path | None
) -> tuple[str, Path]:
    """``build CORPUS OUT``, ``build --corpus C -o OUT`` or a mix (``build --corpus C OUT``)."""
    given = list(positional)
    if len(given) > 2:
        raise NslmError(f"too many arguments: {' '.join(given)} (give --corpus and -o)")
    if corpus is None and given:
        corpus = given.pop(0)
    if out is None and given:
        out = Path(given.pop(0))
    if given:
        raise NslmError(f"unexpected argument {given[0]!r}: --corpus and -o are given")
    if corpus is None or out is None:
        raise NslmError("give the corpus and where to write: --corpus NAME|DIR -o DIR")
    return corpus, out


def load_model(path: Path) -> NgramModel:
    """A saved model directory, or an ARPA file."""
    path = Path(path)
    if path.is_dir():
        return NgramModel.load(path)
    if path.is_file():
        return read_arpa(path)
    raise NslmError(f"no n-gram model at {path}")
