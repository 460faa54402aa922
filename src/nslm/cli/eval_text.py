"""What ``nslm eval RUN --text FILE`` and ``--corpus DIR`` score: the outside text prepared
with the run's vocabulary and class rules (:mod:`nslm.data.fixed_vocab`), or read as bytes
by a byte LM, and the λ a previous evaluation saved; the run's own splits with their token
strings (:func:`own_texts`). Only cli/eval.py imports this module."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from nslm.data.corpus import Split
    from nslm.data.fixed_vocab import TextSplit
    from nslm.runs.kinds import RunRef


def outside_splits(
    run: RunRef,
    text_file: Path | None,
    corpus_dir: str | None,
    splits: Sequence[str],
    input_format: str = "plain",
) -> tuple[
    dict[str, Split] | None, dict[str, TextSplit] | None, tuple[str, ...], dict[str, float] | None
]:
    """For --text / --corpus: the splits to score by name, the prepared texts behind them
    (none for a byte LM, which reads bytes), their names, and the saved λ."""
    if text_file is None and corpus_dir is None:
        return None, None, tuple(splits), None
    if run.kind == "byte":
        texts, names, _ = _byte_splits(text_file, corpus_dir, splits)
        return texts, None, names, None
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
        return texts, dict(prepared), tuple(splits), None
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
    return {"text": text.split}, {"text": text}, ("text",), lambdas


def own_texts(loaded, splits: Sequence[str]) -> dict[str, TextSplit]:
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
) -> tuple[dict[str, Split], tuple[str, ...], None]:
    """A byte LM reads any file as its bytes (UTF-8 or not), one article per line."""
    from nslm.byte_lm.data import DIR_PREFIX, byte_split, prepare_byte_corpus
    from nslm.data.textfile import read_bytes

    if corpus_dir is not None:
        prepared = prepare_byte_corpus(f"{DIR_PREFIX}{corpus_dir}")
        return {name: prepared.splits[name] for name in splits}, tuple(splits), None
    lines = read_bytes(text_file).split(b"\n")  # type: ignore[arg-type]
    if lines[-1] == b"":
        lines.pop()
    return {"text": byte_split("text", lines)}, ("text",), None
