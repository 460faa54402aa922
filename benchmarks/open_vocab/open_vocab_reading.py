"""What the LM should read where the text names a member its vocabulary lacks.

    python benchmarks/open_vocab/open_vocab_reading.py --run RUN [--out FILE]

An unseen year, number or place is ``<unk>`` to the LSTM's input today, so after "… in
Bombay" the LM knows that a rare word went by, not that a city did. Issue 39 asks this to be
measured, not assumed. At every out-of-vocabulary class token of a text (a token whose rule
gives it a class and whose string is outside the vocabulary), the input is replaced by:

- ``unk``: ``<unk>``, as today;
- ``typical``: the class's most frequent training member (its embedding, which the output
  layer shares: tied weights, so reading it is reading the word the model knows best of the
  class);
- ``nearest``: the class's known member nearest to the unseen one: by value for the number
  classes (1,847 reads as 1,850 where that is known), by latitude and longitude for the place
  classes (the euclidean metric of their micro-models), so a place the gazetteer knows under
  another spelling reads as that place; the typical member where the token has no value or
  coordinates.

The scores at the replaced positions themselves are the same in every variant (their
prediction reads only the tokens before); every other position is scored as it is, with the
LM's history changed. Writes benchmarks/results/open_vocab_reading.json, per text (WikiText-2
test, UD English EWT test as plain text) and variant:

- ``replaced``: how many input tokens were replaced;
- ``global_ppl``: the closed NSLM's perplexity (λ of benchmarks/open_vocab/open_vocab.py) over every
  position but the replaced ones;
- ``after_ppl``: the same over the five positions after each replaced one;
- ``class_after``: at the in-vocabulary class tokens among those five, the mean log
  P(c | h) of their class (``tokens``, ``mean_log_p_class``): does the LM, having read an
  unseen city, expect another place?
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import run_arguments, write_results
from nslm.data.fixed_vocab import prepare_text, prepare_text_file
from nslm.data.locate import locate_corpus
from nslm.runs.open import open_run
from texts import ewt_text

RESULTS = Path(__file__).resolve().parents[1] / "results"
OPEN_VOCAB_JSON = RESULTS / "open_vocab.json"
AFTER = 5  # positions after a replaced token whose scores are reported apart
VARIANTS = ("unk", "typical", "nearest")


def stand_ins(split, micro: dict, class_names, variant: str) -> np.ndarray:
    """The input ids of ``split`` with every out-of-vocabulary class token replaced."""
    ids = split.token_ids.copy()
    if variant == "unk":
        return ids
    for name, model in micro.items():
        cand = model.cls.candidates
        cid = class_names.index(name)
        rows = np.flatnonzero(split.oov_class_mask & (split.rule_class_ids == cid))
        if not len(rows):
            continue
        typical = cand.vocab_ids[int(np.argmax(cand.counts))]
        ids[rows] = typical
        if variant == "typical":
            continue
        for r in rows:
            value, coords = split.values[r], split.coords[r]
            if np.isfinite(coords).all() and np.isfinite(cand.coords).all(axis=1).any():
                ok = np.isfinite(cand.coords).all(axis=1)
                dist = ((cand.coords[ok] - coords) ** 2).sum(axis=1)  # the places' metric
                ids[r] = cand.vocab_ids[ok][int(np.argmin(dist))]
            elif np.isfinite(value) and np.isfinite(cand.values).any():
                ok = np.isfinite(cand.values)
                ids[r] = cand.vocab_ids[ok][int(np.argmin(np.abs(cand.values[ok] - value)))]
    return ids


def figures(loaded, micro, split, variant: str, lam: float, base) -> tuple[dict, object]:
    names = loaded.corpus.class_names
    ids = stand_ins(split, micro, names, variant)
    read = replace(split, token_ids=ids)
    got = loaded.scorer().nslm(read, micro)  # a fresh scorer: its memo is keyed by name
    replaced = np.flatnonzero(ids != split.token_ids)
    # the targets are the text's: where the input was replaced, the original pass's score
    nslm = got.ensemble(lam).copy()
    top = got.top.copy()
    if base is not None:
        nslm[replaced] = base[0][replaced]
    oov = np.flatnonzero(split.oov_class_mask)
    others = np.ones(len(split), dtype=bool)
    others[oov] = False
    others[0] = False  # position 0 is never scored
    after = np.zeros(len(split), dtype=bool)
    for k in range(1, AFTER + 1):
        after[np.minimum(oov + k, len(split) - 1)] = True
    after &= others
    classes = after & (split.class_ids > 0)  # in-vocabulary class tokens (class_ids: 0 at <unk>)
    out = {
        "replaced": len(replaced),
        "global_ppl": float(math.exp(-np.nanmean(nslm[others]))),
        "after_ppl": float(math.exp(-np.nanmean(nslm[after]))),
        "class_after": {
            "tokens": int(classes.sum()),
            "mean_log_p_class": float(np.nanmean(top[classes])) if classes.any() else None,
        },
    }
    return out, (nslm, top)


def main() -> None:
    args = run_arguments(__doc__, RESULTS / "open_vocab_reading.json")
    t0 = time.perf_counter()
    lam = json.loads(OPEN_VOCAB_JSON.read_text())["lambdas"]["NSLM"]
    opened = open_run(args.run, micro="plain")
    loaded, micro = opened.loaded, opened.micro
    corpus = loaded.corpus
    paths = locate_corpus("wikitext-2", download=False)
    texts = {
        "wt2_test": prepare_text_file(corpus, paths["test"], "test", "tokenized"),
        "ewt": prepare_text(corpus, ewt_text(), "ewt", "UD English EWT test", "plain"),
    }
    result: dict = {"run": str(args.run), "lambda": lam, "texts": {}}
    for name, text in texts.items():
        base = None
        rows = {}
        for variant in VARIANTS:
            print(f"{name}: {variant}", file=sys.stderr, flush=True)
            rows[variant], scores = figures(loaded, micro, text.split, variant, lam, base)
            base = scores if variant == "unk" else base
        result["texts"][name] = rows
    write_results(result, args.out, t0)


if __name__ == "__main__":
    main()
