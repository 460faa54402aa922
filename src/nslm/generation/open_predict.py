"""Next-token predictions of the open-vocabulary NSLM: the vocabulary and the new members.

:func:`nslm.generation.predict.predict_many` ranks the run's vocabulary. NSLM-open replaces
each open class's micro-model by its open micro-model (:mod:`nslm.micro.open_set`), so a year
or a place the training text never held competes too. In Eq. 4 of Demeter & Downey (2020),
an in-vocabulary member w of class c gets P(c | h) · P_open(w | c, ctx) instead of
P(c | h) · P_MM(w | c, ctx), and a member s ∉ V (in the class's open set O_c) gets
P(c | h) · P_open(s | c, ctx): the class's mass that P_open leaves outside V_c. Both are
λ-mixed with the NNLM as the ensemble is; the NNLM gives a new member nothing (it can only
say ``<unk>``), so a new member is charged (1 − λ). Prompts are read as ``predict`` reads them,
so an unseen value in the prompt is the w_prev of its class ("began in 2027 and ended in"
makes years near 2027 likely).

Where the run takes its new members' mass from P(``<unk>`` | h) too (RUN/open.json's
``new_mass``, :class:`nslm.micro.unk_share.NewMass`), a new member s of c also gets
ρ_c · P_NSLM(<unk> | h) · P_new(s | c, ctx), P_new = P_open(s | c, ctx) / P_open(new | c, ctx),
and the unknown word keeps (1 − Σρ) of the NSLM's P(<unk> | h); with ``unk`` alone the known
members keep the closed micro-model's P_MM and the new ones get only that share.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from nslm.generation.predict import micro_contexts, nnlm_next, top_indices
from nslm.generation.prompts import prompt_batch
from nslm.micro.open_set import OpenMicroModel
from nslm.micro.unk_share import NewMass
from nslm.runs.load import LoadedRun
from nslm.scores.mixture import ensemble_log_probs


@torch.no_grad()
def open_predict_many(
    loaded: LoadedRun,
    micro: dict,
    open_models: dict[str, OpenMicroModel],
    prompts: Sequence[str],
    *,
    k: int = 5,
    lam: float = 0.0,
    input_format: str = "plain",
    new_mass: NewMass | None = None,
) -> list[dict[str, Any]]:
    """Per prompt: its tokens and the top-k of NSLM-open, each entry with its probability
    and whether it is a new member (``new``: outside the vocabulary, and its class), and per
    open class its P(c | h) and its top-k members, known and new, by P_open(w | c, ctx).

    ``micro`` (plain or context-aware) scores the classes without an open model;
    ``new_mass``: where new members take their mass from (default: the run's choice)."""
    from nslm.runs.open_micro import run_new_mass

    new_mass = new_mass if new_mass is not None else run_new_mass(loaded)
    names, itos = loaded.corpus.class_names, loaded.corpus.vocab.itos
    batch = prompt_batch(loaded, prompts, input_format)
    scorer = loaded.scorer()
    last, nnlm = nnlm_next(loaded, scorer, batch)
    rows, _ = micro_contexts(micro, batch, last)
    contexts = {
        name: om.cls.context(batch.split, batch.slots, om.micro.context)
        for name, om in open_models.items()
    }
    # the prompt's own tokens as written, aligned with the batch's split (each prompt, then
    # its slot): a new member the prompt named is in its class's cache
    text = [t for tokens in batch.tokens for t in (*tokens, "")]
    caches = {
        name: om.text_cache(batch.split, text, batch.slots) for name, om in open_models.items()
    }
    known_rows = dict(rows)  # the closed micro-models' P_MM over V_c
    for name, om in open_models.items():
        # P_open over V_c, not P_MM, where the known members pay for the new ones
        states = last if om.needs_features else None
        rows[name] = om.log_prob_known(contexts[name], states, caches[name])
    # the open class's own (plain) micro-model: V_c and the label come from the model
    # whose rows these are
    models = {**micro, **{name: om.micro for name, om in open_models.items()}}
    full = scorer.distribution(last, models, names, rows if new_mass.escape else known_rows)
    # over V: the new members' mass is missing from it, so it sums to below one
    pure = np.array(full.marginal(), dtype=np.float64, copy=True)
    unk = loaded.corpus.vocab.unk_id
    log_unk = pure[:, unk].copy()  # log P_NSLM(<unk> | h), before the classes' shares
    pure[:, unk] += new_mass.log_spelled
    mixed = ensemble_log_probs(nnlm, pure, lam)
    keep = math.log1p(-lam) if lam < 1 else -math.inf
    new_per_row: list[list[tuple[float, str, str]]] = [[] for _ in range(len(batch))]
    within: list[dict[str, Any]] = [{} for _ in range(len(batch))]
    for name, om in open_models.items():
        c = names.index(name)
        if c not in full.within:  # a class the LM never tags has no P(c | h)
            continue
        ids, log_known = full.within[c]
        states = last if om.needs_features else None
        log_new = (  # P_open(new | c, ctx): what a new member's share of P(<unk>) divides by
            om.log_new_mass(contexts[name], states, caches[name])
            if new_mass.shares_unk
            else np.full(len(batch), -np.inf)
        )
        for row, best in enumerate(om.top_new(contexts[name], k, states, caches[name])):
            tag = float(full.tag[row, c])
            share = -np.inf  # no new member at this row: the share stays with <unk>
            if np.isfinite(log_new[row]):
                share = float(log_unk[row]) + new_mass.log_rho(name) - float(log_new[row])
            if np.isfinite(keep):
                new_per_row[row] += [
                    (
                        keep
                        + float(np.logaddexp(tag + lp if new_mass.escape else -np.inf, share + lp)),
                        s,
                        name,
                    )
                    for s, lp in best
                ]
            known = [
                (float(log_known[row, j]), itos[ids[j]], False)
                for j in top_indices(log_known[row], k)
            ]
            ranked = sorted(known + [(lp, s, True) for s, lp in best], key=lambda e: -e[0])
            within[row][name] = {
                "p_class": math.exp(tag),
                "top": [{"token": s, "p": math.exp(lp), "new": new} for lp, s, new in ranked[:k]],
            }
    results = []
    for row, tokens in enumerate(batch.tokens):
        entries = [(float(mixed[row, w]), itos[w], None) for w in top_indices(mixed[row], k)]
        entries += new_per_row[row]
        entries.sort(key=lambda e: -e[0])
        results.append(
            {
                "prompt": prompts[row],
                "tokens": tokens,
                "top": [
                    {
                        "token": s,
                        "p": math.exp(lp),
                        "new": cls is not None,
                        **({"class": cls} if cls else {}),
                    }
                    for lp, s, cls in entries[:k]
                ],
                # every open class, likeliest first, each with its own top-k (known and new)
                "classes": dict(sorted(within[row].items(), key=lambda kv: -kv[1]["p_class"])),
            }
        )
    return results


def render_open(result: dict[str, Any]) -> str:
    """One prediction of :func:`open_predict_many` as text; new members marked ``*``."""

    def cell(entry: dict[str, Any]) -> str:
        return f"{entry['token']}{'*' if entry['new'] else ''} {entry['p']:.4f}"

    lines = ["NSLM-open (open micro-models over each class's open set; * = outside the vocabulary)"]
    lines += [f"  {i:>2}. {cell(e)}" for i, e in enumerate(result["top"], 1)]
    for name, per in list(result["classes"].items())[:2]:  # the two likeliest classes
        lines.append(f"  <{name}> P={per['p_class']:.4f}: " + " · ".join(map(cell, per["top"])))
    return "\n".join(lines)
