"""Click options and checks that several commands share, so that one job has one spelling.

The vocabulary (tests/cli/test_cli_vocabulary.py holds it as a table and checks the command tree
against it): each concept one spelling, each spelling one concept, no hidden aliases.

- the corpus: ``--corpus NAME|DIR``, on every command that reads one;
- where output goes: ``-o/--out FILE`` for a file, ``--out-dir DIR`` for a folder of files,
  ``--run-dir DIR`` for the training run that ``train`` and ``demo`` write;
- a config file: ``--config FILE``;
- lists: every list option takes repetition and commas alike (``--only year,city`` is
  ``--only year --only city``), through :func:`names_callback`;
- splits: ``--split SPLIT[,SPLIT]``, a list;
- prepared corpora: ``--prepared-dir`` (``--cache`` is the neural cache of ``nslm eval``);
- a training run: :data:`run_argument`, one message for a path that is not a run;
- text: ``--input-format plain|tokenized`` for what a command reads, ``--output-format
  plain|tokenized`` for the words it writes (:mod:`nslm.data.text`);
- interventions in a byte LM (``--ablate``, ``--clamp``, ``--steer``, …): their own module,
  :mod:`nslm.cli.intervention_options`;
- each kind of option is built in one place, so that it reads and shows the same on every
  command: a file (:func:`file_option`), a folder (:func:`dir_option`), one of a few names
  (:func:`choice_option`), a whole number in a range (:func:`int_range_option`), ``--json``
  (:func:`json_option`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from nslm.data.tagging import CLASS_CHOICES
from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.runs.kinds import RunRef

DEFAULT_CORPUS = "wikitext-2"


def split_names(values: Iterable[str] | str | None) -> list[str]:
    """``("year,city", "<month>")`` → ``["year", "city", "month"]``: commas and repetition
    alike; class names may be written with their angle brackets."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [n.strip().strip("<>") for v in values for n in v.split(",") if n.strip()]


def names_callback(choices: Sequence[str] | None = None) -> Callable[..., tuple[str, ...]]:
    """A click callback flattening a ``multiple=True`` option into names, checked against
    ``choices`` when given."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> tuple[str, ...]:
        names = tuple(split_names(value))
        if choices is not None:
            for name in names:
                if name not in choices:
                    raise click.BadParameter(
                        f"{name!r} is not one of {', '.join(choices)}", ctx, param
                    )
        return names

    return callback


def list_option(*flags: str, help: str, choices: Sequence[str] | None = None, **attrs: Any):
    """A repeatable option that also splits commas; its value is a tuple of names."""
    metavar = attrs.pop("metavar", "NAME[,NAME…]")
    return click.option(
        *flags,
        multiple=True,
        metavar=metavar,
        callback=names_callback(choices),
        help=help,
        **attrs,
    )


# -- the kinds of option ---------------------------------------------------------------------


def file_option(*flags: str, help: str, **attrs: Any):
    """An option naming a file (a folder is refused), as a :class:`~pathlib.Path`: FILE."""
    return _path_option(flags, click.Path(dir_okay=False, path_type=Path), help, attrs)


def text_option(help: str):
    """``--text FILE``: a text file a command scores instead of a corpus split."""
    return click.option(
        "--text", "text_file", type=click.Path(path_type=Path), default=None, help=help
    )


def dir_option(*flags: str, help: str, **attrs: Any):
    """An option naming a folder (a file is refused), as a :class:`~pathlib.Path`: DIR."""
    folder = click.Path(file_okay=False, path_type=Path)
    return _path_option(flags, folder, help, {"metavar": "DIR", **attrs})


def _path_option(flags: Sequence[str], path: click.Path, help: str, attrs: dict[str, Any]):
    """A path option, None unless given (or unless ``attrs`` has another default)."""
    return click.option(*flags, type=path, help=help, **{"default": None, **attrs})


def choice_option(*flags: str, choices: Sequence[str], default: str | None, help: str):
    """An option taking one of ``choices``; its default, when it has one, shown."""
    return click.option(
        *flags,
        type=click.Choice(choices),
        default=default,
        show_default=default is not None,
        help=help,
    )


def int_range_option(
    *flags: str,
    low: int = 1,
    high: int | None = None,
    default: int | None = None,
    help: str,
    **attrs: Any,
):
    """An integer option from ``low`` (to ``high``); its default, when it has one, shown."""
    return click.option(
        *flags,
        type=click.IntRange(low, high),
        default=default,
        show_default=default is not None,
        help=help,
        **attrs,
    )


def json_option(help: str):
    """``--json`` → ``as_json``: print JSON instead of the text a command prints."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def prepared_dir_option(command: Callable) -> Callable:
    """``--prepared-dir DIR`` → ``prepared_dir``."""
    return dir_option(
        "--prepared-dir",
        help="Where prepared corpora are cached [$NSLM_CACHE_DIR or ~/.cache/nslm/prepared].",
    )(command)


def corpus_option(default: str | None = DEFAULT_CORPUS, help: str | None = None):
    shown = f" [{default}]" if default else ""
    return click.option(
        "--corpus",
        default=None,
        metavar="NAME|DIR",
        help=help or f"A known corpus name, or a directory of train/valid/test files{shown}.",
    )


def classes_option(default: str | None = "all", help: str = "Which classes to tag."):
    return choice_option("--classes", choices=CLASS_CHOICES, default=default, help=help)


def out_option(help: str, *, required: bool = False):
    """``-o/--out FILE``: the file a command writes."""
    return file_option("-o", "--out", "out", metavar="FILE", required=required, help=help)


def out_dir_option(help: str):
    """``--out-dir DIR``: the folder a command writes its files into (→ ``out``)."""
    return dir_option("--out-dir", "out", help=help)


def run_dir_option(help: str, default: Path | None = None):
    """``--run-dir DIR``: the training run a command writes (train, demo)."""
    return dir_option(
        "--run-dir", "run_dir", default=default, show_default=default is not None, help=help
    )


def config_option(help: str):
    """``--config FILE``: the TOML file that configures a command's run."""
    return file_option("--config", metavar="FILE", help=help)


def split_option(choices: Sequence[str], help: str):
    """``--split SPLIT[,SPLIT]``: the splits a command scores (a list)."""
    return list_option("--split", "splits", choices=choices, metavar="SPLIT[,SPLIT]", help=help)


# -- which model: eval and generate -----------------------------------------------------------

MODEL_CHOICES = ("auto", "nslm", "neural")


def model_option(what: str) -> Callable:
    """``--model auto|nslm|neural``: which LM a command on a run uses (eval, generate)."""
    return choice_option(
        "--model",
        "model_kind",
        choices=MODEL_CHOICES,
        default="auto",
        help=f"nslm: {what} through the NSLM (needs RUN/micro.json, from 'nslm micro fit "
        "RUN'); neural: the neural heads only; auto: nslm if RUN/micro.json exists.",
    )


def use_nslm(run: RunRef, model_kind: str, command: str) -> bool:
    """Whether the NSLM is used; with ``auto``, say which and why on stderr (one line)."""
    micro = run / "micro.json"
    if model_kind == "nslm":
        if run.kind == "byte":
            raise NslmError(f"{run} is a byte LM: it has no classes, so no NSLM")
        if not run.has_micro:
            raise NslmError(f"the NSLM needs {micro}: run 'nslm micro fit {run}' first")
        return True
    if model_kind == "neural" or run.kind == "byte":  # a byte LM has no classes: no NSLM
        return False
    if run.has_micro:
        click.echo(
            f"{command}: using the NSLM: {micro} found (--model neural: heads only)", err=True
        )
        return True
    click.echo(
        f"{command}: no {micro}: neural heads only; run 'nslm micro fit {run}' for the NSLM",
        err=True,
    )
    return False


# -- models on disk --------------------------------------------------------------------------


class RunDir(click.ParamType):
    """A training run directory (one holding config.json) or, with ``ngram``, also an n-gram
    model: converted once to a :class:`~nslm.runs.kinds.RunRef` that knows its kind."""

    name = "run"

    def __init__(self, ngram: bool = False) -> None:
        self.ngram = ngram

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        from nslm.runs.kinds import RunRef, locate_run

        if isinstance(value, RunRef):
            return value
        # NslmError, not click's BadParameter: the message is the same for every command.
        return locate_run(value, ngram=self.ngram)


def run_argument(required: bool = True, ngram: bool = False):
    return click.argument("run", type=RunDir(ngram), required=required)


# -- text in and out: one spelling on every command that reads or writes words (docs/text.md)

TEXT_FORMATS = ("plain", "tokenized")
input_format_option = choice_option(
    "--input-format",
    choices=TEXT_FORMATS,
    default="plain",
    help="How the text is written: plain (tokenized here by the run's "
    "rules, e.g. '1914,' reads as '1914 ,') or tokenized (already in the corpus's tokens, "
    "e.g. WikiText's '1 @,@ 000'; read as it is).",
)
output_format_option = choice_option(
    "--output-format",
    choices=TEXT_FORMATS,
    default="plain",
    help="How words are written back: plain text, or the model's tokens "
    "(as the corpus writes them).",
)


def open_vocab_option(what: str):
    """``--open-vocab/--closed-vocab``: NSLM-open (RUN/open.json), where members outside the
    vocabulary take part; the default is open when the run has it."""
    return click.option(
        "--open-vocab/--closed-vocab",
        "open_vocab",
        default=None,
        help=f"{what} NSLM-open, where years, numbers and places outside the vocabulary take "
        "part (new members marked *), from RUN/open.json ('nslm micro fit RUN' writes it) "
        "[open when RUN/open.json exists, else closed].",
    )


micro_kind_option = choice_option(
    "--micro",
    "micro_kind",
    choices=("auto", "plain", "context"),
    default="auto",
    help="The micro-models: the context-aware ones when RUN has them "
    "(auto; 'nslm micro fit RUN --context'), the plain ones, or the context-aware ones.",
)
