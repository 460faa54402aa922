"""Modified-KN n-gram LMs on WikiText-2: build time, peak memory, scoring speed, perplexity.

    python benchmarks/ngram/ngram.py            # prepared corpus and raw stream, orders 2-5
    python benchmarks/ngram/ngram.py --raw      # only the raw (lmplz-comparable) stream

Each build runs in its own subprocess, so ``peak_mb`` is that process's peak resident set
size (Python, numpy, the corpus and the model: the whole process, as for lmplz).

* prepared (``nslm data prepare --corpus wikitext-2 --classes all``, cached beforehand): the
  model is built from the prepared train token ids; ``test_ppl`` is the evaluator's Global row
  (every test position but the first, ``<eos>`` included); ``tokens_per_s`` is the vectorised
  scoring speed on the test split (best of 3).
* raw: the text as KenLM's ``lmplz`` reads it (lines stripped, empty lines dropped, ``<unk>``
  an ordinary word, ``<s>``/``</s>`` around each line); ``raw_build_seconds`` runs from
  reading the text file to the finished model, like lmplz's wall time. ``raw_test_ppl`` counts
  ``</s>`` over ``raw_test_tokens`` tokens, like KenLM's ``query``.

Writes benchmarks/results/ngram.json (``--raw``: ngram-raw.json).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "results"
# KenLM lmplz on the raw stream, measured on this machine (BENCHMARKS.md, n-gram section).
KENLM = {"2": 269.86, "3": 230.89, "4": 226.05, "5": 224.81}
KENLM_5GRAM_BUILD = {"seconds": 3.3, "peak_gb": 0.45}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker_prepared(order: int) -> dict:
    from nslm.data import prepare_corpus
    from nslm.evaluation.class_perplexity import class_perplexities
    from nslm.ngram.build import build_model, prepared_stream

    corpus = prepare_corpus("wikitext-2", "all")
    train = prepared_stream(corpus, "train")
    test = prepared_stream(corpus, "test")
    start = time.perf_counter()
    model = build_model(train, order)
    build_seconds = time.perf_counter() - start
    peak = _peak_mb()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        log_probs = model.score_ids(test.ids)
        times.append(time.perf_counter() - start)
    table = class_perplexities(log_probs, corpus.test, corpus)
    return {
        "build_seconds": round(build_seconds, 3),
        "peak_mb": round(peak, 1),
        "test_ppl": round(table["Global"]["ppl"], 3),
        "test_tokens": table["Global"]["tokens"],
        "numbers_ppl": round(table["Numbers"]["ppl"], 2),
        "locations_ppl": round(table["Locations"]["ppl"], 2),
        "tokens_per_s": round(len(test.ids) / min(times)),
        "ngrams": model.sizes(),
    }


def worker_raw(order: int) -> dict:
    from nslm.data import locate_corpus
    from nslm.ngram.build import build_model, raw_lines, raw_stream, raw_vocabulary

    paths = locate_corpus("wikitext-2")
    start = time.perf_counter()
    lines = raw_lines(paths["train"])
    itos, unk = raw_vocabulary(lines)
    model = build_model(raw_stream(lines, itos, unk), order)
    build_seconds = time.perf_counter() - start
    peak = _peak_mb()
    test = raw_stream(raw_lines(paths["test"]), itos, unk)
    log_probs = model.score_ids(test.ids, first_nan=False)
    return {
        "raw_build_seconds": round(build_seconds, 3),
        "raw_peak_mb": round(peak, 1),
        "raw_test_ppl": round(math.exp(-log_probs.mean()), 3),
        "raw_test_tokens": len(log_probs),
        "raw_discounts": model.meta["discounts"],
    }


def run_worker(kind: str, order: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--order", str(order)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", action="store_true", help="only the raw lmplz-style stream")
    parser.add_argument("--orders", default="2,3,4,5")
    parser.add_argument("--worker", choices=["prepared", "raw"], help=argparse.SUPPRESS)
    parser.add_argument("--order", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        fn = worker_prepared if args.worker == "prepared" else worker_raw
        print(json.dumps(fn(args.order)))
        return

    if not args.raw:
        from nslm.data import prepare_corpus

        prepare_corpus("wikitext-2", "all")  # fill the cache outside the timed builds
    orders: dict[str, dict] = {}
    for order in (int(x) for x in args.orders.split(",")):
        row: dict = {}
        if not args.raw:
            row.update(run_worker("prepared", order))
        row.update(run_worker("raw", order))
        ref = KENLM.get(str(order))
        if ref is not None:
            row["kenlm_raw_test_ppl"] = ref
            row["raw_vs_kenlm_percent"] = round(100 * (row["raw_test_ppl"] / ref - 1), 3)
        orders[str(order)] = row
        print(f"order {order}: {json.dumps(row)}", file=sys.stderr)
    command = "python benchmarks/ngram/ngram.py" + (" --raw" if args.raw else "")
    result = {
        "command": command,
        "corpus": "wikitext-2 (prepared --classes all; raw = lmplz's reading of the text)",
        "orders": orders,
        "kenlm_reference": {"raw_test_ppl": KENLM, "5gram_build": KENLM_5GRAM_BUILD},
        "targets": {"5gram_build_seconds": 15, "5gram_peak_mb": 2048, "tokens_per_s": 500_000},
        "date": today(),
        "machine": machine_info(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("ngram-raw.json" if args.raw else "ngram.json")
    write_json_atomic(path, result, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
