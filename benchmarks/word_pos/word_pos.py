"""Word+POS LMs side by side on Brown and UD EWT: word-only, factorised joint, Eq. 11,
multi-task, and the discriminative left-to-right tagger (docs/word-pos.md).

    python benchmarks/word_pos/word_pos.py  # every model, 20 minutes each at most
    python benchmarks/word_pos/word_pos.py --minutes 1 --corpora ewt --out /tmp/wp.json  # smoke

Each model trains with ``nslm train --config configs/word-pos-<corpus>.toml --set pos_model=<kind>``
(the same config, so the models differ in nothing else), one after the other, into
``runs/word-pos/<corpus>-<kind>``, within ``--minutes`` of training; the halving schedule
may stop it sooner. Every perplexity is over the same test tokens (``<eos>`` included, the
shared vocabulary with its unknown signatures). Writes benchmarks/results/word_pos.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (cli/train.py)

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.files.atomic import write_json_atomic

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results" / "word_pos.json"
MODELS = ("word_only", "joint", "eq11", "multitask")
FIELDS = ("word_ppl_gold_prev_tags", "word_ppl_predicted_tags", "joint_ppl")


def train(corpus: str, kind: str, minutes: float, run_dir: Path) -> dict:
    """Train one model (or reuse a finished run in ``run_dir``); its results.json."""
    results = run_dir / "results.json"
    if not results.is_file():
        command = [
            sys.executable,
            "-m",
            "nslm",
            "train",
            "--config",
            f"configs/word-pos-{corpus}.toml",
            "--set",
            f"pos_model={kind}",
            "--set",
            f"max_minutes={minutes:g}",
            "--set",
            "progress=false",
            "--run-dir",
            str(run_dir),
        ]
        start = time.perf_counter()
        subprocess.run(command, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        print(f"{corpus} {kind}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return json.loads(results.read_text())


def corpus_figures(corpus: str, minutes: float, runs: Path) -> dict:
    out: dict = {}
    for kind in (*MODELS, "tagger"):
        results = train(corpus, kind, minutes, runs / f"{corpus}-{kind}")
        if kind == "tagger":
            out["tagger_discriminative_acc"] = results["test_tagger_acc"]
            out["tagger_discriminative_acc_unknown"] = results["test_tagger_acc_unknown"]
            continue
        figures = {f: results[f"test_{f}"] for f in FIELDS}
        figures["valid_word_ppl_gold_prev_tags"] = results["valid_word_ppl_gold_prev_tags"]
        figures["train_minutes"] = results["train_minutes"]
        figures["train_tokens_per_s"] = results["train_tokens_per_s"]
        figures["epochs"] = results["epochs"]
        if kind in ("joint", "eq11"):
            figures["tagger_acc"] = results["test_tagger_acc"]
            figures["tagger_acc_unknown"] = results["test_tagger_acc_unknown"]
        out[kind] = figures
        out["tagger_mft_baseline_acc"] = results["test_tagger_mft_baseline_acc"]
        out["test_unknown_rate"] = results["test_unknown_rate"]
    out["tagger_acc"] = out["joint"]["tagger_acc"]  # the joint LM is the tagger reported
    word_only = out["word_only"]["word_ppl_gold_prev_tags"]
    out["joint_gain_gold_prev_tags"] = out["joint"]["word_ppl_gold_prev_tags"] / word_only
    out["joint_gain_predicted_tags"] = out["joint"]["word_ppl_predicted_tags"] / word_only
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0, help="training budget per model")
    parser.add_argument("--corpora", default="brown,ewt", help="comma-separated")
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "word-pos")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the results JSON")
    args = parser.parse_args()
    os.environ.setdefault("NSLM_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    load_before = os.getloadavg()[0]
    out: dict = {}
    for corpus in args.corpora.split(","):
        out[corpus] = corpus_figures(corpus, args.minutes, args.runs.resolve())
    out.update(
        {
            "minutes_per_model": args.minutes,
            "load_average_1m_before": load_before,
            "load_average_1m_after": os.getloadavg()[0],
            "command": " ".join(["python", "benchmarks/word_pos/word_pos.py", *sys.argv[1:]]),
            "date": today(),
            "machine": machine_info(),
        }
    )
    write_json_atomic(args.out, out)
    print(json.dumps({c: out[c] for c in args.corpora.split(",")}, indent=1))


if __name__ == "__main__":
    main()
