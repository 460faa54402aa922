"""User extensions without editing nslm (paper Table 1 steps 2–3; docs/user-classes.md).

Two ways, which combine:

- a Python plug-in (a ``.py`` file or an importable module) that calls
  :func:`~nslm.micro.register_metric` / :func:`~nslm.micro.register_pdf`;
- a TOML class file: one table per user class with a regex over the vocabulary and,
  optionally, the metrics and PDFs to search (default: every registered one that fits)::

      plugins = ["my_metrics.py"]

      [classes.percent]
      regex = '\\d+(\\.\\d+)?%'
      metrics = ["value", "diff"]
      pdfs = ["multinomial"]
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from nslm.errors import NslmError

_CLASS_KEYS = frozenset({"regex", "metrics", "pdfs"})
_TOP_KEYS = frozenset({"plugins", "classes"})


def load_plugin(spec: str | Path, base: Path | None = None) -> None:
    """Import a plug-in file (``path/to/file.py``) or module (``package.module``) once.

    Importing runs its ``register_metric``/``register_pdf`` calls. Relative file paths are
    taken from ``base`` (the class file's folder) when given.
    """
    text = str(spec)
    if text.endswith(".py"):
        path = Path(text)
        if not path.is_absolute() and base is not None:
            path = base / path
        if not path.is_file():
            raise NslmError(f"plug-in {path}: no such file")
        name = f"nslm_plugin_{abs(hash(path.resolve()))}"
        if name in sys.modules:
            return
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise NslmError(f"plug-in {path}: cannot be imported")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except NslmError:
            raise
        except Exception as exc:  # a broken plug-in is the user's input: one line
            del sys.modules[name]
            raise NslmError(f"plug-in {path} failed: {type(exc).__name__}: {exc}") from None
        return
    try:
        importlib.import_module(text)
    except ImportError as exc:
        raise NslmError(f"plug-in module {text!r} cannot be imported: {exc}") from None


@dataclass
class UserClass:
    """A user class from a TOML table: a regex over types, and optional search limits."""

    name: str
    regex: str
    metrics: list[str] | None = None
    pdfs: list[str] | None = None
    plugins: list[str] = field(default_factory=list)


def _names(value: object, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise NslmError(f"{where}: expected a name or a list of names")


def load_class_file(path: Path | str) -> list[UserClass]:
    """Parse a class file and import its plug-ins; return the user classes it defines."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # a BOM dropped
    except FileNotFoundError:
        raise NslmError(f"{path}: no such class file") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise NslmError(f"{path}: malformed TOML: {exc}".splitlines()[0]) from None
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise NslmError(f"{path}: unknown key(s) {sorted(unknown)}; valid: {sorted(_TOP_KEYS)}")
    plugins = _names(data.get("plugins", []), f"{path}: plugins") or []
    # file plug-ins are kept as absolute paths: micro.json reloads them from anywhere
    plugins = [str((path.parent / p).resolve()) if p.endswith(".py") else p for p in plugins]
    for plugin in plugins:
        load_plugin(plugin)
    out = []
    for name, table in data.get("classes", {}).items():
        where = f"{path}: [classes.{name}]"
        if not isinstance(table, dict):
            raise NslmError(f"{where} must be a table")
        bad = set(table) - _CLASS_KEYS
        if bad:
            raise NslmError(f"{where}: unknown key(s) {sorted(bad)}; valid: {sorted(_CLASS_KEYS)}")
        if not isinstance(table.get("regex"), str):
            raise NslmError(f"{where}: needs regex = '...'")
        out.append(
            UserClass(
                name=name,
                regex=table["regex"],
                metrics=_names(table.get("metrics"), f"{where}: metrics"),
                pdfs=_names(table.get("pdfs"), f"{where}: pdfs"),
                plugins=plugins,
            )
        )
    return out
