"""``nslm ngram build|eval|export-arpa``: n-gram LMs scored by the same per-class evaluator."""

from __future__ import annotations

import math
import time
from pathlib import Path

import click
import numpy as np
from rich.console import Console
from rich.table import Table

from nslm.cli.options import (
    DEFAULT_CORPUS,
    choice_option,
    classes_option,
    corpus_option,
    json_option,
    out_dir_option,
    out_option,
    prepared_dir_option,
    split_option,
    text_option,
)
from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepare_corpus
from nslm.errors import NslmError
from nslm.evaluation.class_perplexity import class_perplexities, perplexity
from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import json_text
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
@corpus_option()
@out_dir_option("The directory to write the model to (required).")
@click.option("--order", type=int, default=5, show_default=True, help=f"n, 1..{MAX_ORDER}.")
@choice_option(
    "--method",
    choices=METHODS,
    default="kn",
    help="kn: modified Kneser-Ney; mle: maximum likelihood; add-k: add --add-k.",
)
@click.option(
    "--add-k",
    "add_k",
    type=float,
    default=1.0,
    show_default=True,
    help="The constant k that --method add-k adds to every count.",
)
@classes_option(help="Which classes the corpus is prepared with.")
@click.option("--tagged", is_flag=True, help="Replace class tokens by their class tags.")
@click.option(
    "--raw", is_flag=True, help="The corpus as raw text, as lmplz reads it (no preparation)."
)
@click.option(
    "--discount-fallback",
    is_flag=True,
    help="Use KN discounts 0.5 1 1.5 where count-of-counts cannot give them (as lmplz).",
)
@prepared_dir_option
def build(
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
    """Build an n-gram model of the corpus's train split into the directory --out-dir DIR."""
    corpus = corpus or DEFAULT_CORPUS
    if out is None:
        raise NslmError("give the directory to write the model to: --out-dir DIR")
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
@split_option(
    ("train", "valid", "test"),
    help="Splits to score: train, valid, test [test]; with several, a table each and the "
    "JSON keyed by split.",
)
@corpus_option(default=None, help="Corpus to score on [the model's own; wikitext-2 for ARPA].")
@classes_option(default=None, help="Classes of the per-class rows [the model's own; all].")
@click.option(
    "--raw",
    is_flag=True,
    help="The corpus as raw text, as lmplz reads it (no preparation): for an ARPA MODEL.",
)
@text_option(
    "Score this plain text file instead of a corpus split: each line a sentence, a word "
    "outside the vocabulary scored as <unk> (not proper); bits per byte and word perplexity."
)
@json_option("Print JSON instead of a table.")
@out_option("Also write the JSON to this file.")
@prepared_dir_option
def evaluate(
    model_path: Path,
    splits: tuple[str, ...],
    corpus: str | None,
    classes: str | None,
    raw: bool,
    text_file: Path | None,
    as_json: bool,
    out: Path | None,
    prepared_dir: Path | None,
) -> None:
    """Perplexity of MODEL (a model directory or an ARPA file), per class on prepared corpora,
    or of a plain text (--text)."""
    if text_file is not None:
        if splits or corpus or raw:
            raise NslmError("--text scores a file: no --split, --corpus or --raw with it")
        _eval_text(model_path, text_file, as_json, out)
        return
    model = load_model(model_path)
    meta = model.meta
    stream_kind = "raw" if raw else meta.get("stream", "prepared")
    corpus = corpus or meta.get("corpus", DEFAULT_CORPUS)
    classes = classes or meta.get("classes", "all")
    payloads = {}
    for split in splits or ("test",):
        payloads[split] = _score(
            model, str(model_path), corpus, classes, prepared_dir, split, stream_kind
        )
    # one split: its payload; several: keyed by split
    document = next(iter(payloads.values())) if len(payloads) == 1 else payloads
    if out is not None:
        write_json_atomic(out, document, indent=2)
    if as_json:
        click.echo(json_text(document, indent=2))
        return
    for split, payload in payloads.items():
        _print_table(model, corpus, split, stream_kind, payload)


def _eval_text(model_path: Path, text_file: Path, as_json: bool, out: Path | None) -> None:
    """A plain text's figures under the model (:meth:`nslm.api.NgramLM.score`)."""
    from nslm.api import load
    from nslm.data.textfile import read_text

    scored = load(model_path).score(read_text(text_file))
    payload = {
        "text": str(text_file),
        "tokens": len(scored.tokens),
        "bytes": scored.bytes,
        "words": scored.words,
        "nats": scored.nats,
        "perplexity": scored.perplexity,
        "bits_per_byte": scored.bits_per_byte,
        "word_perplexity": scored.word_perplexity,
    }
    if out is not None:
        write_json_atomic(out, payload, indent=2)
    if as_json:
        click.echo(json_text(payload, indent=2))
        return
    click.echo(
        f"{text_file}: {payload['tokens']:,} tokens, perplexity {payload['perplexity']:.2f}, "
        f"{payload['bits_per_byte']:.4f} bits per byte, word perplexity "
        f"{payload['word_perplexity']:.2f} (<unk> as a word: not proper)"
    )


def _score(
    model: NgramModel,
    model_path: str,
    corpus: str,
    classes: str,
    prepared_dir: Path | None,
    split: str,
    stream_kind: str,
) -> dict:
    """The perplexity rows of one split, with what was scored and how long it took."""
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
        prepared = prepare_corpus(corpus, classes, cache_root=prepared_dir)
        log_probs = score_split(model, prepared, split, tagged=stream_kind == "tagged")
        result = class_perplexities(log_probs, prepared.splits[split], prepared)
    seconds = time.perf_counter() - started
    return {
        "model": model_path,
        "method": model.meta.get("method"),
        "order": model.order,
        "stream": stream_kind,
        "split": split,
        "zero_probability_tokens": int(np.count_nonzero(np.isneginf(log_probs))),
        "seconds": round(seconds, 3),
        "rows": result,
    }


def _print_table(
    model: NgramModel, corpus: str, split: str, stream_kind: str, payload: dict
) -> None:
    method = model.meta.get("method")
    table = Table(title=f"{model.order}-gram {method} on {corpus} {split} ({stream_kind})")
    for col in ("row", "perplexity", "tokens"):
        table.add_column(col, justify="left" if col == "row" else "right")
    for name, row in payload["rows"].items():
        if isinstance(row, dict):
            ppl = row["ppl"]
            shown = "inf" if ppl == math.inf else ("-" if math.isnan(ppl) else f"{ppl:,.2f}")
            table.add_row(name, shown, f"{row['tokens']:,}")
    Console().print(table)
    if stream_kind == "tagged":
        Console().print("tagged stream: a class row is the perplexity of P(class tag | history)")
    zero = payload["zero_probability_tokens"]
    if zero:
        Console().print(
            f"{zero:,} tokens got probability 0 (unseen n-grams), so the perplexity is infinite"
        )


@ngram_group.command("export-arpa")
@click.argument("model_path", metavar="MODEL", type=click.Path(path_type=Path))
@out_option("The ARPA file to write.", required=True)
def export_arpa(model_path: Path, out: Path) -> None:
    """Write MODEL as an ARPA file -o FILE (readable by KenLM, SRILM, …)."""
    model = load_model(model_path)
    write_arpa(model, out)
    Console(stderr=True).print(f"wrote {out} ({', '.join(f'{n:,}' for n in model.sizes())})")


def load_model(path: Path) -> NgramModel:
    """A saved model directory, or an ARPA file."""
    path = Path(path)
    if path.is_dir():
        return NgramModel.load(path)
    if path.is_file():
        return read_arpa(path)
    raise NslmError(f"no n-gram model at {path}")
