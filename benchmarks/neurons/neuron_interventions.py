"""Do the probed neurons matter? Random-unit baselines, control tasks, ablation, steering.

    python benchmarks/neurons/neuron_interventions.py --run RUN [--skip steering ...]

Adds four keys to benchmarks/results/neurons.json (the others stay), each with its own
command, date and run (docs/probes.md, "Do the neurons matter?"):

- ``random_units``: per probe (SST-2, IMDB, POS grouped and ungrouped, SPACE alone) and
  k ∈ {1, 2, 3, 10}, the probe on its top k units against ``--draws`` (20) draws of k
  random units (Donnelly & Roegiest 2019);
- ``selectivity``: POS accuracy − control-task accuracy (Hewitt & Liang 2019), all units
  and top 1/2/3; SST-2 against shuffled labels;
- ``ablation``: the SST-2 and POS-grouped probes (fitted on the intact model) on the states
  of the model with its top k or k random units zeroed or set to their mean at every step,
  and the valid bits per byte, k ∈ {1, 10, 50};
- ``steering`` (benchmarks/neurons/neuron_steering.py): a positive control, then the sentiment
  direction and clamped units against a TF-IDF review classifier, and every other attempt.

The probes here are this benchmark's own, smaller than benchmarks/neurons/neurons.py's (the sizes
are in the JSON) so that the whole protocol runs in well under an hour on 2 cores; the
pooling is ``mean_cell_hidden``, the best on dev for SST-2 and IMDB in neurons.json.
Figures: benchmarks/results/neurons_*.png and RUN/probes/interventions/ (``nslm report``).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as benchmarks/neurons/neurons.py

import argparse
import json
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
import neuron_steering
from machine import machine_info, today
from nslm.byte_lm.intervention import intervening
from nslm.byte_lm.labelled import read_ewt
from nslm.byte_lm.probes import control_plots as plots
from nslm.byte_lm.probes.controls import (
    ControlTask,
    control_data,
    fit_units_on_dev,
    random_baseline,
    shuffled_labels,
    spread,
)
from nslm.byte_lm.probes.estimators import L1Probe, fit_on_dev
from nslm.byte_lm.probes.pipeline import regroup
from nslm.byte_lm.probes.pos import POS_C, byte_dataset, group_tag, probe_pos, take_bytes
from nslm.byte_lm.probes.sentiment import SPLITS, extract_features, framed, imdb_splits, sst2_splits
from nslm.byte_lm.probes.states import final_states
from nslm.byte_lm.steering import build_intervention, unit_means
from nslm.files.atomic import write_json_atomic
from nslm.perplexity import bits_per_token
from nslm.runs.open import open_run
from nslm.scores.passes import Scorer, head_of

OUT = Path(__file__).resolve().parents[1] / "results" / "neurons.json"
PARTS = ("random_units", "selectivity", "ablation", "steering")
POOLING = "mean_cell_hidden"
KS = (1, 2, 3, 10)
ABLATE_KS = (1, 10, 50)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Sentiment:
    """One sentiment data set: texts, features of the intact model, the probe on them."""

    splits: dict
    X: dict
    y: dict
    probe: L1Probe

    @property
    def acc(self) -> float:
        return float(self.probe.score(self.X["test"], self.y["test"]))


def sentiment(loaded, dataset: str, args) -> Sentiment:
    if dataset == "sst2":
        splits, last = sst2_splits(n_train=args.sst_train), None
    else:
        splits = imdb_splits(n_train=args.imdb_train, n_dev=500, n_test=args.imdb_test)
        last = args.imdb_last_bytes
    feats = extract_features(loaded, splits, last_bytes=last, batch_size=args.batch_size, log=log)
    X = {s: feats[s][POOLING] for s in SPLITS}
    y = {s: splits[s].labels for s in SPLITS}
    probe, _ = fit_on_dev(X["train"], y["train"], X["dev"], y["dev"])
    return Sentiment(splits, X, y, probe)


class Context:
    """Everything read once and shared by the parts (the run, features, fitted probes), each
    read when a part first needs it: steering needs the IMDB probe only."""

    def __init__(self, loaded, args) -> None:
        self.loaded, self.args = loaded, args
        self.hidden = loaded.cfg.hidden_size

    @cached_property
    def sst(self) -> Sentiment:
        return sentiment(self.loaded, "sst2", self.args)

    @cached_property
    def imdb(self) -> Sentiment:
        return sentiment(self.loaded, "imdb", self.args)

    @cached_property
    def train_sentences(self) -> list:
        return take_bytes(read_ewt("train"), self.args.pos_train_bytes)

    @cached_property
    def test_sentences(self) -> list:
        return read_ewt("test", limit=self.args.pos_test)

    @cached_property
    def pos(self) -> dict:
        log(f"POS: {len(self.train_sentences)} train, {len(self.test_sentences)} test sentences")
        train = byte_dataset(self.loaded, self.train_sentences, grouped=False, batch_size=128)
        test = byte_dataset(self.loaded, self.test_sentences, grouped=False, batch_size=128)
        grouped = tuple(regroup(d, np.array([group_tag(t) for t in d.tags])) for d in (train, test))
        return {"grouped": grouped, "ungrouped": (train, test)}

    @cached_property
    def pos_results(self) -> dict:
        return {g: probe_pos(*self.pos[g], ks=KS) for g in self.pos}


def sentiment_random_units(data: Sentiment, draws: int) -> dict:
    out = {"test_acc_all_units": data.acc, "n_features": int(data.X["train"].shape[1])}
    for k in KS:
        top = fit_units_on_dev(data.X, data.y, [data.probe.top_neurons(k).tolist()])[1]
        random = random_baseline(
            lambda units: fit_units_on_dev(data.X, data.y, units)[1],
            data.X["train"].shape[1],
            k,
            1,
            draws,
        )
        out[str(k)] = {"top": top, "random": random}
    return out


def pos_random_units(ctx: Context, grouping: str, draws: int) -> tuple[dict, dict]:
    """Accuracy over all tags, and SPACE's own classifier (tag vs rest), top k vs random k."""
    train, test = ctx.pos[grouping]
    result = ctx.pos_results[grouping]
    out = {"test_acc_all_units": result.summary["rows"]["all"]["acc"]}
    space = {}
    classes = result.probes["all"].classes_
    for k in KS:
        space_accs = []

        def score(units, space_accs=space_accs) -> float:
            probe = L1Probe(C=POS_C, neurons=units).fit(train.X, train.tags)
            scores = probe.decision_function(test.X)
            row = int(np.flatnonzero(probe.classes_ == "SPACE")[0])
            space_accs.append(float(np.mean((scores[:, row] > 0) == (test.tags == "SPACE"))))
            return float(np.mean(probe.predict(test.X) == test.tags))

        random = random_baseline(score, ctx.hidden, k, len(classes), draws)
        out[str(k)] = {"top": result.summary["rows"][str(k)]["acc"], "random": random}
        space[str(k)] = {
            "top": result.summary["per_tag"]["SPACE"][str(k)]["acc"],
            "random": spread(space_accs),
        }
        log(
            f"POS {grouping} k={k}: top {out[str(k)]['top']:.3f}, random "
            f"{random['mean']:.3f} ± {random['sd']:.3f}"
        )
    return out, space


def measure_random_units(ctx: Context) -> dict:
    draws = ctx.args.draws
    out = {"sst2": sentiment_random_units(ctx.sst, draws)}
    log(f"SST-2: {out['sst2']}")
    out["imdb"] = sentiment_random_units(ctx.imdb, draws)
    out["pos_grouped"], out["space"] = pos_random_units(ctx, "grouped", draws)
    out["pos_ungrouped"], _ = pos_random_units(ctx, "ungrouped", draws)
    out["ks"], out["pooling"] = list(KS), POOLING
    out["sizes"] = _sizes(ctx)
    out["plot"] = plots.random_units_plot(
        out,
        ctx.args.out.with_name("neurons_random_units.png"),
        ctx.args.figures / "random_units.png",
    ).name
    return out


def _sizes(ctx: Context) -> dict:
    return {
        "sst2": {s: len(ctx.sst.y[s]) for s in SPLITS},
        "imdb": {s: len(ctx.imdb.y[s]) for s in SPLITS},
        "imdb_last_bytes": ctx.args.imdb_last_bytes,
        "pos_train_bytes": len(ctx.pos["grouped"][0]),
        "pos_test_bytes": len(ctx.pos["grouped"][1]),
    }


def measure_selectivity(ctx: Context) -> dict:
    out = {}
    for grouping, (train, test) in ctx.pos.items():
        control = ControlTask().fit(ctx.train_sentences, grouped=grouping == "grouped")
        ctrain = control_data(train, control.byte_tags(ctx.train_sentences))
        ctest = control_data(test, control.byte_tags(ctx.test_sentences))
        rows = probe_pos(ctrain, ctest, ks=(1, 2, 3)).summary["rows"]
        real = ctx.pos_results[grouping].summary["rows"]
        out[f"pos_{grouping}"] = {
            k: {
                "acc": real[k]["acc"],
                "control_acc": rows[k]["acc"],
                "selectivity": real[k]["acc"] - rows[k]["acc"],
            }
            for k in ("all", "1", "2", "3")
        }
        log(f"selectivity {grouping}: {out[f'pos_{grouping}']}")
    data = ctx.sst
    y = {s: shuffled_labels(data.y[s], seed=i) for i, s in enumerate(SPLITS)}
    control, _ = fit_on_dev(data.X["train"], y["train"], data.X["dev"], y["dev"])
    control_acc = float(control.score(data.X["test"], y["test"]))
    out["sst2"] = {
        "acc": data.acc,
        "control_acc": control_acc,
        "selectivity": data.acc - control_acc,
        "control": "labels of each split shuffled (seeded)",
    }
    out["control_task"] = (
        "each word type's tag drawn once from the train words' tag "
        "distribution (seed 0); its bytes inherit it"
    )
    out["plot"] = plots.selectivity_plot(
        out, ctx.args.out.with_name("neurons_selectivity.png"), ctx.args.figures / "selectivity.png"
    ).name
    return out


def unit_ranking(ctx: Context) -> dict[str, np.ndarray]:
    """Units by importance to each probe: the SST-2 probe's |weight| on a unit's mean cell
    plus its mean hidden value; the POS probe's |weight| summed over its tags."""
    w = np.abs(ctx.sst.probe.coef_[0])
    sst = w[: ctx.hidden] + w[ctx.hidden :]
    pos = np.abs(ctx.pos_results["grouped"].probes["all"].coef_).sum(0)
    return {"sst2": np.argsort(-sst, kind="stable"), "pos_grouped": np.argsort(-pos, kind="stable")}


def ablated_scores(ctx: Context, iv) -> dict:
    loaded, args = ctx.loaded, ctx.args
    with intervening(loaded.model, iv):
        texts = framed(ctx.sst.splits["test"].texts[: args.ablation_sst_test])
        X = final_states(loaded, texts, batch_size=args.batch_size)[POOLING]
        test = byte_dataset(loaded, ctx.test_sentences, grouped=True, batch_size=128)
        split = head_of(loaded.corpus.splits["valid"], args.bpb_bytes)
        # few long streams (10 kB each): 64 streams of a few hundred bytes from the zero state
        # (the run's eval batch) measured mostly the start-up, which mean-ablation removes
        # (30 kB: intact 2.200, 10 random units mean-ablated 2.032; in 4 streams 1.948, 2.008)
        streams = max(1, args.bpb_bytes // 10_000)
        scorer = Scorer(loaded.model, loaded.classes, batch_size=streams, bptt=loaded.cfg.bptt)
        bpb = float(bits_per_token(scorer.score(split).nnlm))
    pos_probe = ctx.pos_results["grouped"].probes["all"]
    return {
        "sst2_acc": float(ctx.sst.probe.score(X, ctx.sst.y["test"][: len(X)])),
        "pos_grouped_acc": float(np.mean(pos_probe.predict(test.X) == test.tags)),
        "valid_bpb": bpb,
    }


def measure_ablation(ctx: Context) -> dict:
    """Each probe's top k units ablated, against k random units (the same random draws for
    both probes: they do not depend on the probe)."""
    loaded, args = ctx.loaded, ctx.args
    means = unit_means(loaded)

    def scores(units: list[int], mode: str) -> dict:
        iv = build_intervention(loaded, ablate=units, ablate_mode=mode, means=means)
        return ablated_scores(ctx, iv)

    out = {"none": ablated_scores(ctx, None), "ks": list(ABLATE_KS)}
    log(f"ablation: intact {out['none']}")
    rng = np.random.default_rng(0)
    ks = [k for k in ABLATE_KS if k < ctx.hidden]
    random = {}
    for mode in ("zero", "mean"):
        for k in ks:
            draws = [
                scores(rng.choice(ctx.hidden, k, replace=False).tolist(), mode)
                for _ in range(args.ablation_draws)
            ]
            random[mode, k] = {key: spread([d[key] for d in draws]) for key in draws[0]}
            log(
                f"ablation random {mode} k={k}: "
                f"{ {key: round(v['mean'], 3) for key, v in random[mode, k].items()} }"
            )
    for probe, order in unit_ranking(ctx).items():
        out[probe] = {}
        for mode in ("zero", "mean"):
            for k in ks:
                top = order[:k].tolist()
                row = {"units": top[:10], "top": scores(top, mode), "random": random[mode, k]}
                out[probe][f"{mode}_{k}"] = row
                log(f"ablation {probe} {mode} k={k}: top {row['top']}")
    out["probes"] = "fitted on the intact model's states; scored on the ablated model's"
    out["valid_bytes"] = args.bpb_bytes
    out["valid_streams"] = max(1, args.bpb_bytes // 10_000)
    out["sst2_test_sentences"] = len(ctx.sst.y["test"][: args.ablation_sst_test])
    out["pos_test_sentences"] = len(ctx.test_sentences)
    out["random_draws"] = args.ablation_draws
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True, help="A byte-LM run directory.")
    parser.add_argument("--skip", nargs="*", default=[], choices=PARTS)
    parser.add_argument("--sst-train", type=int, default=None, help="[all 6,920]")
    parser.add_argument("--imdb-train", type=int, default=2000)
    parser.add_argument("--imdb-test", type=int, default=2000)
    parser.add_argument("--imdb-last-bytes", type=int, default=128)
    parser.add_argument("--pos-train-bytes", type=int, default=30_000)
    parser.add_argument("--pos-test", type=int, default=500, help="EWT test sentences")
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--ablation-draws", type=int, default=3)
    parser.add_argument("--bpb-bytes", type=int, default=50_000)
    parser.add_argument(
        "--ablation-sst-test",
        type=int,
        default=None,
        help="SST-2 test sentences the ablated models read [all]",
    )
    parser.add_argument("--batch-size", type=int, default=128)
    neuron_steering.arguments(parser)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--print", action="store_true", help="Print --out's figures as tables.")
    args = parser.parse_args()
    if args.print:
        print(markdown(json.loads(args.out.read_text())))
        return
    if not (args.run / "config.json").is_file():
        raise SystemExit(f"error: {args.run} is not a run directory")
    loaded = open_run(
        args.run, micro="none", byte_lm="benchmarks/neurons/neuron_interventions.py"
    ).loaded
    args.figures = args.run / "probes" / "interventions"
    stamp = {
        "command": " ".join(["python", *sys.argv]),
        "date": today(),
        "run": str(args.run),
        "hidden_size": loaded.cfg.hidden_size,
    }
    ctx = Context(loaded, args)
    # steering first: it needs the IMDB probe only, and it is the longest story
    parts = {
        "steering": neuron_steering.measure,
        "random_units": measure_random_units,
        "ablation": measure_ablation,
        "selectivity": measure_selectivity,
    }
    for name, measure in parts.items():
        if name in args.skip:
            continue
        started = time.perf_counter()
        log(f"{name} …")
        figure = measure(ctx)
        figure.update(stamp, seconds=round(time.perf_counter() - started, 1))
        figure["machine"] = machine_info()
        # re-read first: the file holds other benchmarks' keys, which stay
        results = json.loads(args.out.read_text()) if args.out.is_file() else {}
        results[name] = figure
        write_json_atomic(args.out, results)
        log(f"wrote {name} to {args.out}")


def markdown(results: dict) -> str:
    """The four keys as the tables of BENCHMARKS.md and docs/probes.md."""
    lines = []
    if "random_units" in results:
        r = results["random_units"]
        lines += [
            "| probe | all units | " + " | ".join(f"top {k} / random {k}" for k in r["ks"]) + " |",
            "|---|---:|" + "---:|" * len(r["ks"]),
        ]
        for key in ("sst2", "imdb", "pos_grouped", "pos_ungrouped", "space"):
            cells = [
                f"{r[key][str(k)]['top']:.3f} / {r[key][str(k)]['random']['mean']:.3f} ± "
                f"{r[key][str(k)]['random']['sd']:.3f}"
                for k in r["ks"]
            ]
            all_units = r[key].get("test_acc_all_units")
            lines.append(
                f"| {key} | {'' if all_units is None else f'{all_units:.3f}'} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    if "selectivity" in results:
        s = results["selectivity"]
        lines += [
            "| probe | units | accuracy | control | selectivity |",
            "|---|---|---:|---:|---:|",
        ]
        for key in ("pos_grouped", "pos_ungrouped"):
            for k, row in s[key].items():
                lines.append(
                    f"| {key} | {k} | {row['acc']:.3f} | {row['control_acc']:.3f} | "
                    f"{row['selectivity']:+.3f} |"
                )
        row = s["sst2"]
        lines += [
            f"| sst2 (shuffled labels) | all | {row['acc']:.3f} | {row['control_acc']:.3f} "
            f"| {row['selectivity']:+.3f} |",
            "",
        ]
    if "ablation" in results:
        a = results["ablation"]

        def cell(row: dict, key: str = "") -> str:
            get = (lambda k: row[k]["mean"]) if key else (lambda k: row[k])
            return f"{get('sst2_acc'):.3f} / {get('pos_grouped_acc'):.3f} / {get('valid_bpb'):.3f}"

        lines += [
            "| ablated | SST-2's top k | POS's top k | k random units |",
            "|---|---|---|---|",
            f"| none | {cell(a['none'])} | | |",
        ]
        for name in a["sst2"]:
            mode, k = name.split("_")
            lines.append(
                f"| {mode}, k = {k} | {cell(a['sst2'][name]['top'])} | "
                f"{cell(a['pos_grouped'][name]['top'])} | "
                f"{cell(a['sst2'][name]['random'], 'mean')} |"
            )
        lines += [
            "",
            "(each cell: SST-2 accuracy / POS grouped accuracy / valid bits per byte)",
            "",
        ]
    if "steering" in results:
        lines.append(neuron_steering.markdown(results["steering"]))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
