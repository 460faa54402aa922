"""Interventions on a byte LM as a user names them: which units, which direction, how much.

:class:`nslm.byte_lm.intervention.Intervention` does the work inside the LSTM; this module
turns the names a command takes (``--ablate 356,12 --ablate-mode mean``, ``--clamp
356=1.5``, ``--steer probe:FILE --steer-at cell,hidden --steer-scale 2``) into one, and
samples many texts from the intervened model at once (the steering benchmark needs
hundreds per condition).

Directions (``--steer SOURCE``):

- ``probe:FILE``: a saved two-class :class:`L1Probe`'s weight vector on the raw features,
  w / σ (the probe standardises each feature by σ first), i.e. the direction in which its
  logit grows fastest; a probe on ``mean_cell_hidden`` (2H features) gives its cell half to
  the cell and its hidden half to the hidden state;
- ``output:BYTES``: the mean output-layer row of those bytes minus the mean row of all 256,
  the direction the softmax reads as "one of these bytes next" (the positive control of the
  steering benchmark: ``output:0123456789``);
- ``random:SEED``: a Gaussian direction of norm 1 (the control a real direction must beat);
- a ``.npy``, ``.json`` or text file of H (or 2H) numbers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from nslm.byte_lm.data import ARTICLE_END
from nslm.byte_lm.intervention import PLACES, Intervention, intervening
from nslm.errors import NslmError
from nslm.generation.neural import generate_many
from nslm.generation.sampling import Sampler
from nslm.runs.load import LoadedRun, require_byte_lm

ABLATE_MODES = ("zero", "mean")
MEAN_BYTES = 100_000  # valid bytes the units' means are taken over (mean-ablation)


def parse_units(values: str | Sequence[str]) -> tuple[int, ...]:
    """``"356,12"`` (or several such strings) → (356, 12)."""
    items = [values] if isinstance(values, str) else list(values)
    try:
        return tuple(int(u) for v in items for u in v.split(",") if u.strip())
    except ValueError:
        raise NslmError(f"units are integers, e.g. 356,12, not {','.join(items)!r}") from None


def parse_clamp(values: str | Sequence[str]) -> dict[int, float]:
    """``"356=1.5,12=-2"`` (or several such strings) → {356: 1.5, 12: -2.0}."""
    items = [values] if isinstance(values, str) else list(values)
    clamp = {}
    for item in (i.strip() for v in items for i in v.split(",") if i.strip()):
        unit, _, number = item.partition("=")
        try:
            clamp[int(unit)] = float(number)  # no "=": float("") fails too
        except ValueError:
            raise NslmError(f"{item!r} is not UNIT=VALUE, e.g. 356=1.5") from None
    return clamp


def unit_means(loaded: LoadedRun, n_bytes: int = MEAN_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Each unit's mean cell and hidden value over the first ``n_bytes`` of the run's valid
    split, read as 100 rows from the zero state: the value mean-ablation puts in its place
    (the "mean" of mean-ablation, e.g. Meyes et al. 2019 vs zeroing)."""
    from nslm.models.lstm import lstm_state_chunks

    ids = np.asarray(loaded.corpus.splits["valid"].token_ids[:n_bytes], dtype=np.int64)
    rows = max(1, min(100, len(ids) // 100))
    x = torch.from_numpy(ids[: len(ids) // rows * rows].reshape(rows, -1).T.copy())
    h_sum = c_sum = 0.0
    for _, h, c in lstm_state_chunks(loaded.model.backbone, x):
        h_sum, c_sum = h_sum + h.double().sum((0, 1)), c_sum + c.double().sum((0, 1))
    count = x.numel()
    return (c_sum / count).float().numpy(), (h_sum / count).float().numpy()


def direction(loaded: LoadedRun, source: str) -> np.ndarray:
    """The steering direction named by ``source`` (module docstring): (H,) or (2H,)."""
    kind, _, rest = source.partition(":")
    if kind == "probe":
        from nslm.byte_lm.probes.estimators import L1Probe, load_probe

        probe = load_probe(rest)
        if not isinstance(probe, L1Probe) or len(probe.classes_) != 2:
            raise NslmError(f"{rest}: --steer probe: needs a two-class L1 probe (sentiment)")
        return (probe.weights() / probe.scale_).astype(np.float32)
    if kind == "output":
        weight = loaded.model.heads["nnlm"].softmax.linear.weight.detach().float().numpy()
        chosen = sorted(set(rest.encode("utf-8")))
        if not chosen:
            raise NslmError("--steer output:BYTES needs bytes, e.g. output:0123456789")
        return weight[chosen].mean(0) - weight.mean(0)
    if kind == "random":
        try:
            seed = int(rest)
        except ValueError:
            raise NslmError(f"--steer random:SEED needs an integer seed, not {rest!r}") from None
        d = np.random.default_rng(seed).standard_normal(loaded.model.backbone.out_dim)
        return (d / np.linalg.norm(d)).astype(np.float32)
    return _numbers_file(Path(source))


def _numbers_file(path: Path) -> np.ndarray:
    if not path.is_file():
        raise NslmError(f"--steer: no file {path} (or probe:FILE, output:BYTES, random:SEED)")
    try:
        if path.suffix == ".npy":
            return np.load(path, allow_pickle=False).astype(np.float32).ravel()
        if path.suffix == ".json":
            return np.asarray(json.loads(path.read_text()), dtype=np.float32).ravel()
        return np.loadtxt(path, dtype=np.float32).ravel()
    except (ValueError, OSError) as err:
        raise NslmError(f"--steer: {path} is not a list of numbers ({err})") from None


def steer_places(d: np.ndarray, places: Sequence[str], hidden: int) -> dict[str, torch.Tensor]:
    """Where each part of ``d`` is added: an H-vector goes to every place, a 2H one (cell
    half, hidden half: a ``mean_cell_hidden`` probe) to the cell and the hidden state."""
    bad = [p for p in places if p not in PLACES]
    if bad:
        raise NslmError(f"--steer-at: {bad[0]!r} is not one of {', '.join(PLACES)}")
    if len(d) == hidden:
        return {p: torch.from_numpy(d.copy()) for p in places}
    if len(d) == 2 * hidden:
        halves = {"cell": d[:hidden], "hidden": d[hidden:]}
        if "candidate" in places:
            raise NslmError("a 2H direction (cell and hidden halves) cannot steer the candidate")
        return {p: torch.from_numpy(halves[p].copy()) for p in places}
    raise NslmError(f"the direction has {len(d)} numbers; the LSTM has {hidden} units")


def build_intervention(
    loaded: LoadedRun,
    *,
    ablate: Sequence[int] = (),
    ablate_mode="zero",
    clamp: dict[int, float] | None = None,
    steer: str | None = None,
    steer_at: Sequence[str] = ("hidden",),
    steer_scale: float = 1.0,
    means: tuple[np.ndarray, np.ndarray] | None = None,
) -> Intervention | None:
    """The intervention the options describe, checked against the model; None if none."""
    clamp = dict(clamp or {})
    if not ablate and not clamp and steer is None:
        return None
    require_byte_lm(loaded, "interventions (--ablate, --clamp, --steer)")
    hidden = loaded.model.backbone.out_dim
    units = [*ablate, *clamp]
    bad = [u for u in units if not 0 <= u < hidden]
    if bad:
        raise NslmError(
            f"unit {bad[0]} is out of range: the model has {hidden} units (0–{hidden - 1})"
        )
    if ablate_mode not in ABLATE_MODES:
        raise NslmError(f"--ablate-mode is zero or mean, not {ablate_mode!r}")
    iv = Intervention(ablate=tuple(int(u) for u in ablate), clamp=clamp, alpha=steer_scale)
    if ablate and ablate_mode == "mean":
        cell, hid = means if means is not None else unit_means(loaded)
        iv.ablate_cell = torch.from_numpy(cell[list(ablate)])
        iv.ablate_hidden = torch.from_numpy(hid[list(ablate)])
    if steer is not None:
        iv.steer = steer_places(direction(loaded, steer), steer_at, hidden)
    return iv


def sample_bytes(
    loaded: LoadedRun,
    prime: bytes,
    n: int,
    max_bytes: int,
    sampler: Sampler,
    iv: Intervention | None = None,
) -> list[bytes]:
    """``n`` continuations of ``prime`` from the model under ``iv``, in one batch."""
    require_byte_lm(loaded, "byte generation")
    with intervening(loaded.model, iv):
        rows = generate_many(
            loaded.model, list(prime), n, max_bytes, sampler, head="nnlm", eos_id=ARTICLE_END[0]
        )
    return [bytes(row) for row in rows]


def intervention_from_fields(loaded: LoadedRun, fields: dict, probe: Path | None = None):
    """The intervention of the explorer's fields (strings, as a user types them: ablate
    "356,12", ablate_mode, clamp "356=1.5", steer, steer_at "cell,hidden", steer_scale).
    A web page names no file: its steer is ``output:BYTES``, ``random:SEED`` or
    ``sentiment`` (the run's own probe, ``probe``)."""
    steer = fields.get("steer") or None
    if steer == "sentiment":
        if probe is None:
            raise NslmError("steer 'sentiment' needs the run's probe: nslm probe sentiment RUN")
        steer = f"probe:{probe}"
    elif steer is not None and steer.partition(":")[0] not in ("output", "random"):
        raise NslmError("steer is output:BYTES, random:SEED or sentiment here")
    places = [p.strip() for p in (fields.get("steer_at") or "hidden").split(",") if p.strip()]
    return build_intervention(
        loaded,
        ablate=parse_units(fields.get("ablate") or ""),
        ablate_mode=fields.get("ablate_mode") or "zero",
        clamp=parse_clamp(fields.get("clamp") or ""),
        steer=steer,
        steer_at=places,
        steer_scale=float(fields.get("steer_scale", 1.0)),
    )
