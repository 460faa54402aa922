"""Fit what sits on the frozen Transformer, into its run directory: the plain micro-models
(``RUN/micro.json``, the same grid search as ``nslm micro fit``, on the corpus alone), the
class head (on a WikiText-2 train prefix's Transformer pass) and the weights λ_c (on a
valid prefix's pass), with what each was fitted on in ``RUN/transformer.json``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.micro.model import MicroModel
from nslm.micro.store import load_micro_models, write_micro_json
from nslm.transformer.class_head import ClassHead, StartMass
from nslm.transformer.passes import TextPass
from nslm.transformer.scoring import MixtureParts, fit_lambdas, labels_of

MICRO_FILE = "micro.json"
HEAD_FILE = "class_head.safetensors"
FIT_FILE = "transformer.json"


def fit_micro_models(
    run_dir: Path, corpus: PreparedCorpus, fast: bool = True
) -> dict[str, MicroModel]:
    """``RUN/micro.json``: every class's {metric, PDF} by the grid search on valid
    (``fast``: without the mixture of Gaussians, as ``nslm micro fit --fast``); reused
    when it is there."""
    from nslm.micro.pdfs import pdf_names
    from nslm.micro.pipeline import fit_micro

    path = run_dir / MICRO_FILE
    if not path.is_file():
        pdfs = [p for p in pdf_names() if p != "mog"] if fast else None
        _, payload = fit_micro(corpus, pdfs=pdfs)
        payload["grid"] = "fast" if fast else "full"
        payload["run"] = str(run_dir)
        write_micro_json(path, payload)
    return load_micro_models(path, corpus)


def fit_head(
    run_dir: Path,
    train: TextPass,
    class_names: tuple[str, ...],
    valid: TextPass | None = None,
    start_mass: StartMass | None = None,
) -> tuple[ClassHead, dict[str, Any]]:
    """The class head on ``train``'s pass, written to RUN/class_head.safetensors. With
    ``start_mass`` and ``valid``, two heads are fitted on train, one on h alone and one
    reading the Transformer's start masses too, and the one with the lower cross-entropy
    on valid is kept. Returns the head and the evidence."""
    from safetensors.torch import save

    labels = labels_of(train)
    heads = {"hidden state": ClassHead.fit(train.scores.hidden, labels, class_names[1:])}
    if start_mass is not None and valid is not None:
        heads["hidden state + start masses"] = ClassHead.fit(
            train.scores.hidden, labels, class_names[1:], start_mass=start_mass
        )
    evidence: dict[str, Any] = {"inputs": list(heads)}
    if valid is not None:
        valid_labels = labels_of(valid)
        losses = {k: h.nll(valid.scores.hidden, valid_labels) for k, h in heads.items()}
        evidence["valid_nll"] = losses
        kept = min(losses, key=losses.get)
    else:
        kept = "hidden state"
    evidence["kept"] = kept
    head = heads[kept]
    write_bytes_atomic(run_dir / HEAD_FILE, save(head.tensors()))
    return head, evidence


def fit_weights(
    run_dir: Path,
    valid: TextPass,
    train: TextPass,
    members: Any,
    models: dict[str, MicroModel],
    head: ClassHead,
    class_names: tuple[str, ...],
    name: str = FIT_FILE,
    head_choice: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """λ_c on ``valid``; writes and returns ``RUN/transformer.json`` (or ``RUN/name``), with
    ``head_choice`` (:func:`fit_head`'s evidence) under "head"."""
    t0 = time.perf_counter()
    parts = MixtureParts(valid, members, models, head, class_names, cache=True)
    lams, best = fit_lambdas(parts)
    base = float(parts.score(None).log_probs.sum())
    labels = labels_of(train)
    payload = {
        "lambdas": lams,
        "valid": {
            "tokens": valid.tokens,
            "bytes": len(valid.plain.encode("utf-8", errors="surrogatepass")),
            "log_prob": best,
            "transformer_log_prob": base,
        },
        "head": {
            "train_tokens": train.tokens,
            "train_class_positions": int(np.count_nonzero(labels)),
            "per_class": {
                name: int(np.count_nonzero(labels == c + 1))
                for c, name in enumerate(class_names[1:])
            },
            **({"choice": head_choice} if head_choice else {}),
        },
        "seconds": time.perf_counter() - t0,
    }
    write_json_atomic(run_dir / name, payload)
    return payload


def load_head(run_dir: Path, class_names: tuple[str, ...], output: Any = None) -> ClassHead:
    """RUN/class_head.safetensors; ``output``: the backbone's output layer, which a head
    that reads the Transformer's start masses needs."""
    from nslm.files.tensors import read_tensors

    tensors = read_tensors(run_dir / HEAD_FILE, "class head")
    return ClassHead.from_tensors(tensors, class_names[1:], output)


def class_states(text_pass: TextPass, models: dict[str, MicroModel]) -> dict[str, np.ndarray]:
    """{class: (N_c, D) the Transformer's states at the class's positions of the pass's
    split}: the state that predicted each word's first token (float32)."""
    split = text_pass.text.split
    out = {}
    for name, model in models.items():
        positions, _ = model.cls.positions(split)
        first = text_pass.ranges[positions, 0]
        if (first < 0).any():  # an unspelt class word: its nearest token start
            first = np.where(first < 0, 0, first)
        out[name] = text_pass.scores.hidden[first].astype(np.float32)
    return out


def fit_context_models(
    run_dir: Path,
    train: TextPass,
    valid: TextPass,
    plain: dict[str, MicroModel],
    components: int = 3,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Context-aware micro-models on the Transformer's states (docs/context-micro-models.md):
    per class, a gate on h over the class's ``components`` best grid cells of micro.json
    (and the selected cell's restricted parts), fitted on the train prefix's class positions
    and kept where its valid NLL beats the plain micro-model's. Returns (the models, each
    class's valid NLLs)."""
    from nslm.micro.context_model import ContextMicroModel, grid_components
    from nslm.micro.store import read_micro_json

    entries = read_micro_json(run_dir / MICRO_FILE)["classes"]
    states = {"train": class_states(train, plain), "valid": class_states(valid, plain)}
    width = train.scores.hidden.shape[1]
    chosen: dict[str, Any] = {}
    report: dict[str, Any] = {}
    for name, mm in plain.items():
        h_train, h_valid = states["train"][name], states["valid"][name]
        if len(h_train) < 10 or len(h_valid) < 5:
            chosen[name] = mm
            report[name] = {"kept": False, "why": "too few train or valid positions"}
            continue
        parts = grid_components(entries[name], mm.cls, components)
        mixture = ContextMicroModel(mm.cls, parts, width)
        mixture.fit(train.text.split, h_train, valid.text.split, h_valid)
        plain_nll = float(-np.nanmean(mm.log_prob_targets(valid.text.split)))
        kept = mixture.gate.valid_nll_ < plain_nll
        chosen[name] = mixture if kept else mm
        report[name] = {
            "kept": bool(kept),
            "valid_nll_plain": plain_nll,
            "valid_nll_context": float(mixture.gate.valid_nll_),
            "train_positions": len(h_train),
            "valid_positions": len(h_valid),
        }
    return chosen, report
