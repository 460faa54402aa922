"""Read a corpus text file (plain or ``.xz``) and refuse what is not UTF-8 text."""

from __future__ import annotations

import lzma
from pathlib import Path

from nslm.errors import NslmError


def read_text(path: Path) -> str:
    """Return the whole file as text, checking that it is a non-empty UTF-8 text file.

    ``.xz`` files are decompressed. A missing file, an empty file, a file with NUL
    bytes (binary) or invalid UTF-8 each raise :class:`NslmError` with one line.
    """
    path = Path(path)
    if not path.exists():
        raise NslmError(f"corpus file not found: {path}")
    if not path.is_file():
        raise NslmError(f"not a regular file: {path}")
    try:
        if path.suffix == ".xz":
            with lzma.open(path, "rb") as handle:
                raw = handle.read()
        else:
            raw = path.read_bytes()
    except lzma.LZMAError as exc:
        raise NslmError(f"{path}: not a valid .xz file ({exc})") from None
    except OSError as exc:
        raise NslmError(f"{path}: cannot read ({exc.strerror})") from None
    if not raw.strip():
        raise NslmError(f"{path}: file is empty")
    if b"\x00" in raw:
        raise NslmError(f"{path}: binary file (contains NUL bytes), expected UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NslmError(f"{path}: not UTF-8 text (invalid byte at offset {exc.start})") from None
