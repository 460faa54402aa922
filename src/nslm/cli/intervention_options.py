"""``--ablate``, ``--ablate-mode``, ``--clamp``, ``--steer``, ``--steer-at``, ``--steer-scale``:
one spelling on every command that runs a byte LM (probe, eval, generate; the explorer
takes the same names as query parameters). What they do: :mod:`nslm.byte_lm.intervention`;
how the names become an intervention: :mod:`nslm.byte_lm.steering`; docs/probes.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from nslm.cli.options import choice_option, list_option
from nslm.errors import NslmError


def _units(value):
    from nslm.byte_lm.steering import parse_units  # torch only when a command runs

    return parse_units(value)


def _clamp(value):
    from nslm.byte_lm.steering import parse_clamp

    return parse_clamp(value)


def _parsed(parse: Callable) -> Callable:
    """A click callback through one of :mod:`nslm.byte_lm.steering`'s parsers (the
    explorer reads its fields with the same ones)."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any):
        try:
            return parse(value)
        except NslmError as err:
            raise click.BadParameter(str(err), ctx, param) from None

    return callback


INTERVENTION_KEYS = ("ablate", "ablate_mode", "clamp", "steer", "steer_at", "steer_scale")


def intervention_options(command: Callable) -> Callable:
    """The byte LM changed at every step while it runs (nslm.byte_lm.intervention)."""
    for option in reversed(
        [
            click.option(
                "--ablate",
                multiple=True,
                metavar="UNIT[,UNIT…]",
                callback=_parsed(_units),
                help="Byte LM: set these units' cell and hidden values at every step "
                "(to 0, or their mean: --ablate-mode).",
            ),
            choice_option(
                "--ablate-mode",
                choices=["zero", "mean"],
                default="zero",
                help="What an ablated unit holds: 0, or its mean over the run's valid text.",
            ),
            click.option(
                "--clamp",
                multiple=True,
                metavar="UNIT=VALUE[,…]",
                callback=_parsed(_clamp),
                help="Byte LM: fix these units' cell values at every step.",
            ),
            click.option(
                "--steer",
                default=None,
                metavar="SOURCE",
                help="Byte LM: add a direction "
                "at every step: probe:FILE, output:BYTES, random:SEED, or a file of numbers.",
            ),
            list_option(
                "--steer-at",
                choices=("cell", "hidden", "candidate"),
                metavar="PLACE[,PLACE]",
                help="Where --steer adds: cell, hidden, candidate "
                "(the cell candidate's pre-activation) [hidden].",
            ),
            click.option(
                "--steer-scale",
                type=float,
                default=1.0,
                show_default=True,
                help="α: --steer adds α times the direction.",
            ),
        ]
    ):
        command = option(command)
    return command


def intervention_of(loaded: Any, options: dict[str, Any]):
    """The Intervention the options ask for on ``loaded`` (a byte LM), or None."""
    from nslm.byte_lm.steering import build_intervention

    opts = {k: options[k] for k in INTERVENTION_KEYS}
    if opts["steer"] is None and (opts["steer_at"] or opts["steer_scale"] != 1.0):
        raise NslmError("--steer-at and --steer-scale go with --steer SOURCE")
    opts["steer_at"] = opts["steer_at"] or ("hidden",)
    return build_intervention(loaded, **opts)


def wants_intervention(options: dict[str, Any]) -> bool:
    return bool(options.get("ablate") or options.get("clamp") or options.get("steer"))
