"""The open micro-models of a training run: ``RUN/open.json``, beside ``RUN/micro.json``.

``nslm micro fit RUN`` fits, after the grid search, one open micro-model
(:mod:`nslm.micro.open_set`) per number and place class of the run on its training split,
and writes their parameters here, so that scoring, prediction and generation read them
without the corpus. The spelling model behind ``<unk>`` (:mod:`nslm.scores.spelling`) is
rebuilt from the run's vocabulary and training counts when the run is opened (its fit takes
a fraction of a second), so it is not stored.

The gates of the classes whose open model reads the LM's state (years, days, places: see
:mod:`nslm.micro.open_set`) keep their tensors in ``RUN/open.safetensors``; a hash of the
LM's weights in open.json ties them to the states they were fitted on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from safetensors import SafetensorError
from safetensors.numpy import load_file, save

from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.files.json_policy import read_json
from nslm.micro.model import MicroModel
from nslm.micro.open_bases import OPEN_CLASSES
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.unk_share import NewMass
from nslm.runs.context_micro import class_states, lm_fingerprint
from nslm.runs.load import LoadedRun
from nslm.scores.spelling import SpellingModel, fit_spelling

OPEN_FILE = "open.json"
OPEN_TENSORS = "open.safetensors"


def fit_run_open(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    progress: Callable[[str], None] | None = None,
) -> dict[str, OpenMicroModel]:
    """An open micro-model for every number and place class of ``micro``, fitted on the
    run's training split."""
    say = progress or (lambda _: None)
    out = {}
    for name, model in micro.items():
        if name in OPEN_CLASSES and type(model) is MicroModel:
            say(name)
            out[name] = OpenMicroModel.fit(model, loaded.corpus.train)
    gateable = {n: om.micro for n, om in out.items() if om.gateable}
    corpus = loaded.corpus
    if gateable:
        say(f"the LM's states at the positions of {', '.join(gateable)} (train and valid)")
        states = {s: class_states(loaded, s, gateable) for s in ("train", "valid")}
        for name in gateable:
            kept = out[name].fit_gate(
                corpus.train, states["train"][name], corpus.valid, states["valid"][name]
            )
            nll = getattr(out[name], "gate_valid_nll", {})
            say(f"{name}: gate {'kept' if kept else 'not kept'} (valid NLL {nll})")
    for name, om in out.items():
        shape = om.fit_known_shape(corpus.valid)
        nll = getattr(om, "known_shape_valid_nll", "gated: the open shape")
        say(f"{name}: known members shared as the {shape} model (valid NLL {nll})")
    return out


def write_run_open(
    loaded: LoadedRun,
    models: dict[str, OpenMicroModel],
    new_mass: tuple[NewMass, dict] | None = None,
) -> Path:
    """The gates' tensors first, then the JSON that names them: a half-written pair never
    loads. ``new_mass``: the choice of the new members' mass and its evidence
    (:func:`nslm.evaluation.open_report.fit_run_new_mass`)."""
    run = Path(loaded.run_dir)
    tensors = {f"{n}.{k}": v for n, m in models.items() for k, v in m.tensors().items()}
    payload: dict = {"classes": {n: m.get_params() for n, m in models.items()}}
    if new_mass is not None:
        payload["new_mass"] = {**new_mass[0].to_json(), **new_mass[1]}
    if tensors:
        write_bytes_atomic(run / OPEN_TENSORS, save(tensors))
        payload["lm_fingerprint"] = lm_fingerprint(loaded.model)
    write_json_atomic(run / OPEN_FILE, payload)
    return run / OPEN_FILE


def load_run_open(loaded: LoadedRun, micro: dict[str, MicroModel]) -> dict[str, OpenMicroModel]:
    """The run's open micro-models over its plain ``micro``; a one-line error without them."""
    path = Path(loaded.run_dir) / OPEN_FILE
    if not path.is_file():
        raise NslmError(f"no {path}: run 'nslm micro fit {loaded.run_dir}' first")
    payload = read_json(path)
    params = payload.get("classes", {})
    missing = [n for n in params if n not in micro]
    if missing:
        raise NslmError(f"{path} has classes micro.json lacks: {', '.join(missing)}; refit")
    tensors: dict = {}
    if any("gate" in p for p in params.values()):
        if payload.get("lm_fingerprint") != lm_fingerprint(loaded.model):
            raise NslmError(
                f"{path} was fitted on other LM weights; run 'nslm micro fit "
                f"{loaded.run_dir}' again"
            )
        try:
            tensors = load_file(str(Path(loaded.run_dir) / OPEN_TENSORS))
        except (SafetensorError, OSError) as exc:  # missing, truncated, not safetensors
            raise NslmError(f"cannot read {Path(loaded.run_dir) / OPEN_TENSORS}: {exc}") from None

    def own(name: str) -> dict:
        return {k[len(name) + 1 :]: v for k, v in tensors.items() if k.startswith(f"{name}.")}

    return {n: OpenMicroModel.from_params(p, micro[n], own(n)) for n, p in params.items()}


def run_new_mass(loaded: LoadedRun) -> NewMass:
    """Where the run's NSLM-open takes its new members' mass from (RUN/open.json's choice;
    the escape for a run fitted before the choice was made, or without open.json)."""
    path = Path(loaded.run_dir) / OPEN_FILE
    if not path.is_file():
        return NewMass()
    return NewMass.from_json(read_json(path).get("new_mass"))


def run_open_models(loaded: LoadedRun, *, required: bool = False) -> dict[str, OpenMicroModel]:
    """The run's open micro-models (RUN/open.json) over its plain micro-models: the one way
    every command and the API open them. ``{}`` for a run without open.json, or the one-line
    error of :func:`load_run_open` when ``required``."""
    from nslm.runs.micro import load_run_micro

    if not required and not (Path(loaded.run_dir) / OPEN_FILE).is_file():
        return {}
    return load_run_open(loaded, load_run_micro(loaded))


def open_vocabulary(
    loaded: LoadedRun,
) -> tuple[dict[str, OpenMicroModel], SpellingModel] | None:
    """The run's open micro-models (over its plain micro-models) and the spelling model
    behind ``<unk>``; None (and a note on stderr) for a run without RUN/open.json."""
    if not (Path(loaded.run_dir) / OPEN_FILE).is_file():
        print(
            f"note: no {Path(loaded.run_dir) / OPEN_FILE}: the open-vocabulary tables need "
            f"'nslm micro fit {loaded.run_dir}'",
            file=sys.stderr,
        )
        return None
    return run_open_models(loaded, required=True), fit_spelling(loaded.corpus)
