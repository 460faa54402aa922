"""Neuron probes of a byte-LM run (docs/probes.md): sentiment (SST-2, IMDB) and POS (UD EWT).

    python benchmarks/neurons/neurons.py --run RUN [--imdb-last-bytes 1000]
        [--pos-train-bytes 150000]

Writes benchmarks/results/neurons.json (accuracies as fractions) and
benchmarks/results/neurons_emergence.png; the probes, summaries and figures go to RUN/probes/.

1. SST-2, whole, detokenised and framed as reviews: final cell, mean cell, mean hidden and
   both means → L1 logistic regression (C on dev); the feature best on dev is ``sst_all_acc``;
   its largest-|weight| neuron thresholded alone (threshold fitted on train) is
   ``sst_one_neuron_acc``; TF-IDF + LR and majority beside.
   The same probes on the raw, tokenised sentences read from the zero state (``sst_raw``)
   show what the framing buys.
2. IMDB: 20,000 train and 500 dev reviews of the shuffled train file, the full 25,000-review
   test file, each review cut to its last ``--imdb-last-bytes`` bytes (extraction time).
3. POS: one-vs-rest L1 probes on the bytes of whole EWT train sentences (seeded order) up to
   ``--pos-train-bytes``, scored on all of EWT test; grouped (Carvalho's groups) and raw XPOS.
4. Emergence: the same probes, smaller (``--emergence-*``: SST-2 train subset, fewer POS
   bytes, no baselines), on every checkpoint the run kept (RUN/kept/minute-*) and on the
   final weights; valid bits/byte of each on the first ``--bpb-bytes`` of the run's valid split.
"""

from __future__ import annotations

import os

# Before torch loads: OpenMP threads spinning for a descheduled sibling slow a shared CPU
# down many times (benchmarks/neurons/byte_lm.py, cli/train.py do the same; a user's setting wins)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.byte_lm.probes import pipeline
from nslm.byte_lm.probes.plots import emergence_plot
from nslm.files.atomic import write_json_atomic
from nslm.perplexity import bits_per_token
from nslm.runs.load import kept_checkpoints
from nslm.runs.open import open_run
from nslm.scores.passes import head_of

OUT = Path(__file__).resolve().parents[1] / "results" / "neurons.json"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def valid_bpb(loaded, n_bytes: int) -> float:
    """Bits per byte of the run's valid split, its first ``n_bytes`` bytes."""
    split = head_of(loaded.corpus.splits["valid"], n_bytes)
    return float(bits_per_token(loaded.scorer().score(split).nnlm))


def probe_point(loaded, args: argparse.Namespace) -> dict:
    """The emergence probes of one set of weights."""
    quiet = pipeline.ProbeSettings(batch_size=args.batch_size)
    sst = pipeline.sentiment(loaded, None, quiet, n_train=args.emergence_sst_train, bow=False)
    pos = pipeline.pos(
        loaded,
        None,
        quiet,
        train_bytes=args.emergence_pos_train_bytes,
        n_test=args.emergence_pos_test,
        groupings=("grouped",),
        ks=(),
    )
    return {
        "valid_bpb": valid_bpb(loaded, args.bpb_bytes),
        "sst_all_acc": sst["all_acc"],
        "sst_one_neuron_acc": sst["one_neuron_acc"],
        "pos_grouped_all_acc": pos["grouped"]["rows"]["all"]["acc"],
    }


def emergence(run: Path, args: argparse.Namespace) -> list[dict]:
    points = []
    marks = list(kept_checkpoints(run).items())
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    marks = [(m, w, json.loads((w.parent / "state.json").read_text())["tokens"]) for m, w in marks]
    if not marks or marks[-1][2] != results["train_tokens"]:  # else the last mark is the end
        marks.append((results["train_minutes"], run / "model.safetensors", results["train_tokens"]))
    for minutes, weights, trained in marks:
        log(f"emergence: {weights} ({minutes:g} minutes, {trained:,} bytes)")
        point = {"minutes": round(minutes, 2), "bytes": int(trained)}
        point.update(probe_point(open_run(run, micro="none", weights=weights).loaded, args))
        log(f"emergence: {point}")
        points.append(point)
    return points


def table(points: list[dict]) -> str:
    lines = [
        "| minutes | bytes | valid bits/byte | SST-2 all | SST-2 one neuron | POS grouped |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        lines.append(
            f"| {p['minutes']:g} | {p['bytes']:,} | {p['valid_bpb']:.3f} | "
            f"{p['sst_all_acc']:.3f} | {p['sst_one_neuron_acc']:.3f} | "
            f"{p['pos_grouped_all_acc']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="A byte-LM run directory.")
    parser.add_argument("--imdb-last-bytes", type=int, default=1000)
    parser.add_argument("--imdb-train", type=int, default=20_000)
    parser.add_argument("--imdb-test", type=int, default=None, help="[all 25,000]")
    parser.add_argument("--pos-train-bytes", type=int, default=150_000)
    parser.add_argument("--emergence-sst-train", type=int, default=1000)
    parser.add_argument("--emergence-pos-train-bytes", type=int, default=10_000)
    parser.add_argument("--emergence-pos-test", type=int, default=500)
    parser.add_argument("--bpb-bytes", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--no-emergence", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    started = time.perf_counter()
    if not (args.run / "results.json").is_file():
        raise SystemExit(f"error: {args.run} has no results.json: a finished byte-LM run, please")
    loaded = open_run(args.run, micro="none", byte_lm="benchmarks/neurons/neurons.py").loaded
    probes = args.run / "probes"
    settings = pipeline.ProbeSettings(batch_size=args.batch_size, log=log)
    log("SST-2")
    sst = pipeline.sentiment(loaded, probes / "sentiment-sst2", settings)
    log("SST-2, raw")
    sst_raw = pipeline.sentiment(loaded, None, settings, bow=False, raw=True)
    log(f"IMDB (last {args.imdb_last_bytes} bytes)")
    imdb = pipeline.sentiment(
        loaded,
        probes / "sentiment-imdb",
        settings,
        dataset="imdb",
        last_bytes=args.imdb_last_bytes,
        n_train=args.imdb_train,
        n_test=args.imdb_test,
    )
    log(f"POS ({args.pos_train_bytes:,} train bytes)")
    pos = pipeline.pos(loaded, probes / "pos", settings, train_bytes=args.pos_train_bytes)
    grouped, ungrouped = pos["grouped"], pos["ungrouped"]
    points = [] if args.no_emergence else emergence(args.run, args)
    png = args.out.with_name(args.out.stem + "_emergence.png")
    if points:
        emergence_plot(points, png, f"probes over training: {args.run.name}")
        print(table(points))
    result = {
        "sst_all_acc": sst["all_acc"],
        "sst_best_pooling": sst["best_pooling"],
        "sst_final_cell_acc": sst["poolings"]["final_cell"]["test_acc"],
        "sst_mean_cell_acc": sst["poolings"]["mean_cell"]["test_acc"],
        "sst_mean_hidden_acc": sst["poolings"]["mean_hidden"]["test_acc"],
        "sst_mean_cell_hidden_acc": sst["poolings"]["mean_cell_hidden"]["test_acc"],
        "sst_raw": {p: v["test_acc"] for p, v in sst_raw["poolings"].items()},
        "sst_raw_all_acc": sst_raw["all_acc"],
        "sst_one_neuron_acc": sst["one_neuron_acc"],
        "sst_one_neuron_index": sst["one_neuron_index"],
        "sst_nonzero_weights": sst["poolings"][sst["best_pooling"]]["n_nonzero"],
        "sst_bow_acc": sst["bow"]["test_acc"],
        "sst_majority_acc": sst["majority"]["test_acc"],
        "imdb_all_acc": imdb["all_acc"],
        "imdb_best_pooling": imdb["best_pooling"],
        "imdb_final_cell_acc": imdb["poolings"]["final_cell"]["test_acc"],
        "imdb_poolings": {p: v["test_acc"] for p, v in imdb["poolings"].items()},
        "imdb_one_neuron_acc": imdb["one_neuron_acc"],
        "imdb_bow_acc": imdb["bow"]["test_acc"],
        "imdb_majority_acc": imdb["majority"]["test_acc"],
        "imdb_sizes": imdb["sizes"],
        "imdb_last_bytes": args.imdb_last_bytes,
        "pos_grouped_all_acc": grouped["rows"]["all"]["acc"],
        "pos_grouped_top1_acc": grouped["rows"]["1"]["acc"],
        "pos_grouped_top2_acc": grouped["rows"]["2"]["acc"],
        "pos_grouped_top3_acc": grouped["rows"]["3"]["acc"],
        "pos_grouped_rows": grouped["rows"],
        "pos_grouped_majority_acc": grouped["majority"]["test_acc"],
        "pos_ungrouped_all_acc": ungrouped["rows"]["all"]["acc"],
        "pos_ungrouped_rows": ungrouped["rows"],
        "space_top3_acc": grouped["space_top3_acc"],
        "pos_train_bytes": grouped["train_bytes"],
        "pos_train_sentences": grouped["train_sentences"],
        "pos_test_bytes": grouped["test_bytes"],
        "emergence": points,
        "emergence_settings": {
            "sst_train": args.emergence_sst_train,
            "pos_train_bytes": args.emergence_pos_train_bytes,
            "pos_test_sentences": args.emergence_pos_test,
            "bpb_valid_bytes": args.bpb_bytes,
        },
        "emergence_plot": png.name if points else None,
        "run": str(args.run),
        "hidden_size": loaded.cfg.hidden_size,
        "seconds": round(time.perf_counter() - started, 1),
        "command": " ".join(["python", *sys.argv]),
        "date": today(),
        "machine": machine_info(),
    }
    write_json_atomic(args.out, result)
    log(f"wrote {args.out} in {result['seconds']:.0f} s")


if __name__ == "__main__":
    main()
