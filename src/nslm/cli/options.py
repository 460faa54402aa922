"""Click options and checks that several commands share, so that one job has one spelling.

- the corpus: ``--corpus NAME|DIR`` (``data prepare``, ``data stats`` and ``ngram build``
  also take it as a positional, as documented);
- what is written: ``-o/--out``;
- lists: every list option takes repetition and commas alike (``--only year,city`` is
  ``--only year --only city``), through :func:`names_callback`;
- prepared corpora: ``--prepared-dir`` (``--cache-dir`` stays accepted, hidden, since
  ``--cache`` means the neural cache of ``nslm eval``);
- a training run: :data:`run_argument`, one message for a path that is not a run;
- text: ``--input-format plain|tokenized`` for what a command reads, ``--output-format
  plain|tokenized`` for the words it writes (:mod:`nslm.data.text`);
- interventions in a byte LM (``--ablate``, ``--clamp``, ``--steer``, …): their own module,
  :mod:`nslm.cli.intervention_options`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from nslm.data.tagging import CLASS_CHOICES
from nslm.errors import NslmError

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


def hidden_alias(flag: str, of: str, **attrs: Any) -> Callable[[Callable], Callable]:
    """A hidden option ``flag`` that fills the parameter ``of`` when that one is not given:
    an old spelling stays accepted without cluttering ``--help``."""
    alias = f"alias_of_{of}"

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = kwargs.pop(alias)
            if value is not None and kwargs.get(of) is None:
                kwargs[of] = value
            return command(*args, **kwargs)

        return click.option(flag, alias, hidden=True, default=None, **attrs)(wrapper)

    return decorate


def prepared_dir_option(command: Callable) -> Callable:
    """``--prepared-dir DIR`` (``--cache-dir`` accepted, hidden) → ``prepared_dir``."""
    kind = click.Path(file_okay=False, path_type=Path)
    command = hidden_alias("--cache-dir", "prepared_dir", type=kind)(command)
    return click.option(
        "--prepared-dir",
        type=kind,
        default=None,
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
    return click.option(
        "--classes",
        type=click.Choice(CLASS_CHOICES),
        default=default,
        show_default=default is not None,
        help=help,
    )


def out_option(help: str, *, directory: bool = False, required: bool = False, aliases=()):
    """``-o/--out PATH``: where a command writes its file (or directory)."""
    if directory:
        kind = click.Path(file_okay=False, path_type=Path)
    else:
        kind = click.Path(dir_okay=False, path_type=Path)
    return click.option(
        "-o", "--out", *aliases, "out", type=kind, default=None, required=required, help=help
    )


def run_dir_option(help: str, default: Path | None = None):
    """``-o/--out DIR`` (``--run-dir`` the same option): the run a command writes."""
    return click.option(
        "-o",
        "--out",
        "--run-dir",
        "run_dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=default,
        show_default=default is not None,
        help=help,
    )


def pick_corpus(option: str | None, positional: str | None, default: str = DEFAULT_CORPUS) -> str:
    """The corpus given as ``--corpus`` or as the documented positional, not both."""
    if option and positional and option != positional:
        raise NslmError(f"two corpora given: --corpus {option} and {positional}; give one")
    return option or positional or default


# -- which model: eval and generate -----------------------------------------------------------

MODEL_CHOICES = ("auto", "nslm", "neural")


def model_option(what: str) -> Callable:
    """``--model auto|nslm|neural``: which LM a command on a run uses (eval, generate)."""
    return click.option(
        "--model",
        "model_kind",
        type=click.Choice(MODEL_CHOICES),
        default="auto",
        show_default=True,
        help=f"nslm: {what} through the NSLM (needs RUN/micro.json, from 'nslm micro fit "
        "RUN'); neural: the neural heads only; auto: nslm if RUN/micro.json exists.",
    )


def use_nslm(run: Path, model_kind: str, command: str) -> bool:
    """Whether the NSLM is used; with ``auto``, say which and why on stderr (one line)."""
    micro = Path(run) / "micro.json"
    if model_kind == "nslm":
        if is_byte_run(run):
            raise NslmError(f"{run} is a byte LM: it has no classes, so no NSLM")
        if not micro.is_file():
            raise NslmError(f"the NSLM needs {micro}: run 'nslm micro fit {run}' first")
        return True
    if model_kind == "neural":
        return False
    if is_byte_run(run):  # a byte LM has no classes, so no NSLM: nothing to say
        return False
    if micro.is_file():
        click.echo(
            f"{command}: using the NSLM: {micro} found (--model neural: heads only)", err=True
        )
        return True
    click.echo(
        f"{command}: no {micro}: neural heads only; run 'nslm micro fit {run}' for the NSLM",
        err=True,
    )
    return False


# -- training runs ---------------------------------------------------------------------------


def no_run_message(path: Path | str) -> str:
    return f"no run at {path} (expected a directory with config.json; train one with 'nslm train')"


def is_run(path: Path | str) -> bool:
    return (Path(path) / "config.json").is_file()


def check_run(path: Path | str) -> Path:
    """``path`` as a run directory, or the one error every command gives for a non-run
    (checked before the library's ``load_run``, whose message differs). Its config.json is
    read too: a damaged one is a one-line error here, before any command's own work."""
    from nslm.config import read_config_json

    path = Path(path)
    if not is_run(path):
        raise NslmError(no_run_message(path))
    read_config_json(path / "config.json")
    return path


class RunDir(click.ParamType):
    """A training run directory (one holding config.json)."""

    name = "run"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None):
        # NslmError, not click's BadParameter: the message is the same for every command.
        return check_run(value)


def run_argument(required: bool = True):
    return click.argument("run", type=RunDir(), required=required)


def is_byte_run(run: Path) -> bool:
    """Whether RUN is a training run of a byte LM (its config names a byte corpus)."""
    from nslm.byte_lm.data import is_byte_corpus
    from nslm.config import read_config_json

    saved = Path(run) / "config.json"
    if not saved.is_file():
        return False
    return is_byte_corpus(read_config_json(saved).corpus)


# -- text in and out: one spelling on every command that reads or writes words (docs/text.md)

input_format_option = click.option(
    "--input-format",
    type=click.Choice(["plain", "tokenized"]),
    default="plain",
    show_default=True,
    help="How the text is written: plain (tokenized here by the run's "
    "rules, e.g. '1914,' reads as '1914 ,') or tokenized (already in the corpus's tokens, "
    "e.g. WikiText's '1 @,@ 000'; read as it is).",
)
output_format_option = click.option(
    "--output-format",
    type=click.Choice(["plain", "tokenized"]),
    default="plain",
    show_default=True,
    help="How words are written back: plain text, or the model's tokens "
    "(as the corpus writes them).",
)

micro_kind_option = click.option(
    "--micro",
    "micro_kind",
    type=click.Choice(["auto", "plain", "context"]),
    default="auto",
    show_default=True,
    help="The micro-models: the context-aware ones when RUN has them "
    "(auto; 'nslm micro fit RUN --context'), the plain ones, or the context-aware ones.",
)
