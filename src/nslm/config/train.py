"""Training configuration: dataclass defaults, TOML files and ``--set key=value`` overrides.

One flat table of keys keeps ``--set`` simple (``--set hidden_size=512``). Every key has a
default (:class:`~nslm.config.train_config.TrainConfig`); a TOML file in ``configs/``
overrides some of them, and ``--set`` overrides the file. An unknown key, a value of the
wrong type or a malformed file is an :class:`~nslm.errors.NslmError` that names the valid
keys.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path
from typing import Any

from nslm.config.checks import validate
from nslm.config.train_config import TrainConfig
from nslm.errors import NslmError


def valid_keys() -> list[str]:
    return [f.name for f in dataclasses.fields(TrainConfig)]


def _field_types() -> dict[str, Any]:
    defaults = TrainConfig()
    return {k: type(getattr(defaults, k)) for k in valid_keys()}


def _coerce(key: str, value: Any) -> Any:
    """Check ``value`` against the default's type; ints are accepted where floats are."""
    want = _field_types()[key]
    if want is bool:
        if isinstance(value, bool):
            return value
    elif want is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif want is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif want is list:
        if isinstance(value, list):
            return list(value)
    elif isinstance(value, want):
        return value
    raise NslmError(f"config key {key!r} wants a {want.__name__}, got {value!r}")


def _unknown(key: str) -> NslmError:
    return NslmError(f"unknown config key {key!r}; valid keys: {', '.join(valid_keys())}")


def _parse_override(item: str) -> tuple[str, Any]:
    """``key=value``: the value is read as TOML (numbers, booleans, lists), else a string."""
    if "=" not in item:
        raise NslmError(f"--set wants key=value, got {item!r}")
    key, raw = (s.strip() for s in item.split("=", 1))
    if key not in valid_keys():
        raise _unknown(key)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def build_config(values: dict[str, Any]) -> TrainConfig:
    """A validated :class:`TrainConfig` from a flat mapping of overrides."""
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in valid_keys():
            raise _unknown(key)
        kwargs[key] = _coerce(key, value)
    cfg = TrainConfig(**kwargs)
    validate(cfg)
    return cfg


def total_threads(cfg: TrainConfig) -> int:
    """The threads a run's training used on all its processes (0 = torch's default): what
    one process evaluating it may use."""
    return cfg.threads * cfg.processes


def read_toml(path: Path) -> dict[str, Any]:
    """A config file's table; a missing, empty or malformed file is a one-line user error.

    An empty file is refused rather than read as "every default": a config given on the
    command line that says nothing is a file that lost its content. A byte-order mark (as
    Windows editors write) is dropped.
    """
    path = Path(path)
    if path.is_dir():
        raise NslmError(f"{path} is a directory, expected a TOML config file")
    if not path.is_file():
        raise NslmError(f"config file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
        if not text.strip():
            raise NslmError(f"{path}: empty config file")
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise NslmError(f"malformed config {path}: {exc}") from None


def load_config(path: Path | None, overrides: list[str] | tuple[str, ...] = ()) -> TrainConfig:
    """Read a TOML config (or start from the defaults) and apply ``key=value`` overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        values = read_toml(path)
        nested = [k for k, v in values.items() if isinstance(v, dict)]
        if nested:
            raise _unknown(nested[0])
    for item in overrides:
        key, value = _parse_override(item)
        values[key] = value
    return build_config(values)


def config_from_json(text: str) -> TrainConfig:
    """The config a run directory saved (``config.json``)."""
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NslmError(f"malformed config.json: {exc}") from None
    if not isinstance(values, dict):
        raise NslmError("malformed config.json: not a JSON object")
    return build_config(values)


def read_config_json(path: Path) -> TrainConfig:
    """The config a run saved (``RUN/config.json``); a missing, binary or malformed file is
    a one-line error that names it."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise NslmError(f"missing file {path}") from None
    except UnicodeDecodeError:
        raise NslmError(f"{path}: not UTF-8 text (a damaged run?)") from None
    try:
        return config_from_json(text)
    except NslmError as exc:
        raise NslmError(f"{path}: {exc}") from None
