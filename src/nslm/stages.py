"""Marks of how far a command has got, for whoever must act at a known point of it.

``NSLM_STAGE_FILE``, when set, names a file to which nslm appends one line per stage:
``handler`` once its Ctrl-C handler is in place (nslm/__main__.py, before any heavy
import) and ``command`` once its modules are imported and the command begins
(nslm/cli/__init__.py). The robustness tests send Ctrl-C after these marks instead of after
a guessed delay, so a busy machine cannot make the signal come too early.
"""

from __future__ import annotations

import os


def mark_stage(stage: str) -> None:
    """Append ``stage`` to ``$NSLM_STAGE_FILE`` (nothing when it is unset)."""
    path = os.environ.get("NSLM_STAGE_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(stage + "\n")
