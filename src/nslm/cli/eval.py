"""``nslm eval RUN``: global perplexity of every head, or, with micro-models, the paper's
Tables 2 and 3 (plus the extra columns of :mod:`nslm.cli.paper_extras`); on the run's corpus,
on any text file (``--text``) or on another train/valid/test directory (``--corpus``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nslm.cli.intervention_options import INTERVENTION_KEYS, intervention_options
from nslm.cli.options import (
    choice_option,
    corpus_option,
    input_format_option,
    model_option,
    out_option,
    run_argument,
    split_option,
    text_option,
    use_nslm,
)
from nslm.cli.paper_extras import Factory, PaperExtras, paper_options
from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.data.corpus import Split
    from nslm.data.fixed_vocab import TextSplit
    from nslm.evaluation.report import EvalOptions
    from nslm.mixtures.cache_column import CacheGrid
    from nslm.runs.kinds import RunRef

SPLITS = ("valid", "test")


def eval_tables(
    run: Path,
    splits: Sequence[str],
    options: EvalOptions | None = None,
    extra: Sequence[Factory] = (),
    *,
    keep_features: bool = False,
    best: CacheGrid | None = None,
    out: Path | None = None,
) -> dict:
    """Tables 2/3 of RUN for each split (λ tuned on valid); RUN/tables_<split>.json.

    ``options``: the λ objective, a prefix of each split, and what --text or --corpus
    scores instead of the run's splits, with a previous evaluation's λ
    (:class:`nslm.evaluation.report.EvalOptions`). ``extra``: factories that build a column
    source (a 5-gram, a cache, …) for the loaded run and its scorer, whose one backbone pass
    per split they all share. ``best`` (its cache grid) adds the NSLM-best column
    (:mod:`nslm.mixtures.best_column`), which mixes every model column before it.
    """
    from nslm.evaluation.open_report import open_tables
    from nslm.evaluation.report import EvalOptions, evaluate_run, render
    from nslm.files.atomic import write_json_atomic
    from nslm.runs.context_micro import has_context_models, load_run_context
    from nslm.runs.open import open_run
    from nslm.runs.open_micro import open_vocabulary, run_new_mass

    options = options or EvalOptions()
    opened = open_run(run, micro="plain")
    loaded, micro = opened.loaded, opened.micro
    context = has_context_models(run) and options.lambdas is None  # its λ is tuned on valid
    scorer = loaded.scorer(keep_features=keep_features)
    sources = [make(loaded, scorer) for make in extra]
    context_source = None
    if context:  # RUN/micro_context.json: the NSLM-context column, first of the extras
        from nslm.evaluation.context_column import ContextSource

        click.echo("eval: with the context-aware micro-models (NSLM-context)", err=True)
        context_source = ContextSource(scorer, load_run_context(loaded, micro))
        sources.insert(0, context_source)
    if best is not None:  # after every model it mixes, before the rarity recorder that reads it
        from nslm.evaluation.rarity import RarityRecorder
        from nslm.mixtures.best_column import BestSource
        from nslm.mixtures.mixture_weights import class_next_rates

        last = len(sources) - bool(sources and isinstance(sources[-1], RarityRecorder))
        rates = class_next_rates(loaded.corpus.train, len(loaded.corpus.vocab))
        sources.insert(last, BestSource(scorer, context_source, best, rates))
    # every token counted too (open vocabulary): the texts with their token strings
    open_texts = options.plain
    if open_texts is None:
        open_texts = _own_texts(loaded, ("valid", *splits))
    opened_vocab = open_vocabulary(loaded)
    results = {}
    for split in splits:
        click.echo(f"eval: scoring {split} …", err=True)
        result = evaluate_run(
            loaded, micro, split=split, options=options, extra=sources, scorer=scorer
        )
        # every token counted too: the open-vocabulary tables (docs/nslm.md)
        if opened_vocab is not None:
            open_models, spelling = opened_vocab
            result["open"] = open_tables(
                scorer,
                micro,
                open_models,
                spelling,
                open_texts,
                loaded.corpus,
                result,
                run_new_mass(loaded),
            )
        path = out if out is not None else Path(run) / f"tables_{split}.json"
        write_json_atomic(path, result)
        click.echo(render(result))
        click.echo(f"wrote {path}\n")
        results[split] = result
    return results


@click.command("eval")
@run_argument()
@split_option(SPLITS, help="Splits to score: valid, test or both [valid,test].")
@model_option("Tables 2 and 3")
@text_option(
    "Score this text file instead of a corpus split, with the run's vocabulary "
    "and class rules (λ from the run's last eval, else tuned on its valid)."
)
@corpus_option(
    default=None,
    help="Score another corpus (a known name, or a directory of train/valid/test files) "
    "prepared with the run's vocabulary and class rules; λ is tuned on its valid "
    "[the run's own].",
)
@input_format_option
@out_option("Where the tables' JSON goes [RUN/tables_<split>.json, RUN/tables_text.json].")
@choice_option(
    "--lambda-objective",
    choices=["table", "global"],
    default="table",
    help="With the NSLM: tune the ensemble's λ on valid "
    "Numbers/Locations (table) or Global perplexity.",
)
@click.option(
    "--prefix-tokens",
    "max_tokens",
    type=int,
    default=0,
    metavar="N",
    help="Score only each split's first N tokens (0 = all).",
)
@click.option(
    "--ngram",
    "ngram_order",
    type=int,
    default=None,
    metavar="N",
    help="Add an N-gram column (modified KN on train) and, with the NSLM, an "
    "N-gram NSLM column; without it, the N-gram's global perplexity.",
)
@paper_options
@intervention_options
def eval_command(
    run: RunRef,
    splits: tuple[str, ...],
    model_kind: str = "auto",
    text_file: Path | None = None,
    corpus: str | None = None,
    out: Path | None = None,
    lambda_objective: str = "table",
    max_tokens: int = 0,
    ngram_order: int | None = None,
    input_format: str = "plain",
    **paper: Any,
) -> None:
    """Score a trained RUN: the paper's Tables 2 and 3, or each head's global perplexity.

    With the NSLM (RUN/micro.json, from 'nslm micro fit RUN'): NNLM, HNLM, NSLM ensemble
    and NSLM-pure per class, in RUN/tables_<split>.json. With the neural heads only: their
    global perplexity, in RUN/eval.json. Lower perplexity is better. A --text file or a
    --corpus directory is plain text (--input-format tokenized: already in the corpus's
    tokens); it is also scored in bits per byte, word perplexity and OOV-adjusted perplexity,
    which do not depend on the tokenization.
    """
    from nslm.evaluation.report import EvalOptions
    from nslm.ngram.counting import MAX_ORDER

    splits = splits or SPLITS
    intervene = _intervention_options(paper, model_kind)
    if run.kind in ("transformer", "word_pos"):
        extras_asked = bool(corpus or ngram_order or max_tokens or PaperExtras(**paper).wanted)
        _eval_own_kind(run, splits, text_file, out, extras_asked)
        return
    if ngram_order is not None and not 1 <= ngram_order <= MAX_ORDER:
        raise NslmError(f"--ngram must be between 1 and {MAX_ORDER}, got {ngram_order}")
    if text_file is not None and corpus is not None:
        raise NslmError("--text and --corpus are two ways to say what to score: give one")
    extras = PaperExtras(**paper)  # --cache, --crnn, --by-rarity (checked before any work)
    outside = text_file is not None or corpus is not None
    if extras.wanted and (model_kind == "neural" or outside):
        what = "--model neural" if model_kind == "neural" else "--text/--corpus"
        raise NslmError(
            f"--cache, --crnn, --best and --by-rarity need the run's NSLM tables, not {what}"
        )
    if (ngram_order or extras.wanted) and outside:
        raise NslmError("--ngram and the paper's extras score the run's own corpus only")
    if extras.wanted and not (run / "micro.json").is_file():
        raise NslmError(
            f"--cache, --crnn, --best and --by-rarity need RUN/micro.json: run "
            f"'nslm micro fit {run}' first"
        )
    options = EvalOptions(lambda_objective=lambda_objective, max_tokens=max_tokens)
    splits, options = _outside_splits(run, options, text_file, corpus, splits, input_format)
    if extras.best and ngram_order is None:
        ngram_order = 5  # the n-gram and n-gram NSLM columns NSLM-best mixes in
    if extras.wanted or use_nslm(run, model_kind, "eval"):
        factories = extras.factories(_ngram_factories(ngram_order))
        eval_tables(
            run,
            splits,
            options,
            factories,
            keep_features=extras.keep_features,
            best=extras.best_grid if extras.best else None,
            out=out,
        )
        extras.finish(run)
        return
    _eval_heads(run, splits, options, ngram_order, out, intervene)


def _intervention_options(paper: dict[str, Any], model_kind: str) -> dict[str, Any]:
    """--ablate, --clamp, --steer (taken out of ``paper``): a byte LM's neural heads only."""
    from nslm.cli.intervention_options import wants_intervention

    intervene = {key: paper.pop(key) for key in INTERVENTION_KEYS}
    if wants_intervention(intervene) and (model_kind == "nslm" or PaperExtras(**paper).wanted):
        raise NslmError("--ablate, --clamp and --steer score the neural heads of a byte LM")
    return intervene


def _ngram_factories(order: int | None) -> list[Factory]:
    if not order:
        return []
    from nslm.ngram.columns import ngram_source

    make = ngram_source(order)
    return [lambda loaded, _scorer: make(loaded)]


# -- what --text and --corpus score, and the run's own texts ------------------------------


def _outside_splits(
    run: RunRef,
    options: EvalOptions,
    text_file: Path | None,
    corpus_dir: str | None,
    splits: Sequence[str],
    input_format: str = "plain",
) -> tuple[tuple[str, ...], EvalOptions]:
    """What --text / --corpus score: the names of the splits to score, and ``options`` with
    those splits (the outside text prepared with the run's vocabulary and class rules,
    :mod:`nslm.data.fixed_vocab`), the prepared texts behind them (none for a byte LM, which
    reads bytes) and the λ a previous evaluation saved."""
    if text_file is None and corpus_dir is None:
        return tuple(splits), options
    if run.kind == "byte":
        texts, names = _byte_splits(text_file, corpus_dir, splits)
        return names, replace(options, texts=texts)
    from nslm.data.fixed_vocab import prepare_corpus_dir, prepare_text_file
    from nslm.runs.assets import read_run_assets
    from nslm.runs.lambdas import saved_lambdas

    corpus = read_run_assets(run) if (run / "assets.json").is_file() else None
    if corpus is None:
        from nslm.runs.load import load_run

        corpus = load_run(run).corpus
    if corpus_dir is not None:
        prepared = prepare_corpus_dir(corpus, corpus_dir, input_format)
        for part in prepared.values():
            click.echo(f"eval: {part.describe()}", err=True)
        texts = {name: part.split for name, part in prepared.items()}
        return tuple(splits), replace(options, texts=texts, plain=prepared)
    text = prepare_text_file(corpus, text_file, "text", input_format)
    click.echo(f"eval: {text.describe()}", err=True)
    saved = saved_lambdas(run)
    lambdas = None
    if saved is not None:
        lambdas = {"global": saved.lambda_global, **saved.tables}
        click.echo(f"eval: λ of the ensemble from {saved.path}", err=True)
    elif (run / "micro.json").is_file():
        click.echo(
            "eval: no saved λ (run 'nslm eval RUN' once): tuning on the run's valid", err=True
        )
    given = {"text": text.split}
    return ("text",), replace(options, texts=given, plain={"text": text}, lambdas=lambdas)


def _own_texts(loaded, splits: Sequence[str]) -> dict[str, TextSplit]:
    """The run's own corpus splits with their token strings (the open-vocabulary tables read
    the strings that ``<unk>`` hides), prepared from the corpus files as training did."""
    from nslm.data.fixed_vocab import prepare_text_file
    from nslm.data.locate import locate_corpus

    for split in splits:  # the corpus the run's splits come from, or its one-line error
        loaded.corpus.splits[split]  # the lookup does the loading
    paths = locate_corpus(loaded.cfg.corpus, download=False)
    return {
        s: prepare_text_file(loaded.corpus, paths[s], s, "tokenized") for s in dict.fromkeys(splits)
    }


def _byte_splits(
    text_file: Path | None, corpus_dir: str | None, splits: Sequence[str]
) -> tuple[dict[str, Split], tuple[str, ...]]:
    """A byte LM reads any file as its bytes (UTF-8 or not), one article per line."""
    from nslm.byte_lm.data import DIR_PREFIX, byte_split, prepare_byte_corpus
    from nslm.data.textfile import read_bytes

    if corpus_dir is not None:
        prepared = prepare_byte_corpus(f"{DIR_PREFIX}{corpus_dir}")
        return {name: prepared.splits[name] for name in splits}, tuple(splits)
    lines = read_bytes(text_file).split(b"\n")  # type: ignore[arg-type]
    if lines[-1] == b"":
        lines.pop()
    return {"text": byte_split("text", lines)}, ("text",)


def _eval_heads(
    run: Path,
    splits: Sequence[str],
    options: EvalOptions,
    ngram_order: int | None,
    out_path: Path | None = None,
    intervene: dict[str, Any] | None = None,
) -> None:
    """Global perplexity of each neural head (and an n-gram's); RUN/eval.json. The splits
    are the run's or those of ``options`` (its λ objective and λ have no use here); a
    prepared text (``options.plain``) also gets its tokenization-free figures under
    ``"text"``. A byte LM with ``intervene`` (--ablate, --clamp, --steer) is scored so:
    RUN/eval-intervened.json."""
    from nslm.byte_lm.intervention import set_intervention
    from nslm.cli.intervention_options import intervention_of, wants_intervention
    from nslm.evaluation.text_scores import render_text_figures, text_figures
    from nslm.files.atomic import write_json_atomic
    from nslm.runs.open import open_run
    from nslm.scores.passes import head_of
    from nslm.scores.spelling import fit_spelling

    loaded = open_run(run, micro="none").loaded
    intervened = wants_intervention(intervene or {})
    if intervened:
        set_intervention(loaded.model, intervention_of(loaded, intervene))
    ngram = None
    if ngram_order:
        from nslm.ngram.columns import ngram_global, ngram_source

        ngram = ngram_source(ngram_order, with_nslm=False)(loaded)
    scorer = loaded.scorer()
    max_tokens, plain = options.max_tokens, options.plain
    out: dict[str, dict[str, float]] = {}
    for split in splits:
        given = (options.texts or {}).get(split)
        part = head_of(given if given is not None else loaded.corpus.splits[split], max_tokens)
        scores = scorer.score(part, tuple(loaded.cfg.heads))
        out[split] = scores.head_figures(loaded.cfg.heads)
        if ngram is not None:  # beside the heads, on the same positions
            out[split][f"ppl_{ngram_order}-gram"] = ngram_global(ngram, part)
        if plain and split in plain and not max_tokens:
            heads = {h.upper(): getattr(scores, h) for h in loaded.cfg.heads}
            out[split]["text"] = text_figures(heads, plain[split], fit_spelling(loaded.corpus))
    path = out_path or run / ("eval-intervened.json" if intervened else "eval.json")
    write_json_atomic(path, out)
    for split, row in out.items():
        text = row.pop("text", None)
        if text is not None:
            click.echo(render_text_figures(text))
            row["text"] = text
        if "bits_per_byte" in row:
            click.echo(
                f"{split}: {row['bits_per_byte']:.3f} bits per byte (lower is better), "
                f"next-byte accuracy {row['accuracy']:.3f}"
            )
            continue
        shown = "  ".join(f"{k.removeprefix('ppl_').upper()} {v:.2f}" for k, v in row.items())
        click.echo(f"{split}: global perplexity (lower is better)  {shown}")
    click.echo(f"wrote {path}")


def _eval_word_pos(run: Path, splits: Sequence[str], out: Path | None) -> None:
    """The comparison table of a word+POS run (docs/word-pos.md); RUN/eval.json."""
    from nslm.files.atomic import write_json_atomic
    from nslm.word_pos.evaluation import evaluate_word_pos, render_word_pos

    click.echo(f"eval: scoring {', '.join(splits)} (gold and own tag histories) …", err=True)
    results = evaluate_word_pos(run, tuple(splits))
    path = out if out is not None else run / "eval.json"
    write_json_atomic(path, results)
    click.echo(render_word_pos(results))
    click.echo(f"wrote {path}")


def _eval_own_kind(
    run: RunRef,
    splits: Sequence[str],
    text_file: Path | None,
    out: Path | None,
    extras_asked: bool,
) -> None:
    """A word+POS run on its own tagged corpus; a Transformer run on a --text file."""
    if run.kind == "word_pos":
        if text_file or extras_asked:
            raise NslmError(
                "a word+POS run is scored on its own tagged corpus: no --text, "
                "--corpus, --ngram, --prefix-tokens or the paper's extras"
            )
        _eval_word_pos(run, splits, out)
        return
    if text_file is None or extras_asked:
        raise NslmError(
            "a Transformer run is scored on a text: give --text FILE, and no --corpus, "
            "--ngram, --prefix-tokens or the paper's extras (docs/transformer.md)"
        )
    _eval_transformer(run, text_file, out)


def _eval_transformer(run: RunRef, text_file: Path, out: Path | None) -> None:
    """Bits per byte of a plain text under a Transformer run, alone and with micro-models
    (overall, Numbers, Locations, each class; word perplexity); RUN/eval_text.json."""
    from nslm.data.textfile import read_text
    from nslm.files.atomic import write_json_atomic
    from nslm.transformer.commands import eval_text, open_transformer_run
    from nslm.transformer.tables import render

    figures = eval_text(open_transformer_run(run.path), read_text(text_file), str(text_file))
    path = out if out is not None else run / "eval_text.json"
    write_json_atomic(path, figures)
    click.echo(render(figures))
    click.echo(f"wrote {path}")
