"""The context-aware micro-models of a run: ``RUN/micro_context.json`` + ``.safetensors``.

``nslm micro fit RUN --context`` fits, for each class of ``micro.json``, on the LM's hidden
states at the class's train positions (the LM frozen), with its L2 weight chosen on valid:

* a gate over the class's K best grid cells and the selected cell's restricted parts
  (``mixture``: :mod:`nslm.micro.context_model`);
* when the selected metric compares with the context, its bins (and, for a number class,
  bins of the member's own value) shifted by h (``shifted``: :mod:`nslm.micro.shifted`).

The one with the lowest valid perplexity at the class's positions is kept, or the plain
micro-model when neither beats it (``kept: false``): a context NSLM is never worse on valid
than the plain NSLM, class by class. The JSON holds every figure tried and the kept model's
parameters (its micro-models as in ``micro.json``); the safetensors file its tensors. A hash
of the LM's weights ties them to the states they were fitted on: a retrained LM refuses them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.numpy import load_file, save

from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.files.json_policy import read_json
from nslm.micro.context_model import ContextMicroModel, grid_components
from nslm.micro.gated import compares_with_context
from nslm.micro.model import MicroModel
from nslm.micro.shifted import ShiftedMicroModel
from nslm.runs.load import LoadedRun
from nslm.runs.micro import MICRO_FILE, load_run_micro

CONTEXT_FILE = "micro_context.json"
CONTEXT_TENSORS = "micro_context.safetensors"
DEFAULT_COMPONENTS = 3  # grid cells per class, before the restricted parts
# bins of a number member's own value in the shifted model (micro/shifted.py): with and
# without, the better on valid kept (a small class overfits them)
VALUE_BINS = (0, 8)
MICRO_KINDS = ("auto", "plain", "context")  # what ``--micro`` of predict/generate takes
TRIED = ("plain", "mixture", "shifted", "shifted_mixture")  # the kinds a class may keep
# a context model's kind → its class and the tensors it keeps in the safetensors file
KINDS = {
    "mixture": (ContextMicroModel, ("W", "b", "mean", "scale")),
    "shifted": (ShiftedMicroModel, ("A", "a", "mean", "scale")),
    "shifted_mixture": (ContextMicroModel, ("W", "b", "mean", "scale")),
}


def lm_fingerprint(model: torch.nn.Module) -> str:
    """sha256 of the LM's parameters: the gates read its states, so they belong to it."""
    digest = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def class_states(
    loaded: LoadedRun, split_name: str, models: dict[str, MicroModel]
) -> dict[str, torch.Tensor]:
    """{class: (N_c, D) LM states at the class's positions of the split}: one backbone pass."""
    split = loaded.corpus.splits[split_name]
    where = {name: mm.cls.positions(split)[0] for name, mm in models.items()}
    union = np.unique(np.concatenate([*where.values(), np.zeros(0, np.int64)]))
    feats = loaded.scorer().features_at(split, union)
    return {name: feats[np.searchsorted(union, pos)] for name, pos in where.items()}


def fit_run_context(
    loaded: LoadedRun,
    plain: dict[str, MicroModel],
    *,
    components: int = DEFAULT_COMPONENTS,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Fit every class's gate; (the JSON payload, the gates' tensors)."""
    entries = read_json(Path(loaded.run_dir) / MICRO_FILE)["classes"]
    say = progress or (lambda _: None)
    say("reading the LM's states at the class positions of train and valid")
    states = {s: class_states(loaded, s, plain) for s in ("train", "valid")}
    corpus = loaded.corpus
    classes: dict[str, Any] = {}
    tensors: dict[str, np.ndarray] = {}
    for name, mm in plain.items():
        H_train, H_valid = states["train"][name], states["valid"][name]
        if len(H_train) == 0 or len(H_valid) == 0:
            classes[name] = {"kept": False, "why": "no train or valid positions"}
            continue
        parts = grid_components(entries[name], mm.cls, components)
        say(f"<{name}>: gate over {len(parts)} components on {len(H_train):,} train positions")
        mixture = ContextMicroModel(mm.cls, parts, loaded.model.backbone.out_dim)
        mixture.fit(corpus.train, H_train, corpus.valid, H_valid)
        plain_valid = mm.log_prob_targets(corpus.valid)  # NaN off the class
        tried = {"plain": float(-np.nanmean(plain_valid)), "mixture": mixture.gate.valid_nll_}
        models: dict[str, Any] = {"mixture": mixture}
        if compares_with_context(mm):
            say(f"<{name}>: {mm.metric.name} and value bins shifted by h")
            for value_bins in VALUE_BINS:
                shifted = ShiftedMicroModel(
                    mm, loaded.model.backbone.out_dim, value_bins=value_bins
                )
                shifted.fit(corpus.train, H_train, corpus.valid, H_valid)
                nll = float(-shifted.class_log_probs(corpus.valid, H_valid).mean())
                if "shifted" not in models or nll < tried["shifted"]:
                    tried["shifted"], models["shifted"] = nll, shifted
            shifted = models["shifted"]
            # the gate again, with the shifted model in the selected cell's place: h then
            # both moves mass within the metric's bins and picks another cell where useful
            # (a first year of an article, which has no previous year to shift from)
            say(f"<{name}>: gate with the shifted model as its first component")
            both = ContextMicroModel(mm.cls, [shifted, *parts[1:]], mixture.gate.dim)
            both.fit(corpus.train, H_train, corpus.valid, H_valid)
            tried["shifted_mixture"] = both.gate.valid_nll_
            models["shifted_mixture"] = both
        best = min(tried, key=tried.get)
        entry: dict[str, Any] = {}
        if best != "plain":
            entry.update(models[best].to_json())
            tensors.update({f"{name}.{k}": v for k, v in models[best].tensors().items()})
        classes[name] = {
            **entry,
            "kept": best != "plain",
            "kind": best,
            "train_positions": len(H_train),
            "valid_nll": tried,
        }
    payload = {
        "run": str(loaded.run_dir),
        "lm_fingerprint": lm_fingerprint(loaded.model),
        "components": components,
        "classes": classes,
    }
    return payload, tensors


def write_run_context(
    loaded: LoadedRun, payload: dict[str, Any], tensors: dict[str, np.ndarray]
) -> Path:
    """The tensors first, then the JSON that names them: a half-written pair never loads."""
    run = Path(loaded.run_dir)
    write_bytes_atomic(run / CONTEXT_TENSORS, save(tensors))
    write_json_atomic(run / CONTEXT_FILE, payload)
    return run / CONTEXT_FILE


def has_context_models(run_dir: Path | str) -> bool:
    return (Path(run_dir) / CONTEXT_FILE).is_file()


def load_run_context(loaded: LoadedRun, plain: dict[str, MicroModel]) -> dict[str, Any]:
    """The run's micro-models with each kept context-aware one in place of the plain one."""
    run = Path(loaded.run_dir)
    payload = read_json(run / CONTEXT_FILE)
    if payload.get("lm_fingerprint") != lm_fingerprint(loaded.model):
        raise NslmError(
            f"{run / CONTEXT_FILE} was fitted on other LM weights; run "
            f"'nslm micro fit {run} --context' again"
        )
    try:
        tensors = load_file(str(run / CONTEXT_TENSORS))
    except (SafetensorError, OSError) as exc:  # truncated, not safetensors (a pickle), …
        raise NslmError(f"cannot read {run / CONTEXT_TENSORS}: {exc}") from None
    out: dict[str, Any] = dict(plain)
    for name, entry in payload.get("classes", {}).items():
        if not entry.get("kept") or name not in plain:
            continue
        kind = KINDS.get(entry.get("kind", ""))
        if kind is None:
            raise NslmError(
                f"{run / CONTEXT_FILE}: <{name}> has an unknown kind "
                f"{entry.get('kind')!r}; run 'nslm micro fit {run} --context' again"
            )
        model_class, keys = kind
        found = {k[len(name) + 1 :]: v for k, v in tensors.items() if k.startswith(f"{name}.")}
        if any(k not in found for k in keys):
            raise NslmError(
                f"{run / CONTEXT_TENSORS} lacks <{name}>'s {', '.join(keys)}: run "
                f"'nslm micro fit {run} --context' again"
            )
        out[name] = model_class.from_json(entry, plain[name].cls, found)
    return out


def run_micro_models(loaded: LoadedRun, kind: str = "auto") -> dict[str, Any]:
    """The micro-models ``predict``, ``generate`` and ``serve`` use: the context-aware ones
    when the run has them (``auto``) or when asked (``context``), else the plain ones."""
    if kind not in MICRO_KINDS:
        raise NslmError(f"micro-models must be one of {', '.join(MICRO_KINDS)}, not {kind!r}")
    plain = load_run_micro(loaded)
    if kind == "plain" or (kind == "auto" and not has_context_models(loaded.run_dir)):
        return plain
    if not has_context_models(loaded.run_dir):
        raise NslmError(
            f"no {Path(loaded.run_dir) / CONTEXT_FILE}: run 'nslm micro fit "
            f"{loaded.run_dir} --context' first"
        )
    return load_run_context(loaded, plain)
