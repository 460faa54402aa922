"""What the neural cache adds to a test-split evaluation, measured side by side in one run.

    python benchmarks/wikitext2/cache_cost.py [--run runs/wt2-cpu] [--repeats 3] [--threads 1]

1. ``evaluate_run`` on test with the cache (``nslm eval RUN --cache`` without writing into
   RUN): window, θ and λ tuned on valid per table and model; the "X+cache" columns, i.e. the
   paper's Num Cache / Geo Cache rows.
2. Timing, alternating, best of ``--repeats``: a test-split evaluation as ``nslm eval`` does
   it (the NNLM, HNLM and NSLM scores, every table's columns and rows), without the cache
   and with it at the tuned parameters (the backbone's hidden states kept from the same
   pass, p_cache per distinct (window, θ), the mixtures for NNLM, HNLM and NSLM). Tuning is
   validation work, done once, and not part of either figure.
3. Once each, the whole ``evaluate_run`` (valid and test, tuning included) without and with
   the cache: ``full_eval_ratio``.

Writes benchmarks/results/cache_cost.json with ``cache_cost_ratio`` (target ≤ 1.5, issue 5).
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, timing_arguments, today
from nslm.evaluation.report import evaluate_run, render
from nslm.evaluation.tables import build_table, tables_for
from nslm.files.atomic import write_json_atomic
from nslm.mixtures.cache_column import SUFFIX, CacheSource
from nslm.runs.micro import selected_summary
from nslm.runs.open import open_run

RESULTS = Path(__file__).resolve().parents[1] / "results" / "cache_cost.json"
TARGET = 1.5


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def time_test_eval(loaded, micro, lambdas: dict[str, float], choices=None) -> float:
    """Seconds for the test split's tables, with the cache when ``choices`` are given."""
    corpus, test = loaded.corpus, loaded.corpus.test
    selected = selected_summary(micro)
    t0 = time.perf_counter()
    scorer = loaded.scorer(keep_features=choices is not None)
    scores = scorer.nslm(test, micro)
    cache = None if choices is None else CacheSource(scorer, choices=choices)
    for table in tables_for(corpus):
        columns = scores.columns(lambdas[table])
        if cache is not None:
            columns.update(cache.score("test", test, columns, table))
        build_table(table, columns, test, corpus, selected)
    return time.perf_counter() - t0


def main() -> None:
    args = timing_arguments(__doc__, RESULTS)
    wall = time.perf_counter()
    opened = open_run(args.run, micro="plain", threads=args.threads)
    loaded, micro = opened.loaded, opened.micro

    log("evaluate_run on test with the cache (tuned on valid)")
    t0 = time.perf_counter()
    scorer = loaded.scorer(keep_features=True)
    source = CacheSource(scorer)
    result = evaluate_run(loaded, micro, split="test", extra=[source], scorer=scorer)
    full_with = time.perf_counter() - t0
    print(render(result))
    lambdas = {t: e["lambda"] for t, e in result["tables"].items()}

    log("timing test-split evaluations without and with the cache, alternating")
    passes = []
    for k in range(args.repeats):
        without = time_test_eval(loaded, micro, lambdas)
        with_cache = time_test_eval(loaded, micro, lambdas, source.choices)
        passes.append({"without": without, "with_cache": with_cache})
        log(f"  pass {k + 1}: {without:.2f} s without, {with_cache:.2f} s with the cache")
    t_without = min(p["without"] for p in passes)
    t_with = min(p["with_cache"] for p in passes)

    log("evaluate_run without the cache (valid + test), for the whole-command ratio")
    t0 = time.perf_counter()
    evaluate_run(loaded, micro, split="test")
    full_without = time.perf_counter() - t0

    cache_rows = {}
    for table, entry in result["tables"].items():
        agg = entry["aggregates"][0]
        cache_rows[table] = {
            "row": entry["cache_row"]["name"],
            "aggregate": agg,
            "ppl": {
                m.removesuffix(SUFFIX): entry["rows"][agg][m]
                for m in entry["models"]
                if m.endswith(SUFFIX)
            },
            "ppl_without_cache": {m: entry["rows"][agg][m] for m in entry["models"]},
            "global": {m: entry["rows"]["Global"][m] for m in entry["models"]},
            "params": entry["cache"],
        }
    out = {
        "command": "python " + shlex.join(sys.argv),
        "date": today(),
        "run": str(args.run),
        "threads": args.threads,
        "test_tokens": len(loaded.corpus.test),
        "cache_cost_ratio": t_with / t_without,
        "target": TARGET,
        "met": t_with / t_without <= TARGET,
        "test_eval_seconds": {"without": t_without, "with_cache": t_with, "passes": passes},
        "full_eval_ratio": full_with / full_without,
        "full_eval_seconds": {"without": full_without, "with_cache": full_with},
        "cache": cache_rows,
        "total_seconds": time.perf_counter() - wall,
        "machine": machine_info(),
    }
    write_json_atomic(args.out, out)
    log(f"cache_cost_ratio {out['cache_cost_ratio']:.2f} (target ≤ {TARGET}); wrote {args.out}")


if __name__ == "__main__":
    main()
