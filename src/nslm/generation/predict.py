"""``nslm predict RUN PROMPT``: the next-token distribution under the NNLM and the NSLM.

The prompt goes through the corpus's own preparation (numbers re-joined, places chunked,
classes tagged: :func:`nslm.data.tagging.tag_lines`), so "1066" is a ``<year>`` and
"New York City" one token. The LM reads ``<eos>`` + the prompt, as a stream starting at a
line boundary. Each micro-model's context w_prev^(c) (paper Eq. 1) is the last token of its
class (or family) in the prompt. A prompt that ends inside ``Q unit (`` (``… 5 miles (``)
gives ``<convert>`` its preceding quantity in the units the training split converts that
unit to (:func:`nslm.data.conversions.pending_conversion`), as at a ``<convert>`` position
of the corpus; otherwise ``<convert>`` falls back to its class unigram.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from nslm.config import class_rules_of
from nslm.data.conversions import MAX_TARGET_UNITS, pending_conversion, unit_map_from_json
from nslm.data.corpus import Split
from nslm.data.numbers import quantity_before
from nslm.data.tagging import tag_lines
from nslm.data.vocab import EOS
from nslm.errors import NslmError
from nslm.micro.model import MicroModel
from nslm.runs.load import LoadedRun
from nslm.scores.mixture import ensemble_log_probs
from nslm.scores.passes import Scorer

DEFAULT_PROMPT = "William the Conqueror won the Battle of Hastings in 1066 , and died in"


def prompt_split(loaded: LoadedRun, prompt: str) -> tuple[Split, list[str]]:
    """The prompt as a one-article :class:`Split`, plus one slot for the token to predict."""
    corpus, cfg = loaded.corpus, loaded.cfg
    if not prompt.strip():
        raise NslmError("the prompt is empty")
    tagged = tag_lines([" " + prompt + " "], cfg.classes, class_rules_of(cfg))
    tokens = tagged.tokens[:-1]  # drop the <eos> tag_lines ends every line with
    classes, values = tagged.classes[:-1], tagged.values[:-1]
    coords = np.column_stack([tagged.lats[:-1], tagged.lons[:-1]]) if tokens else np.zeros((0, 2))
    n = len(tokens) + 1  # + the next position
    stoi, unk = corpus.vocab.stoi, corpus.vocab.unk_id
    ids = np.array([stoi.get(t, unk) for t in tokens] + [unk], dtype=np.int32)
    rule = np.array([corpus.class_names.index(c) for c in classes] + [0], dtype=np.int16)
    convert = np.full((n, MAX_TARGET_UNITS), math.nan)  # only the next slot is ever scored
    convert[-1] = pending_conversion(tokens, unit_map_from_json(corpus.meta.get("unit_map", {})))
    split = Split(
        name="prompt",
        token_ids=ids,
        rule_class_ids=rule,
        values=np.array([*values, math.nan], dtype=np.float64),
        coords=np.vstack([coords, [[math.nan, math.nan]]]).reshape(n, 2),
        convert_targets=convert,
        article_ids=np.zeros(n, dtype=np.int32),
        unk_id=unk,
    )
    return split, tokens


def oov_words(loaded: LoadedRun, tokens: list[str]) -> list[str]:
    """The prompt's tokens outside the run's vocabulary (the LM reads each as ``<unk>``)."""
    stoi = loaded.corpus.vocab.stoi
    return list(dict.fromkeys(t for t in tokens if t not in stoi))


def micro_contexts(
    micro: dict[str, MicroModel], split: Split, tokens: list[str], last: torch.Tensor
) -> tuple[dict[str, np.ndarray], dict[str, str | None]]:
    """Each micro-model's log P_MM over V_c at the slot after the prompt (``last``: the LM's
    state there, read by context-aware ones), and the context w_prev^(c) it used, as text
    (None: no previous token of its class, the unigram)."""
    nxt = np.array([len(split) - 1])
    rows, contexts = {}, {}
    pending = quantity_before(tokens, len(tokens))  # what <convert>'s context shows
    for name, mm in micro.items():
        ctx = mm.cls.context(split, nxt, mm.context)
        rows[name] = mm.log_prob(ctx, last)
        p = int(ctx.prev_index[0])
        contexts[name] = tokens[p] if p >= 0 else None
        if "convert_target" in mm.metric.needs:
            has = pending is not None and bool(np.isfinite(ctx.convert_target).any())
            contexts[name] = f"{pending[0]:g} {pending[1].name}" if has else None
    return rows, contexts


@torch.no_grad()
def nnlm_next(loaded: LoadedRun, scorer: Scorer, split: Split) -> tuple[torch.Tensor, np.ndarray]:
    """The backbone state after reading the prompt ``split`` from <eos>, (1, D), and log
    P_NNLM of every type as the next token, (V,) float64."""
    ids = [loaded.corpus.vocab.stoi[EOS], *split.token_ids[:-1].tolist()]
    last = scorer.last_features(ids)
    return last, loaded.model.heads["nnlm"].log_dist(last)[0].double().numpy()


@torch.no_grad()
def predict(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    prompt: str,
    *,
    k: int = 10,
    lam: float = 0.0,
    n_within: int = 3,
) -> dict[str, Any]:
    """Top-k next tokens under the NNLM and the NSLM, with the NSLM's breakdown (Eq. 4).

    ``lam`` is the ensemble's λ (0 = the NSLM of Eq. 4 alone). Per class, its ``n_within``
    likeliest members with P(w | c), and for a class with a micro-model each member's value
    and coordinates (a chart of years, a map of places).
    """
    corpus = loaded.corpus
    split, tokens = prompt_split(loaded, prompt)
    scorer = loaded.scorer()
    last, nnlm = nnlm_next(loaded, scorer, split)
    rows, contexts = micro_contexts(micro, split, tokens, last)
    full = scorer.distribution(last, micro, corpus.class_names, rows)
    nslm = ensemble_log_probs(nnlm, full.marginal()[0], lam)
    itos = corpus.vocab.itos

    def breakdown(w: int) -> list[dict[str, Any]]:
        parts = []
        for r in full.readings(0, w):
            if r.cls == 0:
                parts.append({"as": "word", "p": math.exp(r.log_prob)})
                continue
            name = corpus.class_names[r.cls]
            parts.append(
                {
                    "as": f"<{name}>",
                    "p_class": math.exp(r.log_class),
                    "p_in_class": math.exp(r.log_within),
                    "p": math.exp(r.log_prob),
                    "model": full.source[r.cls],
                    "context": contexts.get(name),
                }
            )
        return sorted(parts, key=lambda d: -d["p"])

    def top(logp: np.ndarray) -> list[int]:
        return top_indices(logp, k).tolist()

    tags = full.tag[0]
    classes = []
    for c in np.flatnonzero(np.isfinite(tags)).tolist():
        name = corpus.class_names[c]
        ids, logp = full.within[c]
        best = top_indices(logp[0], n_within)
        inside = [{"token": itos[ids[i]], "p_in_class": math.exp(logp[0, i])} for i in best]
        entry = {
            "class": f"<{name}>",
            "p_class": math.exp(tags[c]),
            "model": full.source[c],
            "context": contexts.get(name),
            "top": inside,
        }
        if name in micro:
            _add_attributes(inside, micro[name], [int(ids[i]) for i in best])
            entry.update(_explain(micro[name], last))
        classes.append(entry)
    classes.sort(key=lambda d: -d["p_class"])
    return {
        "prompt": prompt,
        "tokens": tokens,
        "oov": oov_words(loaded, tokens),
        "lambda": lam,
        "nnlm": [{"token": itos[w], "p": math.exp(nnlm[w])} for w in top(nnlm)],
        "nslm": [
            {
                "token": itos[w],
                "p": math.exp(nslm[w]),
                "p_nnlm": math.exp(nnlm[w]),
                "breakdown": breakdown(w),
            }
            for w in top(nslm)
        ],
        "classes": classes,
        "sums": {"nnlm": float(np.exp(nnlm).sum()), "nslm": float(np.exp(nslm).sum())},
    }


def top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` largest entries' indices, largest first, ties by index (as a stable sort of
    the whole array would give), in O(n + k log k): a full sort of 33k types per call was
    most of a prediction's time."""
    if k >= len(scores):
        return np.argsort(-scores, kind="stable")
    cut = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest value
    candidates = np.flatnonzero(scores >= cut)  # ties at the cut included, in index order
    return candidates[np.argsort(-scores[candidates], kind="stable")][:k]


def _explain(model: MicroModel, last: torch.Tensor) -> dict[str, Any]:
    """What a context-aware micro-model did with the prompt's state: a mixture's gate
    weights, largest first, or a shifted model's factor per metric bin; nothing for a plain
    micro-model."""
    return model.explain(last) if model.needs_features else {}


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


# A reading below this share of its token's probability is left out of the printed breakdown
# (every year is also a possible <range>, at a tiny probability: that line helps nobody).
SHOWN_SHARE = 0.01
WIDTH = 80


def render(result: dict[str, Any]) -> str:
    """The prediction as text in 80 columns: two top-k lists, then P(class) × P_MM per class."""
    lines = [f"prompt: {' '.join(result['tokens'])}"]
    if result.get("oov"):
        lines.append(f"not in the vocabulary, read as <unk>: {', '.join(result['oov'])}")
    lam = result["lambda"]
    mix = "Eq. 4 alone" if lam == 0 else f"{lam:.2f}·NNLM + {1 - lam:.2f}·Eq. 4 (Global λ)"
    lines += ["", f"{'NNLM':<22}  NSLM = {mix}"]
    for i, item in enumerate(result["nslm"]):
        left = result["nnlm"][i] if i < len(result["nnlm"]) else None
        ltxt = f"{left['token'][:14]:<14} {left['p']:.4f}" if left else ""
        shown = [p for p in item["breakdown"] if p["p"] >= SHOWN_SHARE * item["p"]]
        why = "; ".join(_part(p) for p in shown[:1])
        line = f"{ltxt:<22}  {item['token'][:14]:<14} {item['p']:.4f}  {why}"
        lines.append(line[:WIDTH])
    lines += ["", "P(class | h), its micro-model [metric+PDF, previous class token], best 3:"]
    for d in result["classes"]:
        if d["model"] == "neural":
            how = "neural"  # the model's within-class softmax (Eq. 3): no micro-model context
        else:
            prev = f"prev {d['context']}" if d["context"] else "no prev: unigram"
            how = f"{d['model']}, {prev}"
        lines.append(f"  {d['class']:<10} {d['p_class']:.4f}  [{how}]"[:WIDTH])
        best = "  ".join(f"{t['token'][:16]} {t['p_in_class']:.3f}" for t in d["top"])
        lines.append(f"      {best}"[:WIDTH])
        if d.get("gate"):  # a context-aware micro-model: the components the context chose
            gate = "  ".join(f"{g['component']} {g['weight']:.2f}" for g in d["gate"][:3])
            lines.append(f"      gate: {gate}"[:WIDTH])
        if d.get("shift"):  # a shifted one: the metric bins the context favoured
            shift = "  ".join(f"{g['bin']} ×{g['factor']:.2f}" for g in d["shift"][:2])
            lines.append(f"      shift: {shift}"[:WIDTH])
        if d.get("value_shift"):  # and the value bins (an era or a magnitude) it favoured
            shift = "  ".join(f"{g['bin']} ×{g['factor']:.2f}" for g in d["value_shift"][:2])
            lines.append(f"      value: {shift}"[:WIDTH])
    return "\n".join(lines)


def _part(p: dict[str, Any]) -> str:
    if p["as"] == "word":
        return "as a word"
    return f"= {p['as']} {p['p_class']:.3f} × {p['p_in_class']:.3f}"
