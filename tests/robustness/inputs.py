"""The bad inputs, one kind a function: text files, TOML configs and run directories.

A kind turns a good input (its bytes, its TOML values, a copy of a run) into a bad one at the
path a command reads. Every kind has a name, which is how the table (robustness.table) lists
the kinds a slot takes and what each must give.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

# -- text files ---------------------------------------------------------------------------------

# Every kind a file slot can take. "clean" is the good file itself: it must work, and it is
# the reference the CRLF and BOM variants must equal.
TEXT_KINDS = (
    "clean",
    "missing",
    "empty",
    "directory",
    "binary",
    "non_utf8",
    "big_line",
    "crlf",
    "bom",
)
# The 100 MB single line costs seconds per reader, so it goes to the readers that
# read a whole file into memory in one go (the corpus reader, the ARPA reader: rows with
# big_line_bytes=FULL_BIG_LINE); every other slot gets a 1 MB line, which exercises the
# same code paths.
FULL_BIG_LINE = 100 * 2**20
SMALL_BIG_LINE = 2**20
BOM = b"\xef\xbb\xbf"
# Seeded random bytes with NULs: what a gzip, PNG or model file looks like to a text reader.
BINARY = bytes(np.random.default_rng(18).integers(0, 256, 4096, dtype=np.uint8)) + b"\x00"


def _non_utf8(good: bytes) -> bytes:
    """``good`` with a Latin-1 line inserted at a line start near its middle (so a reader
    that stops after the first lines cannot miss it, and no UTF-8 sequence is cut)."""
    cut = good.find(b"\n", len(good) // 2) + 1
    return good[:cut] + b"caf\xe9\n" + good[cut:]


def write_text_input(path: Path, kind: str, good: bytes, big_line_bytes: int) -> None:
    """Put the ``kind`` variant of the file ``good`` at ``path`` (nothing for ``missing``).

    ``big_line``: one line of ``big_line_bytes`` bytes without a space (a single token; a
    line of that many spaced words would measure the tagger's speed, not robustness), put
    first so a reader meets it before anything it could stop at.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    if kind == "missing":
        return
    if kind == "directory":
        path.mkdir()
        return
    data = {
        "clean": lambda: good,
        "empty": lambda: b"",
        "binary": lambda: BINARY,
        "non_utf8": lambda: _non_utf8(good),
        "big_line": lambda: b"x" * big_line_bytes + b"\n" + good,
        "crlf": lambda: good.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
        "bom": lambda: BOM + good,
    }[kind]()
    path.write_bytes(data)


# -- TOML configs -------------------------------------------------------------------------------


def toml_value(value: Any) -> str:
    """A string, number, boolean or list of them as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # nan, inf and -inf are TOML's spellings too
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    # a basic string: TOML wants the quote, the backslash and control characters escaped
    escaped = "".join(
        f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F or c in '"\\' else c
        for c in str(value)
    )
    return f'"{escaped}"'


def toml_text(values: dict[str, Any]) -> str:
    """A flat TOML table of strings, numbers, booleans and lists of them."""
    return "".join(f"{key} = {toml_value(v)}\n" for key, v in values.items())


# A TOML kind: the changes to the good values, and the key the error must name. None for
# "malformed", which is no TOML at all.
TomlKind = tuple[dict[str, Any] | None, str]
MALFORMED_TOML = b"[unclosed\nkey = = 3\n"


def write_toml_input(path: Path, changes: dict[str, Any] | None, good: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if changes is None:
        path.write_bytes(MALFORMED_TOML)
    else:
        path.write_text(toml_text({**good, **changes}), encoding="utf-8")


# -- run directories ----------------------------------------------------------------------------


class PickleBomb:
    """Pickled, it is an instruction to create ``marker``: a reader that unpickles a file a
    user handed in leaves the marker behind, which the battery checks."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Callable, tuple[str]]:
        return os.mkdir, (self.marker,)


def pickle_bytes(marker: Path) -> bytes:
    return pickle.dumps(PickleBomb(marker))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _replace_json(path: Path, change: Callable[[Any], Any]) -> None:
    path.write_text(json.dumps(change(json.loads(path.read_text(encoding="utf-8")))))


def _with_corpus(corpus: Path) -> Callable[[Any], Any]:
    def change(values: dict) -> dict:
        return {**values, "corpus": str(corpus)}

    return change


def _wrong_shape_micro(payload: dict) -> dict:
    """The envelope a reader checks first (format, version, vocabulary) kept, the classes
    of the wrong shape: a list of names where a table of fitted models belongs."""
    return {**payload, "classes": {name: {"selected": name} for name in payload["classes"]}}


def _other_corpus_assets(corpus: Path) -> Callable[[Any], Any]:
    def change(payload: dict) -> dict:
        meta = {**payload["meta"], "source": str(corpus), "cache_key": None}
        return {**payload, "corpus": str(corpus), "meta": meta}

    return change


def _checkpoints(run: Path) -> list[Path]:
    return sorted(p for p in run.glob("ckpt-*") if p.is_dir())


def _pickle_checkpoint(run: Path, marker: Path) -> None:
    """The tensor files only a resume reads (the optimizer's, the rank's RNG and hidden
    state) replaced by pickles, as a torch.save from elsewhere would be."""
    for file in _checkpoints(run)[-1].glob("*.safetensors"):
        if file.name != "model.safetensors":
            file.write_bytes(pickle_bytes(marker))


def mutate_run(run: Path, kind: str, other_run: Path, other_corpus: Path, marker: Path) -> None:
    """Turn the copy of a run at ``run`` into the ``kind`` variant (``clean``: as it is)."""
    if kind == "missing":
        shutil.rmtree(run)
    elif kind == "file":
        shutil.rmtree(run)
        run.write_text("not a run\n")
    elif kind == "empty_dir":
        shutil.rmtree(run)
        run.mkdir()
    elif kind == "config_binary":
        (run / "config.json").write_bytes(BINARY)
    elif kind == "config_wrong_shape":
        (run / "config.json").write_text("[1, 2, 3]\n")
    elif kind == "other_vocabulary":  # the vocabulary side of another run, these weights
        for name in ("vocab.json", "layout.json", "assets.json", "assets.npz"):
            shutil.copy(other_run / name, run / name)
    elif kind == "other_corpus":  # the run names a corpus that prepares another vocabulary
        _replace_json(run / "config.json", _with_corpus(other_corpus))
        _replace_json(run / "assets.json", _other_corpus_assets(other_corpus))
    elif kind == "truncated_weights":
        _truncate(run / "model.safetensors")
    elif kind == "pickle_weights":
        (run / "model.safetensors").write_bytes(pickle_bytes(marker))
    elif kind == "micro_wrong_shape":
        _replace_json(run / "micro.json", _wrong_shape_micro)
    elif kind == "micro_other_vocabulary":
        shutil.copy(other_run / "micro.json", run / "micro.json")
    elif kind == "checkpoint_truncated":
        _truncate(_checkpoints(run)[-1] / "model.safetensors")
    elif kind == "checkpoint_pickle":
        _pickle_checkpoint(run, marker)
    elif kind != "clean":
        raise KeyError(kind)


RUN_KINDS = (
    "clean",
    "missing",
    "file",
    "empty_dir",
    "config_binary",
    "config_wrong_shape",
    "other_vocabulary",
    "other_corpus",
    "truncated_weights",
    "pickle_weights",
    "micro_wrong_shape",
    "micro_other_vocabulary",
    "checkpoint_truncated",
    "checkpoint_pickle",
)
