"""``python -m nslm`` and the ``nslm`` command.

Ctrl-C at any moment is exit status 130 with the one line ``error: interrupted``: the
handler goes in before any heavy import (torch's take seconds on a cold start), and the
whole command, its imports included, runs inside one ``try``. The first Ctrl-C raises
KeyboardInterrupt where the program is, so the ``finally`` blocks of the atomic writes
remove what they had begun; later ones are ignored, so that cleanup and the closing line
are not themselves interrupted.

Where the command has got to is marked in ``$NSLM_STAGE_FILE`` (nslm/stages.py).
"""

import atexit
import os
import signal
import sys

from nslm.errors import caused_by_interrupt
from nslm.stages import mark_stage


def _interrupt(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # one Ctrl-C is enough
    raise KeyboardInterrupt


def _exit_interrupted() -> None:
    """Exit with status 130. Not through ``sys.exit``: a KeyboardInterrupt that once passed
    through Python code run by a C extension's ``PyRun_*`` call leaves CPython's "unhandled
    interrupt" flag set even though nslm handled it, and the interpreter would then end by
    killing itself with SIGINT (status -2 to a parent). So the exit handlers run here (they
    remove temporary folders), the streams are flushed, and the process ends at once."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)


def main() -> None:
    # A job started with SIGINT ignored (`nohup`, `cmd &` in a script) keeps it ignored.
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupt)
    mark_stage("handler")
    try:
        from nslm.cli import main as cli_main

        code = cli_main()  # 130 when it caught the Ctrl-C itself
    except BaseException as exc:  # a KeyboardInterrupt, or an import's error caused by one
        if isinstance(exc, SystemExit) or not caused_by_interrupt(exc):
            raise
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("error: interrupted", file=sys.stderr)
        code = 130
    if code == 130:
        _exit_interrupted()
    # The work is over (done, failed or interrupted): a Ctrl-C now would only turn the
    # interpreter's shutdown into a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    main()
