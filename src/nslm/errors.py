"""The one exception type that the CLI turns into a one-line message and exit status 2."""


class NslmError(Exception):
    """A problem with the user's input (a path, a file, a config), not a bug in nslm.

    The CLI prints ``error: <message>`` on one line and exits with status 2.
    """
