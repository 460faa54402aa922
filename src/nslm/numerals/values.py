"""The value a model predicts for a numeral: the mode of its distribution over numerals.

Spithourakis & Riedel (2018, "Numeracy for Language Models", Sec. 5) score numerals by
value as well as by perplexity: at each numeral of the text, the model's most probable
numeral among a candidate set is taken as its prediction and compared with the gold value
(MAPE, MdAPE, MdAE: :mod:`nslm.numerals.value_metrics`). For the word-level models of a
run (NNLM, NSLM, NSLM-open) the candidates are given strings of the vocabulary (Table 4:
their set, :func:`~nslm.numerals.value_metrics.candidate_strings`, so that every row
chooses among the same numerals) or by default all the vocabulary's numerals: the NNLM's
softmax restricted to them, or the NSLM's marginal Σ_c P(c | h) · P(w | c) (Eq. 4), each
λ-mixed with the NNLM as the reported ensemble is. NSLM-open replaces each open class's P_MM
over V_c by its open micro-model's P_open over V_c (:mod:`nslm.micro.open_set`), the rest of
the class's mass going to members outside the vocabulary; those are not candidates here, so
its mode is that of its in-vocabulary part.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from nslm.data.corpus import Split
from nslm.data.numbers import is_number, number_value
from nslm.micro.open_set import OpenMicroModel
from nslm.scores.mixture import ensemble_log_probs
from nslm.scores.passes import Scorer


def numeral_types(itos: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The vocabulary's numerals: (type ids, values read from their strings)."""
    ids = np.array([i for i, t in enumerate(itos) if t[:1].isdigit() and is_number(t)])
    return ids, np.array([number_value(itos[i]) for i in ids])


def candidate_types(itos: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
    """The vocabulary ids of ``candidates`` (numeral strings, every one in the vocabulary:
    a word model's softmax names no other string)."""
    index = {t: i for i, t in enumerate(itos)}
    missing = [c for c in candidates if c not in index]
    if missing:
        raise ValueError(f"{len(missing)} candidates outside the vocabulary, e.g. {missing[0]!r}")
    return np.array([index[c] for c in candidates], dtype=np.int64)


@torch.no_grad()
def predicted_values(
    scorer: Scorer,
    split: Split,
    positions: np.ndarray,
    itos: Sequence[str],
    class_names: Sequence[str],
    models: dict[str, tuple[dict, float, dict[str, OpenMicroModel] | None]],
    chunk: int = 256,
    candidates: Sequence[str] | None = None,
) -> dict[str, np.ndarray]:
    """The predicted value at every position, per model: ``{"NNLM": (N,), name: (N,)}``.

    ``models`` maps a column name to (micro-models, λ, open micro-models or None): the NSLM
    ensemble λ·P_NNLM + (1 − λ)·P_NSLM with those micro-models, each class with an open
    micro-model scored by its P_open over V_c instead. ``candidates``: the strings chosen
    among (default the vocabulary's numerals).
    """
    if candidates is None:
        ids, values = numeral_types(itos)
    else:
        ids = candidate_types(itos, candidates)
        values = np.array([number_value(c) for c in candidates])
    modes = word_model_modes(scorer, split, positions, ids, class_names, models, chunk)
    return {name: values[index] for name, index in modes.items()}


@torch.no_grad()
def word_model_modes(
    scorer: Scorer,
    split: Split,
    positions: np.ndarray,
    ids: np.ndarray,
    class_names: Sequence[str],
    models: dict[str, tuple[dict, float, dict[str, OpenMicroModel] | None]],
    chunk: int = 256,
) -> dict[str, np.ndarray]:
    """:func:`predicted_values`' modes as indices into the candidates' vocabulary ``ids``."""
    positions = np.asarray(positions, dtype=np.int64)
    feats = scorer.features_at(split, positions)
    nnlm_head = scorer.model.heads["nnlm"]
    out = {name: np.zeros(len(positions), dtype=np.int64) for name in ["NNLM", *models]}
    for start in range(0, len(positions), chunk):
        rows = slice(start, start + chunk)
        h, where = feats[rows], positions[rows]
        nnlm = nnlm_head.log_dist(h).double().numpy()[:, ids]
        out["NNLM"][rows] = nnlm.argmax(axis=1)
        for name, (micro, lam, opened) in models.items():
            open_models = opened or {}
            within = {
                n: mm.log_prob(mm.cls.context(split, where, mm.context), h)
                for n, mm in micro.items()
                if n not in open_models
            }
            for n, om in open_models.items():
                ctx = om.cls.context(split, where, om.micro.context)
                within[n] = om.log_prob_known(ctx, h if om.needs_features else None)
            # each open class's rows are its plain micro-model's V_c: that model checks them
            models_of = {**micro, **{n: om.micro for n, om in open_models.items()}}
            full = scorer.distribution(h, models_of, class_names, within)
            mixed = ensemble_log_probs(nnlm, full.marginal()[:, ids], lam)
            out[name][rows] = mixed.argmax(axis=1)
    return out
