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
from nslm.scores.passes import distribution_from_features

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


@torch.no_grad()
def predict(
    loaded: LoadedRun, micro: dict[str, MicroModel], prompt: str, *, k: int = 10, lam: float = 0.0
) -> dict[str, Any]:
    """Top-k next tokens under the NNLM and the NSLM, with the NSLM's breakdown (Eq. 4)."""
    model, corpus = loaded.model, loaded.corpus
    split, tokens = prompt_split(loaded, prompt)
    history = [corpus.vocab.stoi[EOS], *split.token_ids[:-1].tolist()]
    model.eval()
    h, _ = model.features(torch.as_tensor(history, dtype=torch.long).unsqueeze(1), None)
    last = h[-1].float()  # (1, D)
    nnlm = model.heads["nnlm"].log_dist(last)[0].double().numpy()
    nxt = np.array([len(split) - 1])
    rows, contexts = {}, {}
    pending = quantity_before(tokens, len(tokens))  # what <convert>'s context shows
    for name, mm in micro.items():
        ctx = mm.cls.context(split, nxt, mm.context)
        rows[name] = mm.log_prob(ctx)
        p = int(ctx.prev_index[0])
        contexts[name] = tokens[p] if p >= 0 else None
        if "convert_target" in mm.metric.needs:
            has = pending is not None and bool(np.isfinite(ctx.convert_target).any())
            contexts[name] = f"{pending[0]:g} {pending[1].name}" if has else None
    full = distribution_from_features(model, last, micro, corpus.class_names, rows)
    pure = full.marginal()[0]
    nslm = pure if lam == 0 else np.logaddexp(math.log(lam) + nnlm, math.log1p(-lam) + pure)
    itos = corpus.vocab.itos
    tags = full.tag[0]

    def breakdown(w: int) -> list[dict[str, Any]]:
        parts = []
        if np.isfinite(full.word[0, w]):
            parts.append({"as": "word", "p": math.exp(full.word[0, w])})
        for c, (ids, logp) in full.within.items():
            at = np.searchsorted(ids, w)
            if at < len(ids) and ids[at] == w:
                name = corpus.class_names[c]
                parts.append(
                    {
                        "as": f"<{name}>",
                        "p_class": math.exp(tags[c]),
                        "p_in_class": math.exp(logp[0, at]),
                        "p": math.exp(tags[c] + logp[0, at]),
                        "model": full.source[c],
                        "context": contexts.get(name),
                    }
                )
        return sorted(parts, key=lambda d: -d["p"])

    def top(logp: np.ndarray) -> list[int]:
        return np.argsort(-logp, kind="stable")[:k].tolist()

    classes = []
    for c in np.flatnonzero(np.isfinite(tags)).tolist():
        name = corpus.class_names[c]
        ids, logp = full.within[c]
        best = np.argsort(-logp[0], kind="stable")[:3]
        inside = [{"token": itos[ids[i]], "p_in_class": math.exp(logp[0, i])} for i in best]
        classes.append(
            {
                "class": f"<{name}>",
                "p_class": math.exp(tags[c]),
                "model": full.source[c],
                "context": contexts.get(name),
                "top": inside,
            }
        )
    classes.sort(key=lambda d: -d["p_class"])
    return {
        "prompt": prompt,
        "tokens": tokens,
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


def render(result: dict[str, Any]) -> str:
    """The prediction as text: two top-k lists and the class × micro-model breakdown."""
    lines = [f"prompt: {' '.join(result['tokens'])}", ""]
    lines.append(f"{'NNLM':<24}  NSLM (λ={result['lambda']:.2f}) = P(class) × P_MM(token)")
    for i, item in enumerate(result["nslm"]):
        left = result["nnlm"][i] if i < len(result["nnlm"]) else None
        ltxt = f"{left['token'][:14]:<14} {left['p']:.4f}" if left else ""
        parts = "; ".join(_part(p) for p in item["breakdown"][:2])
        lines.append(f"{ltxt:<24}  {item['token'][:14]:<14} {item['p']:.4f}  = {parts}")
    lines.append("")
    lines.append("P(class | h) × P_MM(token | class, previous class token), best 3 per class:")
    for d in result["classes"]:
        if d["model"] == "neural":
            prev = ""  # the HNLM's within-class softmax (Eq. 3): no micro-model context
        else:
            prev = f", prev {d['context']}" if d["context"] else ", no context: unigram"
        best = "  ".join(f"{t['token']} {t['p_in_class']:.3f}" for t in d["top"])
        lines.append(f"  {d['class']:<10} {d['p_class']:.4f} [{d['model']}{prev}]  {best}")
    return "\n".join(lines)


def _part(p: dict[str, Any]) -> str:
    if p["as"] == "word":
        return f"word {p['p']:.4f}"
    ctx = f", prev {p['context']}" if p.get("context") else ""
    return f"{p['as']} {p['p_class']:.3f} × {p['p_in_class']:.4f} [{p['model']}{ctx}]"
