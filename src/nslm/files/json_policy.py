"""The package's one JSON policy: JSON has no NaN or infinity, so every JSON nslm writes or
prints turns a non-finite float (an undefined or infinite perplexity) into ``null``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nslm.errors import NslmError


def json_ready(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth, replaced by None (JSON null)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    return value


def json_text(value: Any, *, indent: int | None = 1) -> str:
    """Strict JSON text of ``value`` under :func:`json_ready`'s policy."""
    try:  # most values hold no NaN or inf: one pass in C, no walk in Python first
        return json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:  # a non-finite float somewhere: write those as null
        return json.dumps(json_ready(value), indent=indent, allow_nan=False)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NslmError(f"missing file {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise NslmError(f"malformed JSON {path}: {exc}") from None
