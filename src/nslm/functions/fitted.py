"""The functions fitted on a corpus: WikiText-2 train (each function's own fit, the writing
PDFs, the confidences), chosen on WikiText-2 valid (the confidences' L2 strength, and
``nslm check``'s threshold τ), kept as one JSON file in the cache beside the prepared
corpora, so that ``nslm check`` fits once (about a minute) and then reads."""

from __future__ import annotations

import json
from pathlib import Path

from nslm.data.locate import locate_corpus
from nslm.data.prepare import prepared_cache_root
from nslm.files.atomic import write_json_atomic
from nslm.functions.check import choose_threshold
from nslm.functions.documents import corpus_file_documents
from nslm.functions.model import FunctionModel, code_fingerprint

CORPUS = "wikitext-2"
MAX_FALSE_FLAGS = 0.02  # the share of valid's untouched numbers τ may flag
CACHE_NAME = "functions-wikitext-2-{code}.json"  # keyed by the functions' code


def fit_on_corpus(corpus: str = CORPUS, classes: str = "none") -> FunctionModel:
    """Every registered function fitted on ``corpus``'s train, chosen on its valid, with
    ``nslm check``'s τ (a false-flag rate ≤ :data:`MAX_FALSE_FLAGS` on valid)."""
    paths = locate_corpus(corpus)
    train = corpus_file_documents(paths["train"], classes)
    valid = corpus_file_documents(paths["valid"], classes)
    model = FunctionModel().fit(train, valid)
    model.check = choose_threshold(model, valid, MAX_FALSE_FLAGS)
    model.fitted_on = {"corpus": corpus, "train": str(paths["train"]), "valid": str(paths["valid"])}
    return model


def cached_model(cache: Path | None = None) -> FunctionModel:
    """The functions fitted on WikiText-2, from the cache, fitting them on first use."""
    path = (cache or prepared_cache_root()) / CACHE_NAME.format(code=code_fingerprint())
    if path.is_file():
        model = FunctionModel.from_json(json.loads(path.read_text(encoding="utf-8")), str(path))
        if set(model.functions) == set(FunctionModel().functions):
            return model
    model = fit_on_corpus()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, model.to_json())
    return model
