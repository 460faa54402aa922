"""One front door to a trained run: what ``predict``, ``eval``, ``generate``, ``probe``,
``demo``, the explorer and the benchmarks all open.

:func:`open_run` loads the weights and the run's corpus assets (:func:`~nslm.runs.load.
load_run`), sets torch's threads to what the run trained with, and loads the micro-models
asked for: ``auto`` (the context-aware ones when the run has them, else the plain ones, else
none), ``plain``, ``context`` or ``none``. It also carries the ensemble's Global λ of the
run's last ``nslm eval`` and the run's text form (:mod:`nslm.data.text`), so a command that
reads or writes words has everything in one object.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nslm.errors import NslmError
from nslm.runs.load import LoadedRun, load_run, require_byte_lm

MICRO_CHOICES = ("auto", "plain", "context", "none")


@dataclass
class OpenRun:
    """A loaded run with its micro-models (``{}``: the neural heads only)."""

    loaded: LoadedRun
    micro: dict[str, Any] = field(default_factory=dict)
    lam: float = 0.0  # the Global λ of the last ``nslm eval``; 0 = Eq. 4 alone

    @property
    def run_dir(self) -> Path:
        return Path(self.loaded.run_dir)

    @property
    def text_form(self) -> str:
        return self.loaded.text_form

    @property
    def has_micro(self) -> bool:
        return bool(self.micro)


def open_run(
    run_dir: Path | str,
    *,
    micro: str = "auto",
    threads: bool | int = True,
    byte_lm: str | None = None,
    corpus=None,
    weights: Path | str | None = None,
) -> OpenRun:
    """Open ``run_dir`` for scoring, prediction or generation.

    ``micro``: which micro-models (:data:`MICRO_CHOICES`); ``plain`` and ``context`` are a
    one-line error when the run lacks them. ``threads``: ``True``, the threads the run trained
    with (all its processes' together); a number, that many; ``False``, leave torch's setting.
    ``byte_lm``: a command that needs a one-layer byte LSTM, named in the error when the run
    is not one. ``corpus``: a prepared corpus instead of the run's own assets (scoring a split
    of the corpus it was trained on). ``weights``: another weights file of the run (a kept
    checkpoint; :func:`~nslm.runs.load.kept_checkpoints`).
    """
    if micro not in MICRO_CHOICES:
        raise NslmError(f"--micro must be one of {', '.join(MICRO_CHOICES)}, not {micro!r}")
    # before torch starts its pool: spinning OpenMP threads slow a shared CPU down
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    loaded = load_run(run_dir, corpus, weights=weights)
    if byte_lm is not None:
        require_byte_lm(loaded, byte_lm)
    if threads is not False:
        from nslm.config import total_threads
        from nslm.scores.passes import use_threads

        use_threads(total_threads(loaded.cfg) if threads is True else int(threads))
    run = OpenRun(loaded)
    has_plain = (Path(run_dir) / "micro.json").is_file()
    if micro == "none" or (micro == "auto" and not has_plain):
        return run
    if not has_plain:
        raise NslmError(
            f"the NSLM needs {Path(run_dir) / 'micro.json'}: run 'nslm micro fit {run_dir}' first"
        )
    from nslm.runs.context_micro import run_micro_models
    from nslm.runs.lambdas import saved_global_lambda

    run.micro = run_micro_models(loaded, micro)
    run.lam = saved_global_lambda(run_dir)
    return run
