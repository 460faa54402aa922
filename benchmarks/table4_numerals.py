"""Paper Table 4's numeral models (Spithourakis & Riedel 2018) on WikiText-2 test.

    python benchmarks/table4_numerals.py [--split test] [--models softmax mog …]

Reads the runs trained by ``nslm train configs/table4-<model>.toml --run-dir
runs/table4-<model>`` (docs/numerals.md), scores every numeral of the split
(:func:`nslm.evaluation.numeral_models.score_numerals`: adjusted and in-vocabulary numeral
perplexity, value prediction) and writes benchmarks/results/table4_numeral_models.json, one
entry per model with its training minutes, throughput and commands. benchmarks/table4.py
merges it with the NNLM and NSLM rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from machine import machine_info, today
from nslm.atomic import write_json_atomic
from nslm.evaluation.numeral_models import score_numerals
from nslm.runs.open import open_run

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results" / "table4_numeral_models.json"
MODELS = ("softmax", "softmax-rnn", "h-softmax", "h-softmax-rnn", "d-rnn", "mog", "combination")


def evaluate(model: str, split: str) -> dict:
    run_dir = ROOT / "runs" / f"table4-{model}"
    t0 = time.perf_counter()
    loaded = open_run(run_dir, micro="none").loaded
    summary = score_numerals(loaded, split).summary()
    results = json.loads((run_dir / "results.json").read_text())
    return {
        "numeral_model": loaded.cfg.numeral_model,
        **summary,
        "minutes": results["train_minutes"],  # the keys of benchmarks/table4.py's rows
        "train_tokens": results["train_tokens"],
        "tokens_per_s": results["train_tokens_per_s"],
        "steps": results["steps"],
        f"{split}_ppl_all_tokens_model_vocab": results.get(f"{split}_ppl_numeral"),
        "train_command": f"nslm train configs/table4-{model}.toml --run-dir runs/table4-{model}",
        "eval_command": f"python benchmarks/table4_numerals.py --split {split} --models {model}",
        "eval_seconds": time.perf_counter() - t0,
        "run_dir": f"runs/table4-{model}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test", choices=("valid", "test"))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    args = parser.parse_args()
    os.environ.setdefault("NSLM_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    # a rerun of some models keeps the others' entries
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    entries = old.get("models", {}) if old.get("split") == args.split else {}
    for model in args.models:
        if not (ROOT / "runs" / f"table4-{model}" / "results.json").is_file():
            print(f"{model}: no finished run, skipped", file=sys.stderr)
            continue
        entries[model] = evaluate(model, args.split)
        e = entries[model]
        print(
            f"{model:>14}: adjusted {e['num_ppl_adjusted']:.2f}  in-vocab "
            f"{e['num_ppl_in_vocab']:.2f}  MAPE {e['mape']:.1f}  MdAPE {e['mdape']:.1f}  "
            f"MdAE {e['mdae']:.1f}  ({e['n_tokens']} numerals)",
            file=sys.stderr,
            flush=True,
        )
    write_json_atomic(
        RESULTS,
        {
            "benchmark": "table4_numerals",
            "date": today(),
            "machine": machine_info(),
            "split": args.split,
            "corpus": "wikitext-2",
            "models": {m: entries[m] for m in MODELS if m in entries},
        },
    )


if __name__ == "__main__":
    main()
