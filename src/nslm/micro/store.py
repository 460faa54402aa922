"""``micro.json``: the selected micro-model per class, every grid cell, every fitted parameter.

Readable JSON, never a pickle. It carries a fingerprint of the vocabulary and of each V_c,
so a ``micro.json`` fitted on another vocabulary is refused with a one-line error instead of
silently scoring the wrong types. Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from nslm.data.corpus import PreparedCorpus
from nslm.errors import NslmError
from nslm.files.atomic import write_json_atomic
from nslm.micro.classdata import ClassData, builtin_class, regex_class, vocabulary_fingerprint
from nslm.micro.model import MicroModel
from nslm.micro.selection import ClassSelection

FORMAT = "nslm-micro"
VERSION = 1


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def selection_to_json(
    corpus: PreparedCorpus,
    selections: dict[str, ClassSelection],
    evaluations: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whole ``micro.json`` payload as a dict."""
    classes = {}
    for name, sel in selections.items():
        entry: dict[str, Any] = {
            "source": sel.source,
            "vc_size": len(sel.cls.candidates),
            "vc_fingerprint": sel.cls.fingerprint,
            "selected": sel.model.to_json(),
            "valid_ppl": _finite(sel.selected.valid_ppl),
            "valid_tokens": sel.valid_tokens,
            "unigram": {"alpha": sel.unigram_alpha, "valid_ppl": _finite(sel.unigram_valid_ppl)},
            "grid": [cell.to_json() for cell in sel.cells],
        }
        if evaluations and name in evaluations:
            entry["evaluation"] = evaluations[name]
        classes[name] = entry
    return {
        "format": FORMAT,
        "version": VERSION,
        "corpus": corpus.meta.get("source"),
        "corpus_cache_key": corpus.meta.get("cache_key"),
        "vocab_size": len(corpus.vocab),
        "vocab_fingerprint": vocabulary_fingerprint(corpus),
        "classes": classes,
    }


def write_micro_json(path: Path | str, payload: dict[str, Any]) -> Path:
    """Write atomically: a killed run leaves the old file or none, never half a file."""
    path = Path(path)
    write_json_atomic(path, payload, indent=1)
    return path


def read_micro_json(path: Path | str) -> dict[str, Any]:
    """Load and check the envelope of a ``micro.json`` (not yet against a corpus)."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise NslmError(f"{path}: no such micro.json") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NslmError(f"{path}: not a valid micro.json ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise NslmError(f"{path}: not a micro.json (format is not {FORMAT!r})")
    if payload.get("version") != VERSION:
        raise NslmError(f"{path}: micro.json version {payload.get('version')}, expected {VERSION}")
    classes = payload.get("classes")
    fitted = isinstance(classes, dict) and all(
        isinstance(entry, dict) and isinstance(entry.get("selected"), dict)
        for entry in classes.values()
    )
    if not fitted or not isinstance(payload.get("plugins", []), list):
        raise NslmError(
            f"{path}: not a micro.json (its classes are not a table of fitted "
            "micro-models, each with its selected cell)"
        )
    return payload


def class_data_for(corpus: PreparedCorpus, name: str, source: dict[str, Any]) -> ClassData:
    """Rebuild a class from its ``source`` entry: built-in rules or a user regex."""
    if source.get("kind") == "regex":
        from nslm.micro.plugins import load_plugin

        for plugin in source.get("plugins", []):
            load_plugin(plugin)  # its metrics/PDFs must be registered before from_json
        return regex_class(corpus, name, source["pattern"])
    return builtin_class(corpus, name)


def load_micro_models(path: Path | str, corpus: PreparedCorpus) -> dict[str, MicroModel]:
    """The fitted micro-model of every class in ``micro.json``, checked against ``corpus``."""
    payload = read_micro_json(path)
    mine = vocabulary_fingerprint(corpus)
    if payload.get("vocab_fingerprint") != mine:
        raise NslmError(
            f"{path} was fitted on another vocabulary ({payload.get('vocab_size')} types, "
            f"fingerprint {payload.get('vocab_fingerprint')}; this corpus: "
            f"{len(corpus.vocab)} types, {mine})"
        )
    models = {}
    for name, entry in payload["classes"].items():
        cls = class_data_for(corpus, name, entry.get("source", {}))
        models[name] = MicroModel.from_json(entry["selected"], cls)
    return models
