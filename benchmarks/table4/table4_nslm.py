"""The NNLM/HNLM run of Table 4 (configs/table4.toml) for benchmarks/table4/table4.py: the NNLM,
NSLM, NSLM-pure, NSLM-open and (with RUN/micro_context.json) NSLM-context rows, scored at the
numerals of WikiText-2 valid and test, and their learning curves from the kept weights.

Every column is a distribution over all strings (proper; :mod:`nslm.evaluation.open_vocab`):
the NNLM's P(<unk> | h) is spread by the spelling model of :func:`nslm.scores.spelling.
fit_spelling`; the NSLM columns are the ensembles λ·P_NNLM + (1 − λ)·P_NSLM with λ tuned on
valid Numbers (proper, :meth:`~nslm.evaluation.open_report.OpenEvaluation.lambdas`);
NSLM-pure is Eq. 4 alone. The micro-models are count-fitted on the training text and do
not read the LM (micro.json), so a run without its own (another seed, the larger budget, a
kept checkpoint) is scored with those of the first run that has them; the open
micro-models (open.json) likewise, unless they are gated by the LM's states, which belong
to the weights they were fitted on (benchmarks/table4/table4_train.py fits every NNLM/HNLM run's
own, and its context micro-models, timing each fit in RUN/fit_times.json).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from nslm.errors import NslmError
from nslm.evaluation.open_report import evaluate_open
from nslm.numerals.values import candidate_types, word_model_modes
from nslm.perplexity import perplexity
from nslm.runs.context_micro import CONTEXT_FILE, has_context_models, load_run_context
from nslm.runs.files import load_model_tensors
from nslm.runs.micro import load_run_micro
from nslm.runs.open_micro import load_run_open
from table4_parts import (
    CONVENTIONS,
    TEXTS,
    RunScores,
    Texts,
    cached,
    candidates_digest,
    file_stamp,
    kept_curve,
    open_table4_run,
)
from table4_train import FIT_TIMES, FITS, fit_needed

MICRO, OPEN = "micro.json", "open.json"


def micro_home(run: Path, fallback: Path | None) -> Path:
    """The run whose micro.json scores ``run``: its own, else ``fallback``'s."""
    if (run / MICRO).is_file() or fallback is None:
        return run
    return fallback


def load_open(loaded, plain: dict, homes: list[Path]) -> tuple[dict, str]:
    """The open micro-models of the first of ``homes`` that has open.json and fits these
    weights (an ungated one fits any; a gated one only the weights it was fitted on), and
    where they came from, or ({}, why not)."""
    why = "no open.json"
    for home in homes:
        if not (home / OPEN).is_file():
            continue
        try:
            return load_run_open(replace(loaded, run_dir=home), plain), str(home / OPEN)
        except NslmError as exc:
            why = f"{home / OPEN} does not fit these weights ({exc})"
    return {}, why


def evaluate_nslm_run(
    run: Path,
    texts: Texts,
    spelling,
    candidates: list[str],
    fallback: Path | None,
    use_cache: bool,
) -> RunScores:
    """The run's final weights at valid and test: every column, its λ and its modes."""
    home = micro_home(run, fallback)
    path = run / "table4-eval" / "final.npz" if use_cache else None

    def compute() -> dict[str, np.ndarray]:
        loaded = open_table4_run(run, texts.itos)
        names = loaded.corpus.class_names
        plain = load_run_micro(loaded, home / MICRO)
        micro = {"plain": plain}
        context_why = context_missing(run)
        if has_context_models(run):
            try:
                micro["context"] = load_run_context(loaded, plain)
            except NslmError as exc:  # fitted on other weights: the row is missing, and why
                context_why = f"{run / CONTEXT_FILE} does not fit these weights ({exc})"
        open_models, open_from = load_open(loaded, plain, [run, home])
        scorer = loaded.scorer()
        evaluation = evaluate_open(scorer, micro, open_models, spelling, texts.texts, names)
        lams = evaluation.lambdas("Numbers")  # Table 4 is the Numbers table: λ tuned there
        kept = ["NNLM", "NSLM", "NSLM-pure"]
        kept += ["NSLM-open"] if open_models else []
        kept += ["NSLM-context"] if "context" in micro else []
        log_probs: dict = {}
        in_vocab = {}
        for name in TEXTS:
            at = texts.positions[name]
            plain_scores = evaluation.scores[name]["plain"]
            log_probs[name] = {}
            for conv in CONVENTIONS:
                cols = evaluation.columns(name, lams, conv)
                cols["NSLM-pure"] = plain_scores.pure(False, conv)
                log_probs[name][conv] = {c: cols[c][at] for c in kept}
            in_vocab[name] = ~plain_scores.oov[at]
            if np.isnan(log_probs[name]["proper"]["NNLM"]).any():
                raise SystemExit(f"{run}: a numeral position of {name} is unscored")
        models = {"NSLM": (plain, lams["NSLM"], None), "NSLM-pure": (plain, 0.0, None)}
        if open_models:
            models["NSLM-open"] = (plain, lams["NSLM-open"], open_models)
        if "context" in micro:
            models["NSLM-context"] = (micro["context"], lams["NSLM-context"], None)
        ids = candidate_types(texts.itos, candidates)
        modes = word_model_modes(
            scorer, texts.texts["test"].split, texts.positions["test"], ids, names, models
        )
        info = {
            "micro_from": str(home / MICRO),
            "open_from": open_from if open_models else None,
            "open_missing_why": None if open_models else open_from,
            "context": "context" in micro,
            "context_missing_why": None if "context" in micro else context_why,
        }
        lambdas = {c: lams[c] for c in kept if c in lams}
        return RunScores(log_probs, in_vocab, modes, lambdas, info).to_arrays()

    key = final_key(run, home, texts, candidates)
    return RunScores.from_arrays(cached(path, key, compute))


def final_key(run: Path, home: Path, texts: Texts, candidates: list[str]) -> dict:
    """What the cached final scores of an NNLM/HNLM run depend on: its weights, the
    micro-model files it is scored with (``home``'s micro.json, its own or ``home``'s
    open.json, its context micro-models), the texts and the candidate set."""
    return {
        "what": "nslm-final",
        "weights": file_stamp(run / "model.safetensors"),
        "micro": [str(home), file_stamp(home / MICRO)],
        "open": [file_stamp(run / OPEN), file_stamp(home / OPEN)],
        "context": file_stamp(run / CONTEXT_FILE),
        "texts": texts.fingerprint(),
        "candidates": candidates_digest(candidates),
    }


def context_missing(run: Path) -> str:
    """Why ``run`` has no NSLM-context row."""
    return f"no {CONTEXT_FILE}: its context micro-models are not fitted"


def nslm_curve(
    run: Path, texts: Texts, spelling, fallback: Path | None, use_cache: bool
) -> dict[int, dict[str, float]]:
    """{step: {column: valid Numbers perplexity (proper)}} of every kept weights file: the
    NNLM, NSLM-pure and the NSLM (λ tuned on valid Numbers at that step, as the table's),
    NSLM-open where its open micro-models fit those weights. The micro-models are the run's
    final ones: count-fitted, they do not change with the LM."""
    home = micro_home(run, fallback)
    loaded = plain = None

    def score(weights: Path) -> dict[str, np.ndarray]:
        nonlocal loaded, plain
        if loaded is None:
            loaded = open_table4_run(run, texts.itos)
            plain = load_run_micro(loaded, home / MICRO)
        load_model_tensors(loaded.model, weights)
        loaded.model.eval()
        open_models, _ = load_open(loaded, plain, [run, home])
        valid = {"valid": texts.texts["valid"]}
        names = loaded.corpus.class_names
        evaluation = evaluate_open(
            loaded.scorer(), {"plain": plain}, open_models, spelling, valid, names
        )
        lams = evaluation.lambdas("Numbers")
        cols = evaluation.columns("valid", lams, "proper")
        cols["NSLM-pure"] = evaluation.scores["valid"]["plain"].pure(False, "proper")
        kept = ["NNLM", "NSLM", "NSLM-pure"] + (["NSLM-open"] if open_models else [])
        at = texts.positions["valid"]
        return {c: np.array(perplexity(cols[c][at])) for c in kept}

    key = {
        "what": "nslm-curve",
        "micro": [str(home), file_stamp(home / MICRO)],
        "open": [file_stamp(run / OPEN), file_stamp(home / OPEN)],
    }
    return kept_curve(run, key, texts, use_cache, score)


def fit_seconds(run: Path) -> dict:
    """The wall time of each fit benchmarks/table4/table4_train.py ran on ``run`` outside the
    training budget (RUN/fit_times.json), or None with why there is none."""
    path = run / FIT_TIMES
    times = json.loads(path.read_text()) if path.is_file() else {}
    out = {}
    for fit in FITS:
        entry = times.get(fit.name)
        if (run / fit.output).is_file() and fit_needed(run, fit):
            why = f"{fit.output} is older than the run's weights: not fitted for them yet"
        elif entry is not None:
            out[fit.name] = {
                k: entry.get(k) for k in ("seconds", "command", "wrote_at_seconds", "finished")
            }
            continue
        elif (run / fit.output).is_file():
            why = (
                f"{fit.output} was fitted before benchmarks/table4/table4_train.py timed its fits "
                f"(no '{fit.name}' entry in {FIT_TIMES})"
            )
        else:
            why = f"not fitted yet (no {fit.output})"
        out[fit.name] = {"seconds": None, "why": why}
    return out


def outside_budget(run: Path, nnlm_runs: dict[str, Path]) -> dict:
    """What the NSLM fits outside the training budget: which micro-models and how they were
    selected, the open and context micro-models and how each was fitted (read from
    ``run``'s files), and the wall time of each fit of every NNLM/HNLM run in
    ``nnlm_runs`` ({"budget/nnlm-seedK": run}; :func:`fit_seconds`)."""
    out: dict = {"run": str(run)}
    micro_path = run / MICRO
    if micro_path.is_file():
        payload = json.loads(micro_path.read_text())
        classes = payload.get("classes", {})
        out["micro_models"] = {
            "file": str(micro_path),
            "grid": payload.get("grid"),
            "classes": len(classes),
            "selection": "per class, the (metric, context, PDF) of the grid with the lowest "
            "micro-model perplexity on the class's validation tokens (micro.json 'valid_ppl')",
            "grid_points": {n: len(e.get("grid", [])) for n, e in classes.items()},
            "selected": {
                n: {
                    "metric": e["selected"].get("metric"),
                    "context": e["selected"].get("context"),
                    "pdf": (e["selected"].get("pdf") or {}).get("name"),
                }
                for n, e in classes.items()
            },
            "fitted_on": "the training text's counts; the grid choice reads valid",
        }
    open_path = run / OPEN
    if open_path.is_file():
        payload = json.loads(open_path.read_text())
        classes = payload.get("classes", {})
        gates = {n: e for n, e in classes.items() if "gate" in e}
        out["open_micro_models"] = {
            "file": str(open_path),
            "classes": len(classes),
            "gated_by_lm_states": bool(gates),
            "how": {n: e.get("how") for n, e in classes.items()},
            "gates": {
                n: {
                    "l2": e["gate"].get("l2"),
                    "l2_grid": e["gate"].get("l2_grid"),
                    "valid_nll": e.get("gate_valid_nll"),
                }
                for n, e in gates.items()
            },
            "gates_note": "a gate reads the LM's states: fitted on the training text's states, "
            "its L2 weight chosen on valid, kept where it lowers the class's valid NLL; it "
            "belongs to the weights it was fitted on (every NNLM/HNLM run fits its own)",
        }
    context = run / CONTEXT_FILE
    out["context_micro_models"] = str(context) if context.is_file() else None
    out["lambda"] = (
        "λ of each NSLM ensemble on the grid 0, 0.01, …, 1, chosen on valid Numbers (proper); "
        "every numeral model gets the same λ tuning against the same NNLM (with_nnlm)"
    )
    out["spelling_models"] = (
        "the NNLM's <unk> spelling model (the training text's rarest types) and the numeral "
        "models' <unk_num> one (their training numerals outside K) are fitted on training "
        "text at evaluation time, for every row alike"
    )
    out["fits"] = {fit.name: fit.what for fit in FITS}
    out["seconds"] = {name: fit_seconds(r) for name, r in nnlm_runs.items()}
    out["seconds_note"] = (
        "wall time of each `nslm micro fit` command that benchmarks/table4/table4_train.py ran "
        "after the run trained (RUN/fit_times.json; the machine may have been busy); None, "
        "with why, where a run has no timed fit yet"
    )
    return out
