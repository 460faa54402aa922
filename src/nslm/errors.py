"""The one exception type that the CLI turns into a one-line message and exit status 2, and
the operating-system errors it reports the same way."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class NslmError(Exception):
    """A problem with the user's input (a path, a file, a config), not a bug in nslm.

    The CLI prints ``error: <message>`` on one line and exits with status 2.
    """


def lookup(table: Mapping[str, T], name: str, what: str) -> T:
    """``table[name]``, or the one-line error ``unknown <what> 'name'; known: …`` naming
    every key of ``table`` (a registry of metrics, PDFs, …)."""
    try:
        return table[name]
    except KeyError:
        raise NslmError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}") from None


# The system refusing a read or a write for a reason outside nslm, anywhere a command reads
# or writes: a full disk or quota, a file over the size limit, a read-only file system, no
# permission, a path that runs through a file or names a directory where a file goes. The
# user fixes these, so the CLI reports them in one line. Any other OSError (a file nslm
# should have checked for first) stays a traceback: that is nslm's bug.
ENVIRONMENT_ERRNOS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.EISDIR,
        errno.ENOTDIR,
        errno.EEXIST,
        errno.ENAMETOOLONG,
        errno.EIO,
    }
)


def environment_message(exc: OSError) -> str | None:
    """``PATH: reason`` for an OSError of :data:`ENVIRONMENT_ERRNOS`, else None. Of a rename,
    the path is its target: the name the user gave, not the temporary file's."""
    if exc.errno not in ENVIRONMENT_ERRNOS:
        return None
    path = exc.filename2 if exc.filename2 is not None else exc.filename
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, "system error")
    return f"{path}: {reason}" if path is not None else reason


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether Ctrl-C is behind ``exc``: Python re-raises a KeyboardInterrupt that lands in a
    class body's ``__set_name__`` (a dataclass being imported) as a RuntimeError caused by it."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False
