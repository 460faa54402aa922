"""A plug-in for the paper's recipe-verbs example (Table 1 steps 1-3): kitchen verbs follow a
causal order (measure → mix → cook → cool → serve), so a verb is likely to be at or after the
stage of the previous kitchen verb in the article.

    nslm micro fit RUN --plugin examples/recipe/kitchen.py

Metrics see V_c as vocabulary ids and strings (``cand.vocab_ids``, ``cand.strings``) and
the previous class token as an id (``ctx.prev_ids``); the stage of an id is read from the
strings the call carries (every previous kitchen verb is itself a member of V_c).
"""

from __future__ import annotations

import numpy as np

from nslm.micro import register_metric

# Stage of a verb in a recipe, by stem; the order encodes the inductive bias (Step 1).
STAGES = {
    "measur": 0, "chop": 1, "mix": 2, "stir": 2, "pour": 2, "heat": 3, "cook": 3, "bak": 3,
    "boil": 3, "fr": 3, "roast": 3, "cool": 4, "serv": 5,
}  # fmt: skip


def stage(token: str) -> float:
    """The stage of a kitchen verb (longest matching stem), NaN for anything else."""
    hits = [s for s in STAGES if token.lower().startswith(s)]
    return float(STAGES[max(hits, key=len)]) if hits else float("nan")


def _stages(cand, ctx) -> tuple[np.ndarray, np.ndarray]:
    ids = np.ravel(cand.vocab_ids)
    by_id = {int(i): stage(s) for i, s in zip(ids, cand.strings, strict=True)}
    mine = np.array([by_id[int(i)] for i in ids]).reshape(np.shape(cand.vocab_ids))
    prev = np.vectorize(lambda i: by_id.get(int(i), np.nan), otypes=[float])(ctx.prev_ids)
    return mine, prev


@register_metric("recipe_order", needs=("prev_ids",), kind="binary")
def recipe_order(cand, ctx):
    """1 if the verb does not go back in the recipe's causal order, else 0 (paper's example)."""
    mine, prev = _stages(cand, ctx)
    return np.where(np.isnan(prev), 1.0, (mine >= prev).astype(float))


@register_metric("recipe_step", needs=("prev_ids",))
def recipe_step(cand, ctx):
    """stage(w) − stage(w_prev): how many recipe stages the verb moves on."""
    mine, prev = _stages(cand, ctx)
    return np.where(np.isnan(prev), 0.0, mine - prev)
