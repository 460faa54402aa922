"""A Transformer run's functions: fitted on its corpus as written (the Transformer reads
every word; no ``<unk>``), each weighed for this backbone by λ_f ∈ [0, 1), which scales its
confidence π (π' = λ_f · π), fitted on valid after the classes' λ_c
(:func:`fit_function_weights`), and kept as RUN/functions.json. Where they fire:
:mod:`nslm.transformer.sites`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepared_cache_root
from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import read_json
from nslm.functions.documents import corpus_file_documents
from nslm.functions.model import FunctionModel, code_fingerprint

FUNCTIONS_FILE = "functions.json"
WEIGHT_GRID = (
    0.0,
    0.05,
    0.1,
    0.2,
    0.35,
    0.5,
    0.7,
    0.8,
    0.9,
    0.95,
    0.98,
)  # λ_f: widened towards 1 past its top (WIDEST_WEIGHT)
WIDEST_WEIGHT = 0.999  # W = 1 would leave the Transformer no mass


def fit_functions(corpus: str, classes: str) -> FunctionModel:
    """Every registered function fitted on ``corpus``'s train as written (the Transformer
    reads every word; no ``<unk>``), chosen on its valid; kept in the prepared-corpus cache
    (keyed by the corpus's files, their sizes and times, the classes, the functions and
    their code), as
    ``nslm check``'s are, so a second run on the same corpus reads it."""
    paths = locate_corpus(corpus)
    names = sorted(FunctionModel().functions)
    files = [
        (str(paths[s]), paths[s].stat().st_size, paths[s].stat().st_mtime_ns)
        for s in ("train", "valid")
    ]
    fingerprint = code_fingerprint(names)
    key = hashlib.sha256(json.dumps([files, classes, names, fingerprint]).encode()).hexdigest()[:16]
    cached = prepared_cache_root() / f"functions-{key}.json"
    if cached.is_file():
        return FunctionModel.from_json(read_json(cached), str(cached))
    train = corpus_file_documents(paths["train"], classes)
    valid = corpus_file_documents(paths["valid"], classes)
    model = FunctionModel().fit(train, valid)
    model.fitted_on = {"corpus": corpus, "classes": classes}
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cached, model.to_json())
    return model


def write_functions(run_dir: Path, model: FunctionModel, weights: dict[str, float]) -> Path:
    path = Path(run_dir) / FUNCTIONS_FILE
    write_json_atomic(path, {**model.to_json(), "transformer_weights": weights})
    return path


def read_functions(run_dir: Path) -> tuple[FunctionModel, dict[str, float]] | None:
    """RUN/functions.json and its λ_f per function, or None where the run has none."""
    path = Path(run_dir) / FUNCTIONS_FILE
    if not path.is_file():
        return None
    data = read_json(path)
    weights = {k: float(v) for k, v in data.get("transformer_weights", {}).items()}
    return FunctionModel.from_json(data, str(path)), weights


def fit_function_weights(parts, lams, rounds: int = 2) -> tuple[dict[str, float], float]:
    """λ_f per function by coordinate search over :data:`WEIGHT_GRID` on the text's total
    log-probability (valid), the classes' weights ``lams`` fixed, a choice at the grid's top
    moved on towards :data:`WIDEST_WEIGHT`: (λ_f, total nats).
    ``parts``: a :class:`nslm.transformer.scoring.MixtureParts` made with functions."""
    from nslm.transformer.scoring import coordinate_search

    names = sorted({name for s in parts.sites.values() for name, _, _ in s.firings})

    def total(weights: dict[str, float]) -> float:
        return float(parts.score(lams, weights).log_probs.sum())

    weights, best = coordinate_search(names, WEIGHT_GRID, total, rounds)
    for name in names:  # a choice at the grid's top: halve its distance to 1 while it helps
        while WEIGHT_GRID[-1] <= weights[name] < WIDEST_WEIGHT:
            trial = {**weights, name: min(WIDEST_WEIGHT, 1 - (1 - weights[name]) / 2)}
            score = total(trial)
            if score <= best + 1e-9:
                break
            weights, best = trial, score
    return weights, best
