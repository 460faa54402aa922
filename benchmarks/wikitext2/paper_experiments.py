"""The paper's remaining experiments on WikiText-2, gathered in one JSON file.

    python benchmarks/wikitext2/paper_experiments.py --run runs/wt2-cpu [--increment 100 1000 …]
        [--single-task-run RUN]

Every figure comes from the real commands, run here as subprocesses:

* ``cache`` and ``rarity``: ``nslm eval RUN --split test --crnn --cache --by-rarity`` (Tables
  2-3 with the CRNN column and the Num/Geo Cache rows; Figure 3's buckets);
* ``increment``: ``nslm experiment increment --sizes …`` (Table 7), run here with
  ``--increment N …`` (which writes ``benchmarks/results/increment.json``), or read from
  that file as ``nslm experiment increment --sizes 100,1000,10000 --out
  benchmarks/results/increment.json`` wrote it;
* ``grounded`` (Table 6) and ``glove`` (Table 5): read from
  ``benchmarks/results/{grounded,glove}.json`` (``benchmarks/wikitext2/grounded.py
  --variant …`` trains a plain run and the variant side by side);
* ``single_task_awd`` (Table 8): ``nslm eval`` on a run of ``configs/awd-single-task.toml``
  when one is given; otherwise the previous file's figures with the command and date that
  measured them (``measured``), or that it was not run;
* ``cache_cost_ratio``: read from ``benchmarks/results/cache_cost.json``
  (``benchmarks/wikitext2/cache_cost.py``, which times the cache side by side with a plain
  evaluation).

Writes benchmarks/results/paper_experiments.json (and, with ``--increment``,
benchmarks/results/increment.json).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from cli_runs import eval_test_tables, nslm
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

RESULTS = Path(__file__).resolve().parents[1] / "results"
OUT = RESULTS / "paper_experiments.json"
MODELS = ("NNLM", "HNLM", "CRNN", "NSLM")


def cache_tables(run: Path) -> dict[str, Any]:
    """Tables 2-3 with the CRNN and the cache, and Figure 3's buckets, for one run."""
    tables = eval_test_tables(run, "--crnn", "--cache", "--by-rarity", fit_micro=False)
    cache = {}
    for name, entry in tables.items():
        agg = entry["aggregates"][0]
        rows = entry["rows"]
        cache[name] = {
            "rows": rows,
            "cache_row": {m: rows[agg].get(f"{m}+cache") for m in MODELS},
            "ratio_to_nnlm": {m: v / rows[agg]["NNLM"] for m, v in rows[agg].items() if v},
            "cache_params": entry.get("cache"),
        }
    rarity = json.loads((run / "rarity_test.json").read_text())
    return {"cache": cache, "rarity": rarity}


def family_rows(run: Path) -> dict[str, Any]:
    """The Numbers / Locations / Global rows of one run's tables (micro fit, then eval)."""
    tables = eval_test_tables(run)
    return {
        name: {r: entry["rows"][r] for r in entry["aggregates"]} for name, entry in tables.items()
    }


def increment(ns: list[int], out: Path) -> dict[str, Any]:
    nslm("experiment", "increment", "--sizes", ",".join(map(str, ns)), "--out", str(out))
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="A trained run with micro.json.")
    parser.add_argument(
        "--increment",
        type=int,
        nargs="*",
        default=[],
        help="Run Table 7 for these N here (into results/increment.json).",
    )
    parser.add_argument("--single-task-run", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    wall = time.perf_counter()
    out: dict[str, Any] = {"command": "python " + shlex.join(sys.argv), "date": today()}
    out.update(cache_tables(args.run))
    saved = RESULTS / "increment.json"  # nslm experiment increment --sizes … --out this file
    if args.increment:
        out["increment"] = increment(args.increment, saved)
    elif saved.is_file():
        out["increment"] = json.loads(saved.read_text())
    else:
        out["increment"] = {"status": "not run", "why": f"give --increment N … or write {saved}"}
    for variant in ("grounded", "glove"):  # benchmarks/wikitext2/grounded.py: two runs side by side
        path = RESULTS / f"{variant}.json"
        if path.is_file():
            measured = json.loads(path.read_text())
            keep = (
                "command",
                "date",
                "minutes_each",
                f"ratio_{variant}_to_plain",
                "plain",
                variant,
            )
            out[variant] = {k: measured[k] for k in keep}
        else:
            why = f"run benchmarks/wikitext2/grounded.py --variant {variant} first"
            out[variant] = {"status": "not run", "why": why}
    previous = json.loads(args.out.read_text()) if args.out.is_file() else {}
    earlier = previous.get("single_task_awd", {})
    if args.single_task_run:
        out["single_task_awd"] = family_rows(args.single_task_run)
        out["single_task_awd"]["measured"] = {"command": out["command"], "date": out["date"]}
    elif earlier and earlier.get("status") != "not run":
        # Table 8's own run does not depend on the run gathered here: keep its last figures,
        # with the command and date they were measured by
        measured = earlier.get("measured") or {
            "command": previous.get("command"),
            "date": previous.get("date"),
        }
        out["single_task_awd"] = {**earlier, "measured": measured}
    else:
        out["single_task_awd"] = {"status": "not run", "why": "give --single-task-run"}
    cost = RESULTS / "cache_cost.json"
    if cost.is_file():
        measured = json.loads(cost.read_text())
        out["cache_cost_ratio"] = measured["cache_cost_ratio"]
        out["cache_cost_source"] = {"command": measured["command"], "date": measured["date"]}
    else:
        out["cache_cost_ratio"] = None
    out["total_seconds"] = time.perf_counter() - wall
    out["machine"] = machine_info()
    write_json_atomic(args.out, out)
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
