"""The ``nslm`` command line. Each command group lives in its own module."""

from __future__ import annotations

import sys

import click

from nslm.cli.card import card_command
from nslm.cli.check import check_command
from nslm.cli.data import data_group
from nslm.cli.demo import demo_command
from nslm.cli.eval import eval_command
from nslm.cli.experiment import experiment_group
from nslm.cli.generate import generate_command
from nslm.cli.lm_eval import lm_eval_command
from nslm.cli.micro import micro_group
from nslm.cli.micro_plot import plot as micro_plot_command
from nslm.cli.ngram import ngram_group
from nslm.cli.predict import predict_command
from nslm.cli.probe import probe_group
from nslm.cli.report import report_command
from nslm.cli.serve import serve_command
from nslm.cli.train import train_command
from nslm.errors import NslmError, caused_by_interrupt, environment_message
from nslm.stages import mark_stage


@click.group(
    name="nslm",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    invoke_without_command=True,
)
@click.version_option(package_name="nslm")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Neural-symbolic language models that get numbers, dates and places right.

    Start with 'nslm demo' (about 10 minutes on 2 cores); 'nslm COMMAND --help' for more.
    """
    mark_stage("command")  # imports done, the command begins (nslm/__main__.py)
    if ctx.invoked_subcommand is None:  # bare `nslm`: the help, and success
        click.echo(ctx.get_help())


cli.add_command(data_group)
cli.add_command(ngram_group)
cli.add_command(generate_command)
cli.add_command(train_command)
cli.add_command(eval_command)
micro_group.add_command(micro_plot_command)
cli.add_command(micro_group)
cli.add_command(predict_command)
cli.add_command(demo_command)
cli.add_command(experiment_group)
cli.add_command(probe_group)
cli.add_command(report_command)
cli.add_command(serve_command)
cli.add_command(check_command)
cli.add_command(lm_eval_command)
cli.add_command(card_command)


# An error line quotes user input at times (a token, a plug-in's exception): past this many
# characters it is cut, so that a 100 MB line in a file does not become a 100 MB message.
LONGEST_MESSAGE = 1000


def error_line(message: str) -> str:
    """``error: MESSAGE`` on one line: newlines become spaces, an overlong message is cut."""
    text = " ".join(message.split("\n"))
    if len(text) > LONGEST_MESSAGE:
        text = f"{text[:LONGEST_MESSAGE]} … ({len(text) - LONGEST_MESSAGE:,} characters cut)"
    return f"error: {text}"


def main(argv: list[str] | None = None) -> int:
    """Entry point: bad input gives one line on stderr and exit status 2, never a traceback."""
    try:
        result = cli.main(args=argv, prog_name="nslm", standalone_mode=False)
    except NslmError as exc:
        print(error_line(str(exc)), file=sys.stderr)
        return 2
    except click.UsageError as exc:
        where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        print(error_line(f"{exc.format_message()}{where}"), file=sys.stderr)
        return 2
    except click.ClickException as exc:
        print(error_line(exc.format_message()), file=sys.stderr)
        return 2
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("error: interrupted", file=sys.stderr)
        return 130
    except RuntimeError as exc:  # Ctrl-C during a lazy import can arrive wrapped
        if not caused_by_interrupt(exc):
            raise
        print("error: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a full disk, no permission, … (nslm.errors.ENVIRONMENT_ERRNOS)
        message = environment_message(exc)
        if message is None:
            raise
        print(error_line(message), file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0
