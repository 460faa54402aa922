"""The open micro-models of a training run: ``RUN/open.json``, beside ``RUN/micro.json``.

``nslm micro fit RUN`` fits, after the grid search, one open micro-model
(:mod:`nslm.micro.open_set`) per number and place class of the run on its training split,
and writes their parameters here, so that scoring, prediction and generation read them
without the corpus. The spelling model behind ``<unk>`` (:mod:`nslm.scores.spelling`) is
rebuilt from the run's vocabulary and training counts when the run is opened (its fit takes
a fraction of a second), so it is not stored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from nslm.atomic import write_json_atomic
from nslm.errors import NslmError
from nslm.micro.model import MicroModel
from nslm.micro.open_bases import OPEN_CLASSES
from nslm.micro.open_set import OpenMicroModel
from nslm.runs.files import read_json
from nslm.runs.load import LoadedRun
from nslm.scores.spelling import SpellingModel, fit_spelling

OPEN_FILE = "open.json"


def fit_run_open(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    progress: Callable[[str], None] | None = None,
) -> dict[str, OpenMicroModel]:
    """An open micro-model for every number and place class of ``micro``, fitted on the
    run's training split."""
    out = {}
    for name, model in micro.items():
        if name in OPEN_CLASSES and type(model) is MicroModel:
            if progress is not None:
                progress(name)
            out[name] = OpenMicroModel.fit(model, loaded.corpus.train)
    return out


def write_run_open(run_dir: Path, models: dict[str, OpenMicroModel]) -> Path:
    path = Path(run_dir) / OPEN_FILE
    write_json_atomic(path, {"classes": {n: m.get_params() for n, m in models.items()}})
    return path


def load_run_open(loaded: LoadedRun, micro: dict[str, MicroModel]) -> dict[str, OpenMicroModel]:
    """The run's open micro-models over its plain ``micro``; a one-line error without them."""
    path = Path(loaded.run_dir) / OPEN_FILE
    if not path.is_file():
        raise NslmError(f"no {path}: run 'nslm micro fit {loaded.run_dir}' first")
    params = read_json(path).get("classes", {})
    missing = [n for n in params if n not in micro]
    if missing:
        raise NslmError(f"{path} has classes micro.json lacks: {', '.join(missing)}; refit")
    return {n: OpenMicroModel.from_params(p, micro[n]) for n, p in params.items()}


def open_vocabulary(
    loaded: LoadedRun,
) -> tuple[dict[str, OpenMicroModel], SpellingModel] | None:
    """The run's open micro-models (over its plain micro-models) and the spelling model
    behind ``<unk>``; None (and a note on stderr) for a run without RUN/open.json."""
    from nslm.runs.micro import load_run_micro

    if not (Path(loaded.run_dir) / OPEN_FILE).is_file():
        print(
            f"note: no {Path(loaded.run_dir) / OPEN_FILE}: the open-vocabulary tables need "
            f"'nslm micro fit {loaded.run_dir}'",
            file=sys.stderr,
        )
        return None
    models = load_run_open(loaded, load_run_micro(loaded))
    return models, fit_spelling(loaded.corpus)
