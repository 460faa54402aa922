"""``nslm predict RUN PROMPT``: the next-token distribution under the NNLM and the NSLM.

The prompt is read by :mod:`nslm.generation.prompts` (plain text tokenized, then prepared as
the corpus was: numbers re-joined, places chunked, classes tagged), so "1066" is a ``<year>``
and "New York City" one token. The LM reads ``<eos>`` + the prompt, as a stream starting at a
line boundary. Each micro-model's context w_prev^(c) (paper Eq. 1) is the last token of its
class (or family) in the prompt. A prompt that ends inside ``Q unit (`` (``… 5 miles (``)
gives ``<convert>`` its preceding quantity in the units the training split converts that
unit to (:func:`nslm.data.conversions.pending_conversion`), as at a ``<convert>`` position
of the corpus; otherwise ``<convert>`` falls back to its class unigram.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from nslm.data.numbers import quantity_before
from nslm.data.vocab import EOS
from nslm.generation.prompts import PromptBatch, oov_words, prompt_batch
from nslm.micro.model import MicroModel
from nslm.runs.load import LoadedRun
from nslm.scores.distribution import FullDistribution
from nslm.scores.mixture import ensemble_log_probs
from nslm.scores.passes import Scorer

DEFAULT_PROMPT = "William the Conqueror won the Battle of Hastings in 1066, and died in"


def micro_contexts(
    micro: dict[str, MicroModel], batch: PromptBatch, last: torch.Tensor
) -> tuple[dict[str, np.ndarray], list[dict[str, str | None]]]:
    """Each micro-model's log P_MM over V_c at every prompt's next slot, (B, |V_c|) (``last``:
    the LM's states there, read by context-aware ones), and per prompt the context
    w_prev^(c) each used, as text (None: no previous token of its class, the unigram)."""
    rows: dict[str, np.ndarray] = {}
    contexts: list[dict[str, str | None]] = [{} for _ in range(len(batch))]
    text = [t for tokens in batch.tokens for t in (*tokens, "")]  # the split's tokens
    pending = [quantity_before(tokens, len(tokens)) for tokens in batch.tokens]  # <convert>'s
    for name, mm in micro.items():
        ctx = mm.cls.context(batch.split, batch.slots, mm.context)
        rows[name] = mm.log_prob(ctx, last)
        converts = "convert_target" in mm.metric.needs
        for i, p in enumerate(ctx.prev_index.tolist()):
            contexts[i][name] = text[p] if p >= 0 else None
            if converts:
                has = pending[i] is not None and bool(np.isfinite(ctx.convert_target[i]).any())
                contexts[i][name] = f"{pending[i][0]:g} {pending[i][1].name}" if has else None
    return rows, contexts


@torch.no_grad()
def nnlm_next(
    loaded: LoadedRun, scorer: Scorer, batch: PromptBatch
) -> tuple[torch.Tensor, np.ndarray]:
    """The backbone states after reading each prompt from <eos>, (B, D), and log P_NNLM of
    every type as each one's next token, (B, V) float64: one backbone pass for the batch."""
    eos, ids = loaded.corpus.vocab.stoi[EOS], batch.split.token_ids
    starts = np.concatenate([[0], batch.slots[:-1] + 1])
    histories = [[eos, *ids[a:b].tolist()] for a, b in zip(starts, batch.slots, strict=True)]
    last = scorer.last_states(histories)
    return last, loaded.model.heads["nnlm"].log_dist(last).double().numpy()


# changes a full distribution in place, given each prompt's corpus tokens
Adjust = Callable[[FullDistribution, list[list[str]]], None]


def predict(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    prompt: str,
    *,
    k: int = 10,
    lam: float = 0.0,
    n_within: int = 3,
    input_format: str = "plain",
    adjust: Adjust | None = None,
) -> dict[str, Any]:
    """Top-k next tokens under the NNLM and the NSLM, with the NSLM's breakdown (Eq. 4).

    ``lam`` is the ensemble's λ (0 = the NSLM of Eq. 4 alone). Per class, its ``n_within``
    likeliest members with P(w | c), and for a class with a micro-model each member's value
    and coordinates (a chart of years, a map of places). ``adjust``: see
    :func:`predict_many`.
    """
    return predict_many(
        loaded,
        micro,
        [prompt],
        k=k,
        lam=lam,
        n_within=n_within,
        input_format=input_format,
        adjust=adjust,
    )[0]


@torch.no_grad()
def predict_many(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    prompts: Sequence[str],
    *,
    k: int = 10,
    lam: float = 0.0,
    n_within: int = 3,
    input_format: str = "plain",
    adjust: Adjust | None = None,
) -> list[dict[str, Any]]:
    """:func:`predict` of several prompts at once: one backbone pass, one call of each
    micro-model and one full distribution for all of them (the explorer's concurrent
    requests). Without micro-models (``{}``: a run of neural heads only), the NNLM's list
    alone, with ``nslm`` and ``classes`` empty. ``adjust(full, tokens)``, where given,
    changes the full distribution in place before it is read (``tokens``: each prompt's
    corpus tokens): the hook a side system mixes itself in by (the functions,
    ``nslm.functions.micro.mix_into_distribution``)."""
    batch = prompt_batch(loaded, prompts, input_format)
    scorer = loaded.scorer()
    last, nnlm = nnlm_next(loaded, scorer, batch)
    itos = loaded.corpus.vocab.itos
    if micro:
        rows, contexts = micro_contexts(micro, batch, last)
        full = scorer.distribution(last, micro, loaded.corpus.class_names, rows)
        if adjust is not None:
            adjust(full, batch.tokens)
        nslm = ensemble_log_probs(nnlm, full.marginal(), lam)
        per_class = class_entries(loaded, micro, full, contexts, last, n_within)
    results = []
    for row, (prompt, tokens) in enumerate(zip(prompts, batch.tokens, strict=True)):
        p_nnlm = nnlm[row]
        top_nnlm = [
            {"token": itos[w], "p": math.exp(p_nnlm[w])} for w in top_indices(p_nnlm, k).tolist()
        ]
        head = {"prompt": prompt, "tokens": tokens, "oov": oov_words(loaded, tokens)}
        if not micro:
            results.append({**head, "nnlm": top_nnlm, "nslm": [], "classes": []})
            continue
        p_nslm = nslm[row]
        top_nslm = [
            {
                "token": itos[w],
                "p": math.exp(p_nslm[w]),
                "p_nnlm": math.exp(p_nnlm[w]),
                "breakdown": breakdown(full, contexts[row], loaded.corpus.class_names, row, w),
            }
            for w in top_indices(p_nslm, k).tolist()
        ]
        results.append(
            {
                **head,
                "lambda": lam,
                "nnlm": top_nnlm,
                "nslm": top_nslm,
                "classes": per_class[row],
                "sums": {"nnlm": float(np.exp(p_nnlm).sum()), "nslm": float(np.exp(p_nslm).sum())},
            }
        )
    return results


def breakdown(
    full: FullDistribution, context: dict[str, str | None], names: Sequence[str], row: int, w: int
) -> list[dict[str, Any]]:
    """Type ``w``'s readings at ``row``, likeliest first: as a word, or as a class token with
    P(c | h) × P_MM(w | c, context) (Eq. 4)."""
    parts = []
    for r in full.readings(row, w):
        if r.cls == 0:
            parts.append({"as": "word", "p": math.exp(r.log_prob)})
            continue
        parts.append(
            {
                "as": f"<{names[r.cls]}>",
                "p_class": math.exp(r.log_class),
                "p_in_class": math.exp(r.log_within),
                "p": math.exp(r.log_prob),
                "model": full.source[r.cls],
                "context": context.get(names[r.cls]),
            }
        )
    return sorted(parts, key=lambda d: -d["p"])


def class_entries(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    full: FullDistribution,
    contexts: list[dict[str, str | None]],
    last: torch.Tensor,
    n_within: int,
) -> list[list[dict[str, Any]]]:
    """Per row, each tagged class's P(c | h), context and likeliest members, likeliest class
    first: a class at a time, so that its attributes and a context micro-model's explanation
    (the gate, the shifts) are computed for every row at once."""
    itos, names = loaded.corpus.vocab.itos, loaded.corpus.class_names
    out: list[list[dict[str, Any]]] = [[] for _ in contexts]
    tagged = np.isfinite(full.tag)
    for c in np.flatnonzero(tagged.any(axis=0)).tolist():
        name, (ids, logp) = names[c], full.within[c]
        mm = micro.get(name)
        explained = mm.explain(last) if mm is not None and mm.needs_features else None
        shown, shown_ids = [], []
        for row in np.flatnonzero(tagged[:, c]).tolist():
            best = top_indices(logp[row], n_within)
            members, p_in = ids[best].tolist(), np.exp(logp[row, best]).tolist()
            inside = [
                {"token": itos[w], "p_in_class": p} for w, p in zip(members, p_in, strict=True)
            ]
            entry = {
                "class": f"<{name}>",
                "p_class": math.exp(full.tag[row, c]),
                "model": full.source[c],
                "context": contexts[row].get(name),
                "top": inside,
            }
            entry.update(explained[row] if explained else {})
            out[row].append(entry)
            shown += inside
            shown_ids += members
        if mm is not None:
            _add_attributes(shown, mm, shown_ids)
    return [sorted(entries, key=lambda d: -d["p_class"]) for entries in out]


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest entries' indices, largest first, ties by index (as a stable sort of
    the whole array would give), in O(n + k log k): a full sort of 33k types per call was
    most of a prediction's time."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    cut = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest value
    candidates = np.flatnonzero(scores >= cut)  # ties at the cut included, in index order
    return candidates[np.argsort(-scores[candidates], kind="stable")][:k]


def _add_attributes(rows: list[dict[str, Any]], model: MicroModel, ids: list[int]) -> None:
    """Each row's numeric value and (lat, lon) from the micro-model's candidates."""
    candidates = model.cls.candidates
    vocab_ids = candidates.vocab_ids  # sorted: V_c's type ids (the LM's class members)
    at = np.minimum(np.searchsorted(vocab_ids, ids), len(vocab_ids) - 1)
    member = (vocab_ids[at] == np.asarray(ids, dtype=np.int64)).tolist()
    # whole columns to Python floats at once: the explorer asks for 50 members a class
    values = candidates.values[at].tolist()
    coords = candidates.coords[at]
    placed = np.isfinite(coords).all(axis=1).tolist()
    lats, lons = coords[:, 0].tolist(), coords[:, 1].tolist()
    for k, row in enumerate(rows):
        if not member[k]:
            continue
        row["value"] = values[k] if math.isfinite(values[k]) else None
        if placed[k]:
            row["lat"], row["lon"] = lats[k], lons[k]
