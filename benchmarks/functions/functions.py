"""Functions that compute: where they apply in WikiText-2, how often they are right, and how
well ``nslm check`` finds numbers that disagree with them.

    python benchmarks/functions/functions.py [--run RUN] [--transformer RUN]
        [--out benchmarks/results/functions.json]

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
  (benchmarks/functions/functions_lstm.py);
- ``transformer`` (with ``--transformer RUN``): Transformer, Transformer+MM and
  Transformer+functions (benchmarks/functions/functions_transformer.py);
- the issue's keys, gathered from both: ``computed_wt2_test``, ``wt2_test``, ``ewt_test``
  (keyed by model), ``generation``, ``prompts``, ``transformer_year_after_new``,
  ``sums_to_one_max_error``; and ``computed_wt2_test_numbers``, the computed positions
  where the text writes a number (a trigger such as "died in" is followed by a place far
  more often than by a year: there no function's result is at stake).
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
from functions_transformer import transformer_rows
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


def gathered(result: dict) -> dict:
    """The issue's keys, each keyed by model, from the LSTM's and the Transformer's rows."""
    lstm, transformer = result.get("lstm") or {}, result.get("transformer") or {}
    out = {}
    for key in ("computed_wt2_test", "computed_wt2_test_numbers", "wt2_test", "ewt_test"):
        out[key] = {**transformer.get(key, {}), **lstm.get(key, {})}
    for key in ("generation", "prompts"):
        out[key] = transformer.get(key)
    if transformer.get("sums_to_one"):
        out["sums_to_one_max_error"] = transformer["sums_to_one"]["max_error"]
    years = transformer.get("transformer_year_after_new") or {}
    if years:  # per prompt: whether the first year is in (Y, Y + 10]; the years beside
        out["transformer_year_after_new"] = {p: v["ok"] for p, v in years.items()}
        out["transformer_year_after_new_detail"] = years
        out["transformer_year_after_new_share"] = sum(v["ok"] for v in years.values()) / len(years)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/functions.json")
    parser.add_argument("--run", type=Path, help="an NNLM/HNLM run with micro.json: LSTM rows")
    parser.add_argument("--transformer", type=Path, help="a Transformer run: its rows")
    parser.add_argument("--generation", type=int, default=100, help="conversions to generate after")
    args = parser.parse_args()
    t0 = time.perf_counter()
    transformer = transformer_rows(args.transformer, args.generation) if args.transformer else None
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
        "transformer": transformer,
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine_info(),
    }
    result.update(gathered(result))
    write_json_atomic(args.out, result)
    check = result["check"]
    print(f"wrote {args.out}: check recall {check['recall']}, false flags {check['false_flags']}")


if __name__ == "__main__":
    main()
