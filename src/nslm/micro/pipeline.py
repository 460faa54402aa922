"""Fit micro-models for a prepared corpus end to end: classes → grid search → evaluation → JSON.

This is what ``nslm micro fit`` runs, and what ``nslm micro fit RUN`` will run for a training
run; it needs no language model (see :mod:`nslm.micro.selection`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.errors import NslmError
from nslm.micro.classdata import ClassData, builtin_class, regex_class
from nslm.micro.model import MicroModel
from nslm.micro.plugins import UserClass
from nslm.micro.selection import ClassSelection, evaluate, select_class
from nslm.micro.store import selection_to_json


def build_classes(
    corpus: PreparedCorpus,
    names: list[str] | None = None,
    user_classes: list[UserClass] = (),  # type: ignore[assignment]
) -> list[tuple[ClassData, dict[str, Any], UserClass | None]]:
    """The built-in classes asked for (default: all of the corpus's) and the user classes."""
    out: list[tuple[ClassData, dict[str, Any], UserClass | None]] = []
    builtin = list(corpus.class_names[1:]) if names is None else names
    for name in builtin:
        out.append((builtin_class(corpus, name), {"kind": "builtin"}, None))
    for user in user_classes:
        if user.name in corpus.class_names:
            raise NslmError(f"user class <{user.name}> clashes with a built-in class")
        source = {"kind": "regex", "pattern": user.regex, "plugins": user.plugins}
        out.append((regex_class(corpus, user.name, user.regex), source, user))
    return out


def fit_micro(
    corpus: PreparedCorpus,
    names: list[str] | None = None,
    user_classes: list[UserClass] = (),  # type: ignore[assignment]
    metrics: list[str] | None = None,
    pdfs: list[str] | None = None,
    eval_splits: tuple[str, ...] = ("valid", "test"),
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, ClassSelection], dict[str, Any]]:
    """Grid-search every class and evaluate the winners; return selections and micro.json."""
    selections: dict[str, ClassSelection] = {}
    evaluations: dict[str, dict[str, Any]] = {}
    for cls, source, user in build_classes(corpus, names, user_classes):
        if progress is not None:
            progress(cls.name)
        sel = select_class(
            cls,
            corpus.train,
            corpus.valid,
            metrics=(user.metrics if user and user.metrics else metrics),
            pdfs=(user.pdfs if user and user.pdfs else pdfs),
            source=source,
        )
        selections[cls.name] = sel
        evaluations[cls.name] = {s: evaluate(sel, corpus.splits[s]) for s in eval_splits}
    return selections, selection_to_json(corpus, selections, evaluations)


def micro_log_probs(
    models: dict[str, MicroModel], split: Split, features: Any = None
) -> np.ndarray:
    """One per-position array for all classes: log P_MM(w_t | c_t, prev) where w_t is an
    in-vocabulary token of a modelled class, NaN elsewhere (the evaluator's contract).
    ``features`` (N, D), the LM's states at every position, is read by context-aware
    micro-models only (:class:`nslm.micro.context_model.ContextMicroModel`).

    The NSLM of paper Eq. 4 at those positions is ``log P(c_t | h) + micro_log_probs``.
    """
    out = np.full(len(split), np.nan)
    for model in models.values():
        per_class = model.log_prob_targets(split, features)
        here = ~np.isnan(per_class)
        if np.isfinite(out[here]).any():
            raise NslmError(f"<{model.cls.name}> overlaps another class's positions")
        out[here] = per_class[here]
    return out
