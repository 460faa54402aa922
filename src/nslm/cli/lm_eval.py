"""``nslm lm-eval …``: lm-evaluation-harness's own command line, with nslm's model
registered (docs/lm-eval.md). lm-eval 0.4 finds a model by its registry, which an outside
package joins by being imported; this command imports :mod:`nslm.lm_eval` first and then
hands every argument to lm-eval, so ``nslm lm-eval --model nslm --model_args run=RUN
--tasks … --include_path …`` is ``lm_eval`` with the ``nslm`` model known."""

from __future__ import annotations

import sys

import click


@click.command(
    "lm-eval",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def lm_eval_command(args: tuple[str, ...]) -> None:
    """lm-eval's command line with the ``nslm`` model registered (``nslm lm-eval --help``:
    lm-eval's own help)."""
    from lm_eval.__main__ import HarnessCLI
    from lm_eval.utils import setup_logging

    import nslm.lm_eval  # noqa: F401  (registers the model)

    setup_logging()
    saved = sys.argv
    sys.argv = ["lm_eval", *args]
    try:
        parser = HarnessCLI()
        parser.execute(parser.parse_args())
    finally:
        sys.argv = saved
