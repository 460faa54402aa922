"""Functions that compute: where they apply in WikiText-2, how often they are right, and how
well ``nslm check`` finds numbers that disagree with them.

    python benchmarks/functions/functions.py [--run RUN]
        [--out benchmarks/results/functions_check.json]

Fits every registered function on WikiText-2 train and chooses its confidence (and
``nslm check``'s τ) on valid (:func:`nslm.functions.fitted.fit_on_corpus`), then writes:

- ``coverage``: per function and split, ``positions`` (where its trigger fires, whether or
  not the text then writes its result), ``right`` (the written token is one of its results),
  ``top1`` (it is the writing PDF's likeliest), and their shares;
- ``check``: on WikiText-2 test, ``false_flags`` (the share of untouched numbers a function
  fires at that ``nslm check`` flags) and ``recall`` (the share of corrupted values flagged:
  at each number a function computed right, the value replaced by a plausible wrong one,
  :func:`nslm.functions.check.corrupt`), at the τ chosen on valid (``threshold``), with the
  valid grid; ``examples``, the first flags of the untouched test text;
- ``fits``: each confidence's choice on valid, and the writing PDF's outcomes;
- ``lstm`` (with ``--run RUN``): NNLM, NSLM and NSLM+functions on WikiText-2 test and EWT
  (benchmarks/functions/functions_lstm.py).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from functions_lstm import lstm_rows
from machine import machine_info, today
from nslm.data.locate import locate_corpus
from nslm.files.atomic import write_json_atomic
from nslm.functions.check import check_documents, true_and_corrupt_ratios
from nslm.functions.documents import corpus_file_documents
from nslm.functions.fitted import MAX_FALSE_FLAGS, fit_on_corpus
from nslm.functions.model import FunctionModel

ROOT = Path(__file__).resolve().parents[2]
SPLITS = ("train", "valid", "test")


def coverage(model: FunctionModel, documents: dict[str, list[list[str]]]) -> dict:
    """Per function and split: trigger positions, right, top-1."""
    out: dict[str, dict] = {name: {} for name in model.functions}
    for split, docs in documents.items():
        fired, right, top = Counter(), Counter(), Counter()
        for tokens in docs:
            for i in range(1, len(tokens)):
                for firing in model.firings(tokens, i):
                    name = firing.reference.function
                    fired[name] += 1
                    right[name] += tokens[i] in firing.probs
                    top[name] += max(firing.probs, key=firing.probs.get) == tokens[i]
        for name in model.functions:
            n = fired[name]
            out[name][split] = {
                "positions": n,
                "right": right[name],
                "top1": top[name],
                "right_share": round(right[name] / n, 4) if n else None,
                "top1_share": round(top[name] / n, 4) if n else None,
            }
    return dict(sorted(out.items(), key=lambda item: -item[1]["train"]["positions"]))


def check_figures(model: FunctionModel, test: list[list[str]]) -> dict:
    tau = model.check["threshold"]
    untouched, corrupted = true_and_corrupt_ratios(model, test, seed=1)
    flags, checked = check_documents(model, test, tau)
    return {
        "threshold": tau,
        "threshold_chosen_on": f"WikiText-2 valid: the least τ of the grid with false flags ≤ "
        f"{MAX_FALSE_FLAGS:.0%}",
        "valid_grid": model.check["grid"],
        "at_grid_edge": model.check["at_grid_edge"],
        "n_untouched": len(untouched),
        "n_corrupted": len(corrupted),
        "false_flags": round(sum(r >= tau for r in untouched) / len(untouched), 4),
        "recall": round(sum(r >= tau for r in corrupted) / len(corrupted), 4),
        "checked_test_numbers": checked,
        "examples": [f.to_json() for f in flags[:12]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/functions_check.json"
    )
    parser.add_argument("--run", type=Path, help="an NNLM/HNLM run with micro.json: LSTM rows")
    args = parser.parse_args()
    t0 = time.perf_counter()
    paths = locate_corpus("wikitext-2")
    documents = {s: corpus_file_documents(paths[s], "none") for s in SPLITS}
    model = fit_on_corpus()
    result = {
        "command": "python " + shlex.join(["benchmarks/functions/functions.py", *sys.argv[1:]]),
        "date": today(),
        "functions": {n: type(f).description for n, f in model.functions.items()},
        "coverage": coverage(model, documents),
        "check": check_figures(model, documents["test"]),
        "fits": {
            name: {
                "confidence": model.selection.get(name, {}),
                "writing_keys": len(model.writing.get(name, {}).get("keys", [])),
            }
            for name in model.functions
        },
        "lstm": lstm_rows(args.run, model) if args.run else None,
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine_info(),
    }
    write_json_atomic(args.out, result)
    check = result["check"]
    print(f"wrote {args.out}: check recall {check['recall']}, false flags {check['false_flags']}")


if __name__ == "__main__":
    main()
