"""A run's functions: fitted on its corpus as its model reads it (the training split's
documents, ``<unk>`` where the vocabulary has no word), chosen on its validation split, and
kept as RUN/functions.json, so that ``nslm predict`` and ``nslm.load(RUN).predict`` mix them
in from the run alone."""

from __future__ import annotations

from pathlib import Path

from nslm.files.atomic import write_json_atomic
from nslm.files.json_policy import read_json
from nslm.functions.micro import mix_into_distribution, split_documents
from nslm.functions.model import FunctionModel
from nslm.runs.load import LoadedRun

FUNCTIONS_FILE = "functions.json"


def fit_run_functions(loaded: LoadedRun) -> FunctionModel:
    """Every registered function, fitted on the run's training split, chosen on valid."""
    corpus = loaded.corpus
    itos = corpus.vocab.itos
    train, _ = split_documents(corpus.train, itos)
    valid, _ = split_documents(corpus.valid, itos)
    model = FunctionModel().fit(train, valid)
    model.fitted_on = {"corpus": str(corpus.meta.get("name", "")), "run": str(loaded.run_dir)}
    return model


def write_run_functions(run_dir: Path, model: FunctionModel) -> Path:
    path = Path(run_dir) / FUNCTIONS_FILE
    write_json_atomic(path, model.to_json())
    return path


def load_run_functions(run_dir: Path) -> FunctionModel | None:
    """RUN/functions.json, or None where the run has none (a one-line error if it is not a
    functions file)."""
    path = Path(run_dir) / FUNCTIONS_FILE
    if not path.is_file():
        return None
    return FunctionModel.from_json(read_json(path), str(path))


def run_adjuster(loaded: LoadedRun):
    """The run's functions as :func:`nslm.generation.predict.predict_many`'s ``adjust``
    hook, or None where the run has no RUN/functions.json."""
    functions = load_run_functions(Path(loaded.run_dir))
    if functions is None:
        return None
    corpus = loaded.corpus

    def adjust(full, prompts) -> None:
        mix_into_distribution(full, functions, prompts, corpus.vocab.itos, corpus.class_names)

    return adjust
