"""Read a corpus file (plain or ``.xz``): as UTF-8 text, or as raw bytes for byte LMs."""

from __future__ import annotations

import lzma
from pathlib import Path

from nslm.errors import NslmError

BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark


def read_text(path: Path) -> str:
    """Return the whole file as text, checking that it is a non-empty UTF-8 text file.

    ``.xz`` files are decompressed. A byte-order mark (as Windows editors write) is not
    text: it is dropped, or it would glue itself to the first token. A missing file, an
    empty file, a file with NUL bytes (binary) or invalid UTF-8 each raise
    :class:`NslmError` with one line.
    """
    raw = read_bytes(path)
    if b"\x00" in raw:
        raise NslmError(f"{path}: binary file (contains NUL bytes), expected UTF-8 text")
    body = raw.removeprefix(BOM)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = exc.start + len(raw) - len(body)  # in the file, BOM included
        raise NslmError(f"{path}: not UTF-8 text (invalid byte at offset {offset})") from None
    if not text.strip():
        raise NslmError(f"{path}: file is empty")
    # Line ends as Python's text mode reads them (universal newlines): a file saved with
    # Windows' CRLF is the same text, and scores the same bytes, as one saved with LF.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_bytes(path: Path) -> bytes:
    """The whole file's bytes, whatever their encoding (a byte LM reads any text).

    ``.xz`` files are decompressed. A missing or empty file is a one-line :class:`NslmError`.
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
    return raw
