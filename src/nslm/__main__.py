"""``python -m nslm`` and the ``nslm`` command.

The CLI is imported inside :func:`main`: its imports (torch among them) take seconds on a
cold start, and Ctrl-C during them is an interrupt like any other, exit status 130 with
one line, not a traceback.
"""

import sys


def main() -> None:
    try:
        from nslm.cli import main as cli_main
    except (KeyboardInterrupt, RuntimeError) as exc:
        from nslm.errors import caused_by_interrupt

        if not caused_by_interrupt(exc):
            raise
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(cli_main())


if __name__ == "__main__":
    main()
