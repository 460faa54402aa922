"""Paper Table 4 on a token budget: the numeral models of Spithourakis & Riedel (2018) beside
the NNLM and the NSLM, every row trained on the same tokens, tuned alike, scored as a
distribution over all strings, with the seeds' noise measured.

    python benchmarks/table4/table4.py [--runs runs/table4] [--max-tokens N | --dry-run]
        [--no-cache]

``--runs``: the folder benchmarks/table4/table4_train.py trained into (``BUDGET/ROW-seedK``;
e.g. ``--runs /root/nslm-runs/table4``). Every finished run (results.json) is scored; the others
are listed in ``missing``. ``--max-tokens N`` scores only the first N tokens of valid and
test (``--dry-run``: 20,000), writes to a temporary folder unless ``--out`` is given and
caches nothing: a quick check of the script, not a result. A full run caches each run's
per-position scores in RUN/table4-eval/ (keyed by the weights, micro-model files, texts and
candidates), so a rerun scores only the runs finished or refitted since.

Writes benchmarks/results/table4.json, benchmarks/results/table4_predictions.jsonl and
benchmarks/results/table4_curves.png:

* ``budgets``: per token budget whose rows have all finished (seed 1; a budget with only
  some rows finished is in ``partial_budgets``, the same way), ``table4``: every row with its
  ``train_tokens``, Numbers perplexity on test (``num_ppl_proper``: every model one
  distribution over all strings, <unk>/<unk_num> spread by a spelling model;
  ``num_ppl_adjusted``: Ueberla's adjusted perplexity, P(<unk>)/|U|; ``num_ppl_in_vocab``),
  MdAPE, MdAE, MAPE of the mode and its ``worst_ape``, all of the row's first seed; rows
  trained with several seeds: ``seeds`` (each seed's figures), ``num_ppl_proper_mean``,
  ``num_ppl_proper_std`` and ``spread`` (which spread: the sample standard deviation);
  every row's ``noise`` (the figure it is compared by, its seeds' mean, and its σ, own or
  borrowed), ``change_vs_softmax`` and ``tie_vs_softmax`` against the softmax seed mean
  (the tie rule: ``noise_band``); each numeral model also ``with_nnlm``: interpolated with
  the same budget's NNLM at λ tuned on valid Numbers (proper), as the NSLM rows are (seed k
  with the NNLM's seed k); a numeral model's ``counts``; ``missing_rows`` (an NSLM row the
  runs cannot give yet, and why); ``train_tokens_check`` (every run within 1% of the
  budget's largest ``train_tokens``, a row's ``tokens_warning`` otherwise) and
  ``train_tokens_accounting`` (the steps' grid against the real targets); ``outcome``
  (NSLM-open against the best numeral model, alone or with the NNLM, by the tie rule, and
  the rows with one seed);
* ``candidates``: the one candidate set of every row's mode; ``baselines``: the train median
  and mean as constant predictions; ``predictions_file``: every test numeral's gold and
  each row's mode;
* ``curves``: valid Numbers perplexity (proper) at every kept checkpoint and at the end, by
  training tokens; ``curve_ratio``: the best numeral model alone over NSLM-pure (neither
  tuned on valid) at each point;
* ``outside_budget``: what the NSLM fits outside the training budget and the measured
  seconds of each fit (RUN/fit_times.json);
* ``missing``: the planned runs not finished yet.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers
from machine import machine_info, today
from nslm.data.numbers import NUMBER_CLASSES, number_class_mask, number_value
from nslm.files.atomic import write_json_atomic
from nslm.numerals.value_metrics import (
    baseline_metrics,
    candidate_strings,
    numeral_vocabulary,
)
from nslm.runs.load import load_run
from nslm.scores.spelling import fit_spelling
from table4_nslm import evaluate_nslm_run, nslm_curve, outside_budget
from table4_numerals import evaluate_numeral_run, numeral_curve
from table4_parts import (
    NSLM_ROWS,
    NUMERAL_ROWS,
    PAPER_NAMES,
    TIE_RULE,
    RunScores,
    Texts,
    borrowed_sigma,
    find_runs,
    is_tie,
    noise_of,
    planned_seeds,
    ppl_figures,
    prepare_texts,
    spread,
    stream_targets,
    tie_threshold,
    trained,
    value_figures,
    with_nnlm,
)
from table4_report import plot_curves, render, write_predictions
from table4_train import BUDGETS, FITS, ROWS, fit_needed

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parents[1] / "results"
DRY_RUN_TOKENS = 20_000
TOKENS_TOLERANCE = 0.01  # every run of a budget within 1% of its largest train_tokens
# the paper's reference (NSLM paper, Table 4): its NSLM against its NNLM, and Spithourakis &
# Riedel's best numeral model (h-softmax+RNN) against their softmax
PAPER = {"NSLM_vs_NNLM": -0.406, "best_numeral_vs_softmax": -0.110}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "table4")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--max-tokens", type=int, default=0, help="score the first N tokens")
    parser.add_argument("--dry-run", action="store_true", help=f"--max-tokens {DRY_RUN_TOKENS:,}")
    parser.add_argument("--no-cache", action="store_true", help="rescore every run")
    parser.add_argument("--no-curves", action="store_true", help="skip the learning curves")
    args = parser.parse_args()
    if not args.runs.is_dir():
        print(f"table4.py: --runs {args.runs}: not a directory", file=sys.stderr)
        sys.exit(2)
    max_tokens = args.max_tokens or (DRY_RUN_TOKENS if args.dry_run else 0)
    out = args.out or (
        RESULTS / "table4.json" if not max_tokens else Path(tempfile.gettempdir()) / "table4-dry"
    )
    if out.suffix != ".json":
        out = out / "table4.json"
    # a cache is written only for the full texts: a dry run leaves the runs untouched
    use_cache = not args.no_cache and not max_tokens
    t0 = time.perf_counter()

    finished, missing = find_runs(args.runs)
    for m in missing:
        log(f"missing: {m['budget']}/{m['row']}-seed{m['seed']} ({m['state']})")
    if not finished:
        raise SystemExit(f"no finished run under {args.runs}")
    first = next(iter(next(iter(finished.values())).values()))
    reference = load_run(next(iter(first.values())))  # any run: they share the corpus
    corpus = reference.corpus
    texts = prepare_texts(corpus, max_tokens)
    for name, text in texts.texts.items():
        log(f"{name}: {len(text.split):,} tokens, {len(texts.positions[name]):,} numerals")
    candidates = candidate_strings(corpus)
    spelling = fit_spelling(corpus)
    train = corpus.train
    train_values = train.values[number_class_mask(train, corpus.class_names)]
    gold = texts.strings_at("test")
    gold_values = np.array([number_value(s) for s in gold])
    baselines = baseline_metrics(gold_values, train_values.mean(), float(np.median(train_values)))

    # the micro-models of the first NNLM/HNLM run that has them score every other one
    nnlm_runs = {
        f"{budget}/nnlm-seed{seed}": run
        for budget, rows in finished.items()
        for seed, run in sorted(rows.get("nnlm", {}).items())
    }
    fallback = next((r for r in nnlm_runs.values() if (r / "micro.json").is_file()), None)
    entries, curves, modes_by_budget = [], {}, {}
    for budget in BUDGETS:
        if budget not in finished:
            continue
        log(f"== budget {budget}")
        entry, curve, modes = score_budget(
            budget, finished[budget], texts, spelling, candidates, fallback, use_cache, args
        )
        entry["train_tokens_accounting"] = stream_targets(corpus, BUDGETS[budget])
        # a budget joins ``budgets`` once every row's seed 1 is finished (a whole table);
        # until then it is shown in ``partial_budgets``, so that readers of ``budgets`` (the
        # project's check) always find every row
        entry["complete"] = all(1 in finished[budget].get(row, {}) for row in ROWS)
        entries.append(entry)
        curves[budget] = curve
        modes_by_budget[budget] = modes
    # the noise: a budget without seeded rows borrows from the first one that has them
    borrowed = {e["name"]: borrowed_sigma(seeded_spreads(e["table4"]), e["name"]) for e in entries}
    anywhere = next((b for b in borrowed.values() if b is not None), None)
    for entry in entries:
        add_noise(entry, borrowed[entry["name"]] or anywhere)
        log(render(entry, baselines))

    predictions = out.parent / "table4_predictions.jsonl"
    write_predictions(predictions, texts, gold, candidates, modes_by_budget)
    png = out.parent / "table4_curves.png"
    if curves and not args.no_curves:
        plot_curves(png, curves)
    result = {
        "command": "python " + shlex.join([shown(Path(sys.argv[0])), *sys.argv[1:]]),
        "date": today(),
        "runs": str(args.runs),
        "max_tokens": max_tokens,
        "positions": "every test token whose rule class is a number class "
        f"({', '.join(NUMBER_CLASSES)}): Table 4's Numbers, {len(gold):,} tokens",
        "budgets": [e for e in entries if e["complete"]],
        "partial_budgets": [e for e in entries if not e["complete"]],
        "paper": PAPER,
        "candidates": {
            "size": len(candidates),
            "built": "Spithourakis & Riedel's set: the training numerals seen at least twice "
            "(the numeral vocabulary K of every numeral model) and the training numerals at "
            "100 evenly spaced ranks of the value order, each written as in training (its "
            "precision kept); nslm.numerals.value_metrics.candidate_strings",
            "quantiles_outside_k": len(candidates) - len(numeral_vocabulary(corpus)),
            "every_row": "every row's mode is its most probable candidate: a numeral model's "
            "proper distribution (a candidate outside K charged P(<unk_num>)·P_spell), the "
            "NNLM's softmax, the NSLM's marginal Σ_c P(c | h)·P(w | c) mixed with the NNLM "
            "at the row's λ",
        },
        "baselines": baselines,
        "predictions_file": shown(predictions),
        "curves": curves,
        "curve_ratio": {b: curve_ratio(c) for b, c in curves.items() if c},
        "curves_png": shown(png),
        "outside_budget": outside_budget_all(fallback, nnlm_runs),
        "missing": missing,
        "seconds": time.perf_counter() - t0,
        "machine": machine_info(),
    }
    write_json_atomic(out, result)
    log(f"wrote {out}, {predictions}" + ("" if args.no_curves else f", {png}"))


def score_budget(budget, runs, texts: Texts, spelling, candidates, fallback, use_cache, args):
    """One budget's table, curves and test modes (each row's first seed)."""
    table: dict[str, dict] = {}
    curve: dict[str, dict] = {}
    modes: dict[str, np.ndarray] = {}
    gold = texts.strings_at("test")
    positions = texts.positions["test"]
    nnlm_runs = runs.get("nnlm", {})
    nnlm_scores = {}
    for seed, run in sorted(nnlm_runs.items()):
        log(f"  nnlm-seed{seed}: NNLM, NSLM rows")
        nnlm_scores[seed] = evaluate_nslm_run(run, texts, spelling, candidates, fallback, use_cache)
    nnlm_seed = min(nnlm_scores) if nnlm_scores else None
    nnlm = nnlm_scores[nnlm_seed] if nnlm_scores else None
    numeral_scores: dict[str, dict[int, RunScores]] = {}
    for row, paper in PAPER_NAMES.items():
        for seed, run in sorted(runs.get(row, {}).items()):
            log(f"  {row}-seed{seed}")
            scores = evaluate_numeral_run(run, paper, texts, candidates, use_cache)
            if nnlm is not None:
                check_in_vocab(scores, nnlm, f"{row}-seed{seed}")
            numeral_scores.setdefault(paper, {})[seed] = scores

    def figures(scores: RunScores, column: str, mixture: bool, seed: int) -> dict:
        fig = ppl_figures(scores, column)
        fig["valid_num_ppl_proper"] = ppl_figures(scores, column, "valid")["num_ppl_proper"]
        values, _ = value_figures(gold, candidates, scores.modes[column], positions)
        fig.update(values)
        if mixture and nnlm is not None:  # seed k with the NNLM's seed k where it has one
            partner = seed if seed in nnlm_scores else nnlm_seed
            fig["with_nnlm"] = with_nnlm(scores, column, nnlm_scores[partner])
            fig["with_nnlm"]["nnlm_seed"] = partner
        return fig

    def add_row(name: str, by_seed: dict[int, RunScores], run_of: dict, mixture: bool) -> None:
        seed = min(by_seed)
        scores = by_seed[seed]
        row = figures(scores, name, mixture, seed)
        row.update(trained(run_of[seed]))
        row["seed"] = seed
        row["run"] = str(run_of[seed])
        if name in scores.lambdas:
            row["lambda"] = scores.lambdas[name]
        if name in NUMERAL_ROWS:  # the numeral vocabulary and what fell outside it
            row["counts"] = scores.info
        modes[name] = scores.modes[name]
        planned = planned_seeds(budget, row_config(name))
        if len(by_seed) > 1 or len(planned) > 1:
            per = {s: figures(sc, name, mixture, s) for s, sc in sorted(by_seed.items())}
            for s, fig in per.items():
                fig.pop("worst_ape", None)
                fig["train_tokens"] = trained(run_of[s])["train_tokens"]
            row["seeds"] = {str(s): fig for s, fig in per.items()}
            row["seeds_planned"] = list(planned)
        table[name] = row

    for paper in NUMERAL_ROWS:
        if paper in numeral_scores:
            add_row(paper, numeral_scores[paper], runs[row_config(paper)], mixture=True)
    missing_rows = {}
    if nnlm is not None:
        columns = dict.fromkeys(c for sc in nnlm_scores.values() for c in sc.columns)
        for column in columns:
            by_seed = {s: sc for s, sc in nnlm_scores.items() if column in sc.columns}
            add_row(column, by_seed, nnlm_runs, mixture=False)
        # no with_nnlm for these rows: the NSLM rows are already mixtures with the NNLM
        for column in columns:
            if "lambda" in table[column]:
                table[column]["ensemble"] = "λ·P_NNLM + (1 − λ)·P_NSLM, λ tuned on valid Numbers"
        table["NSLM-pure"]["ensemble"] = "none: Eq. 4 alone (mixed with the NNLM it is NSLM)"
        table["NNLM"]["nnlm_seed"] = nnlm_seed
        for column in NSLM_ROWS:
            without = {
                s: run for s, run in nnlm_runs.items() if column not in nnlm_scores[s].columns
            }
            if without:  # the row, or some of its seeds, cannot be scored yet
                why = {
                    f"nnlm-seed{s}": missing_why(column, nnlm_scores[s], run)
                    for s, run in without.items()
                }
                missing_rows[column] = why
                log(f"  {column} missing: {why}")
    if not args.no_curves:
        curve = budget_curves(runs, texts, spelling, fallback, use_cache, table)
    tokens = {
        f"{row}-seed{seed}": trained(run)["train_tokens"]
        for row, by_seed in runs.items()
        for seed, run in by_seed.items()
    }
    most = max(tokens.values())
    off = {
        label: n / most - 1 for label, n in tokens.items() if abs(n / most - 1) > TOKENS_TOLERANCE
    }
    for name, row in table.items():
        runs_of_row = [label for label in off if label.startswith(f"{row_config(name)}-seed")]
        if runs_of_row:
            row["tokens_warning"] = (
                f"train_tokens of {', '.join(runs_of_row)} differ from the budget's largest "
                f"({most:,}) by more than {TOKENS_TOLERANCE:.0%}"
            )
    entry = {
        "name": budget,
        "steps": max(r["steps"] for r in table.values()),
        "train_tokens": most,
        "train_tokens_equal_within": (most - min(tokens.values())) / most,
        "train_tokens_check": {
            "rule": f"every run's train_tokens within {TOKENS_TOLERANCE:.0%} of the budget's "
            "largest; a row with a run outside it carries tokens_warning",
            "ok": not off,
            "outside": off,
        },
        "nnlm_for_with_nnlm": "a numeral model's seed k with nnlm-seed k, seed "
        f"{nnlm_seed} where the NNLM has no seed k"
        if nnlm is not None
        else None,
        "nnlm_info": nnlm.info if nnlm is not None else None,
        "missing_rows": missing_rows,
        "table4": table,
    }
    return entry, curve, modes


def missing_why(column: str, scores: RunScores, run: Path) -> str:
    """Why an NNLM/HNLM run gives no ``column``: its own fit is missing or stale (the
    open and context micro-models are gated by the LM states of the weights they were
    fitted on, so another run's cannot stand in), else what the scoring said."""
    fit = {"NSLM-open": FITS[0], "NSLM-context": FITS[1]}.get(column)
    if fit is None:
        return f"{run.name} gives no {column}"
    command = (
        f"nslm micro fit RUN {' '.join(fit.args)}, which benchmarks/table4/table4_train.py runs"
    )
    if not (run / fit.output).is_file():
        return f"no {fit.output} of its own: not fitted yet ({command})"
    if fit_needed(run, fit):
        return f"its {fit.output} is older than its weights: not fitted for them ({command})"
    key = "open_missing_why" if column == "NSLM-open" else "context_missing_why"
    return scores.info.get(key) or f"{fit.output} could not be used"


def check_in_vocab(scores: RunScores, nnlm: RunScores, label: str) -> None:
    """A numeral model's in-vocabulary positions must be the NNLM's (num_ppl_in_vocab is
    compared across rows): the same vocabulary, the same tokens."""
    for text, mask in nnlm.in_vocab.items():
        if not np.array_equal(scores.in_vocab[text], mask):
            raise SystemExit(
                f"{label}: its in-vocabulary positions of {text} differ from the NNLM's"
            )


def row_config(name: str) -> str:
    """The table4_train.py row a Table 4 row comes from."""
    inverse = {v: k for k, v in PAPER_NAMES.items()}
    return inverse.get(name, "nnlm")


def seed_values(row: dict, key=lambda fig: fig["num_ppl_proper"]) -> list[float]:
    """The row's figure at each of its seeds (its one figure without seeds)."""
    per = row.get("seeds")
    return [key(fig) for fig in per.values()] if per else [key(row)]


def seeded_spreads(table: dict) -> dict[str, dict]:
    """{row: spread()} of the rows with two or more seeds finished (proper, test)."""
    out = {}
    for name, row in table.items():
        values = seed_values(row)
        if len(values) > 1:
            out[name] = spread(values)
    return out


def add_noise(entry: dict, borrowed: dict | None) -> None:
    """Every row's ``noise``, the seeds' mean and σ where it has seeds, its change against
    the softmax (seed mean) and whether that is a tie; the budget's ``noise_band`` and
    ``outcome``."""
    table, budget = entry["table4"], entry["name"]
    spreads = seeded_spreads(table)
    for name, row in table.items():
        row["noise"] = noise_of(seed_values(row), borrowed, budget)
        if name in spreads:
            row["num_ppl_proper_mean"] = spreads[name]["mean"]
            row["num_ppl_proper_std"] = spreads[name]["std"]
            row["spread"] = (
                f"std: the sample standard deviation (n − 1) of num_ppl_proper over the "
                f"{spreads[name]['n']} seeds"
            )
            for metric in ("num_ppl_adjusted", "mdape", "mdae"):
                s = spread(seed_values(row, lambda fig, m=metric: fig[m]))
                row[f"{metric}_mean"], row[f"{metric}_std"] = s["mean"], s["std"]
        mixed = row.get("with_nnlm")
        if isinstance(mixed, dict):
            values = seed_values(row, lambda fig: fig["with_nnlm"]["num_ppl_proper"])
            mixed["noise"] = noise_of(values, borrowed, budget)
            if len(values) > 1:
                mixed["num_ppl_proper_mean"] = mixed["noise"]["value"]
                mixed["num_ppl_proper_std"] = mixed["noise"]["sigma"]
    base, nnlm = table.get("softmax"), table.get("NNLM")
    for row in table.values():
        for ref, key in ((base, "softmax"), (nnlm, "nnlm")):
            if ref is None:
                row[f"change_vs_{key}"] = row[f"tie_vs_{key}"] = None
                continue
            a, b = row["noise"], ref["noise"]
            row[f"change_vs_{key}"] = a["value"] / b["value"] - 1
            comparable = ref is not row and a["sigma"] is not None and b["sigma"] is not None
            row[f"tie_vs_{key}"] = (
                is_tie(a["value"], a["sigma"], b["value"], b["sigma"]) if comparable else None
            )
    entry["noise_band"] = {
        "rule": TIE_RULE,
        "per_row": {name: s["std"] for name, s in spreads.items()},
        "seeds": {name: s["n"] for name, s in spreads.items()},
        "borrowed": borrowed,
        "single_seed_rows": [n for n, r in table.items() if r["noise"]["n_seeds"] == 1],
        "change_vs_softmax": "against the softmax row's seed mean; a row's own seed mean "
        "where it has seeds",
    }
    entry["outcome"] = outcome(table, entry.get("missing_rows", {}))


def outcome(table: dict, missing_rows: dict) -> dict:
    """NSLM-open against the best numeral model, alone or with the NNLM, proper, each by
    its seed mean where it has seeds, with the tie rule (:data:`TIE_RULE`)."""
    options = []
    for r in (r for r in NUMERAL_ROWS if r in table):
        options.append((r, table[r]["noise"]))
        mixed = table[r].get("with_nnlm")
        if isinstance(mixed, dict):
            options.append((f"{r}+NNLM", mixed["noise"]))
    single = [n for n, r in table.items() if r["noise"]["n_seeds"] == 1]
    single += [n for n, noise in options if "+NNLM" in n and noise["n_seeds"] == 1]
    out: dict = {"single_seed_rows": single, "numeral_rows_present": [n for n, _ in options]}
    if "NSLM-open" not in table or not options:
        out["nslm_open_missing"] = missing_rows.get("NSLM-open") or "no numeral model finished"
        return out
    best, top = min(options, key=lambda o: o[1]["value"])
    mine = table["NSLM-open"]["noise"]
    sigmas = (mine["sigma"], top["sigma"])
    threshold = None if None in sigmas else tie_threshold(*sigmas)
    tied = [
        n
        for n, noise in options
        if n != best
        and noise["sigma"] is not None
        and top["sigma"] is not None
        and is_tie(noise["value"], noise["sigma"], top["value"], top["sigma"])
    ]
    out.update(
        {
            "best_numeral_model": best,
            "best_numeral_num_ppl_proper": top["value"],
            "best_numeral_sigma": top["sigma"],
            "best_numeral_seeds": top["n_seeds"],
            "tied_with_best": tied,
            "nslm_open_num_ppl_proper": mine["value"],
            "nslm_open_sigma": mine["sigma"],
            "nslm_open_seeds": mine["n_seeds"],
            "nslm_open_vs_best": mine["value"] / top["value"] - 1,
            "difference": mine["value"] - top["value"],
            "tie_threshold": threshold,
            "outside_noise_band": None
            if threshold is None
            else abs(mine["value"] - top["value"]) >= threshold,
        }
    )
    return out


def budget_curves(runs, texts, spelling, fallback, use_cache, table) -> dict:
    """Valid Numbers perplexity (proper) by training tokens, per row (seed 1): the kept
    checkpoints, then the end (the table's valid figure). A kept step's tokens are
    step × the run's tokens per step (results.json: train_tokens / steps)."""
    out: dict[str, dict] = {}

    def points(run: Path, by_step: dict[int, float], end: float) -> dict:
        spent = trained(run)
        per_step = spent["train_tokens"] / spent["steps"]
        steps = [*by_step, spent["steps"]]
        return {
            "steps": steps,
            "train_tokens": [round(s * per_step) for s in steps],
            "valid_num_ppl_proper": [*by_step.values(), end],
        }

    for row, paper in PAPER_NAMES.items():
        run = runs.get(row, {}).get(1)
        if run is None or paper not in table:
            continue
        log(f"  curve {row}-seed1")
        by_step = numeral_curve(run, paper, texts, use_cache)
        out[paper] = points(run, by_step, table[paper]["valid_num_ppl_proper"])
    run = runs.get("nnlm", {}).get(1)
    if run is not None and "NNLM" in table:
        log("  curve nnlm-seed1")
        by_step = nslm_curve(run, texts, spelling, fallback, use_cache)
        for column in ("NNLM", "NSLM", "NSLM-pure", "NSLM-open"):
            if column not in table or table[column]["seed"] != 1:
                continue
            got = {s: v[column] for s, v in by_step.items() if column in v}
            out[column] = points(run, got, table[column]["valid_num_ppl_proper"])
            if len(got) < len(by_step):
                out[column]["note"] = "kept steps without open micro-models that fit them left out"
    tuned = "λ tuned on valid Numbers at each step: tuned on the scored valid set, so not "
    tuned += "comparable with the numeral models alone (NSLM-pure is)"
    for column in ("NSLM", "NSLM-open"):
        if column in out:
            out[column]["tuned_on_valid"] = tuned
    if "NSLM-pure" in out:
        out["NSLM-pure"]["tuned_on_valid"] = "nothing: Eq. 4 alone, as the numeral models alone"
    return out


def curve_ratio(curves: dict) -> dict | None:
    """At each step of the curves, the best numeral model alone over NSLM-pure: neither is
    tuned on the valid set it is scored on."""
    pure = curves.get("NSLM-pure")
    numeral = {r: curves[r] for r in NUMERAL_ROWS if r in curves}
    if pure is None or not numeral:
        return None
    points = []
    for i, step in enumerate(pure["steps"]):
        at = {
            r: c["valid_num_ppl_proper"][c["steps"].index(step)]
            for r, c in numeral.items()
            if step in c["steps"]
        }
        if not at:
            continue
        best = min(at, key=at.get)
        mine = pure["valid_num_ppl_proper"][i]
        points.append(
            {
                "steps": step,
                "train_tokens": pure["train_tokens"][i],
                "best_numeral_model": best,
                "best_numeral_valid_num_ppl_proper": at[best],
                "nslm_pure_valid_num_ppl_proper": mine,
                "ratio": at[best] / mine,
            }
        )
    return {
        "basis": "the best numeral model alone ÷ NSLM-pure, valid Numbers perplexity (proper), "
        "seed 1; neither has a λ tuned on valid",
        "points": points,
        "end": points[-1]["ratio"] if points else None,
    }


def outside_budget_all(fallback: Path | None, nnlm_runs: dict[str, Path]) -> dict:
    out = outside_budget(fallback, nnlm_runs) if fallback is not None else {}
    out["numeral_models"] = (
        "numerals.json of each numeral run is computed from the training text before its "
        "first step (outside the step budget too): the numeral vocabulary, the MoG's frozen "
        "Gaussians (EM, 2–128 components) and the output layers' starting priors"
    )
    return out


def shown(path: Path) -> str:
    """A path as the JSON records it: relative to the project when it is inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    main()
