"""Next-token predictions of the open-vocabulary NSLM: the vocabulary and the new members.

:func:`nslm.generation.predict.predict_many` ranks the run's vocabulary. With open classes
(:mod:`nslm.micro.open_vocab`) a year or a place the training text never held competes too:
each class's in-vocabulary part is scaled by (1 − β_c) and its enumerated new members get
P(c | h) · β_c · q_c(w | ctx), all λ-mixed with the NNLM as the ensemble is (the NNLM gives
a new member nothing: it can only say ``<unk>``). Prompts are read as ``predict`` reads
them, so an unseen value in the prompt is the w_prev of its class ("began in 2027 and ended
in" makes years near 2027 likely).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from nslm.evaluation.open_vocab import open_marginal
from nslm.generation.predict import micro_contexts, nnlm_next, top_indices
from nslm.generation.prompts import prompt_batch
from nslm.micro.open_vocab import OpenClass
from nslm.runs.load import LoadedRun
from nslm.scores.mixture import ensemble_log_probs


@torch.no_grad()
def open_predict_many(
    loaded: LoadedRun,
    micro: dict,
    open_classes: dict[str, OpenClass],
    prompts: Sequence[str],
    *,
    k: int = 5,
    lam: float = 0.0,
    input_format: str = "plain",
) -> list[dict[str, Any]]:
    """Per prompt: its tokens and the top-k of NSLM-open, each entry with its probability
    and whether it is a new member (``new``: outside the vocabulary, and its class)."""
    names, itos = loaded.corpus.class_names, loaded.corpus.vocab.itos
    batch = prompt_batch(loaded, prompts, input_format)
    scorer = loaded.scorer()
    last, nnlm = nnlm_next(loaded, scorer, batch)
    rows, _ = micro_contexts(micro, batch, last)
    full = scorer.distribution(last, micro, names, rows)
    mixed = ensemble_log_probs(nnlm, open_marginal(full, open_classes, names), lam)
    new_per_row: list[list[tuple[float, str, str]]] = [[] for _ in range(len(batch))]
    within: list[dict[str, Any]] = [{} for _ in range(len(batch))]
    for name, oc in open_classes.items():
        c = names.index(name)
        ctx = oc.cls.context(batch.split, batch.slots, oc.micro.context)
        ids, log_mm = full.within[c]
        for row, best in enumerate(oc.top_new(ctx, k)):
            if lam < 1:
                tag = full.tag[row, c] + math.log1p(-lam)
                new_per_row[row] += [(tag + lp, s, name) for s, lp in best]
            known = [
                (log_mm[row, j] + oc.log_keep, itos[ids[j]], False)
                for j in top_indices(log_mm[row], k)
            ]
            ranked = sorted(known + [(lp, s, True) for s, lp in best], key=lambda e: -e[0])
            within[row][name] = {
                "p_class": math.exp(full.tag[row, c]),
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

    lines = ["NSLM-open (β_c: Good-Turing from the training counts; * = outside the vocabulary)"]
    lines += [f"  {i:>2}. {cell(e)}" for i, e in enumerate(result["top"], 1)]
    for name, per in list(result["classes"].items())[:2]:  # the two likeliest classes
        lines.append(f"  <{name}> P={per['p_class']:.4f}: " + " · ".join(map(cell, per["top"])))
    return "\n".join(lines)
