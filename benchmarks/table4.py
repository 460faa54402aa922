"""Paper Table 4 (Numbers perplexity of the numeral models of Spithourakis & Riedel 2018 beside
the NNLM and the NSLM) and the open-vocabulary NSLM, on WikiText-2 test and UD English EWT.

    python benchmarks/table4.py --run runs/table4 \
        [--numerals benchmarks/results/table4_numeral_models.json]

``--run``: a run of configs/table4.toml with ``nslm micro fit`` (and ``--context``) done.
``--numerals``: the seven numeral models' figures (benchmarks/table4_numerals.py), merged
into the table with their % change against ``softmax``. Writes benchmarks/results/table4.json:

* ``table4``: per model, Numbers perplexity under both conventions (every numeral counted,
  ``<unk>`` charged P(<unk>)/|U|: ``num_ppl_adjusted``; in-vocabulary numerals only:
  ``num_ppl_in_vocab``), ``change_vs_softmax``, ``mape``/``mdape``/``mdae`` of the mode;
* ``oov_class_tokens``: per class, the test tokens unseen in training and how NSLM-open and
  the NNLM score them; ``sums_to_one_max_error`` of NSLM-open at random test positions;
* ``prompts``: NSLM-open's top-5 after prompts with unseen years, counts and places;
* ``ewt``: the same Numbers figures on UD English EWT test read as plain text.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import sys
import time
from pathlib import Path

from machine import machine_info, today
from nslm.atomic import write_json_atomic
from nslm.data.fixed_vocab import prepare_text, prepare_text_file
from nslm.data.locate import locate_corpus
from nslm.evaluation.open_report import evaluate_open
from nslm.evaluation.open_tables import row_masks
from nslm.generation.open_predict import open_predict_many
from nslm.perplexity import perplexity
from nslm.runs.context_micro import has_context_models, load_run_context
from nslm.runs.open import open_run
from nslm.runs.open_micro import load_run_open
from nslm.scores.spelling import fit_spelling
from open_vocab import sums_to_one
from table4_parts import PROMPTS, ewt_text, value_figures

RESULTS = Path(__file__).resolve().parent / "results"
# the config names of benchmarks/table4_numerals.py → the paper's Table 4 names
PAPER_NAMES = {
    "softmax": "softmax",
    "softmax-rnn": "softmax+RNN",
    "h-softmax": "h-softmax",
    "h-softmax-rnn": "h-softmax+RNN",
    "d-rnn": "d-RNN",
    "mog": "MoG",
    "combination": "combination",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=Path("runs/table4"))
    parser.add_argument("--numerals", type=Path, default=RESULTS / "table4_numeral_models.json")
    parser.add_argument("--out", type=Path, default=RESULTS / "table4.json")
    parser.add_argument("--sum-positions", type=int, default=120)
    args = parser.parse_args()
    t0 = time.perf_counter()
    opened = open_run(args.run, micro="plain")
    loaded, plain = opened.loaded, opened.micro
    corpus, names = loaded.corpus, loaded.corpus.class_names
    micro = {"plain": plain}
    if has_context_models(args.run):
        micro["context"] = load_run_context(loaded, plain)
    scorer = loaded.scorer()
    paths = locate_corpus("wikitext-2", download=False)
    texts = {s: prepare_text_file(corpus, paths[s], s, "tokenized") for s in ("valid", "test")}
    texts["ewt"] = prepare_text(corpus, ewt_text(), "ewt", "UD English EWT test", "plain")
    for text in texts.values():
        log(f"scoring {text.describe()}")
    open_classes = load_run_open(loaded, plain)
    spelling = fit_spelling(corpus)
    evaluation = evaluate_open(scorer, micro, open_classes, spelling, texts, names)
    lams = evaluation.lambdas("Numbers")  # Table 4 is the Numbers table: λ tuned there
    log(f"λ on valid Numbers: {lams}")
    split = texts["test"].split
    cols = evaluation.columns("test", lams, "adjusted")
    tables = evaluation.table("test", lams)
    values = value_figures(scorer, split, corpus, micro, open_classes, lams)
    trained = json.loads((args.run / "results.json").read_text())  # the budget, as spent
    spent = {
        "minutes": trained["train_minutes"],
        "train_tokens": trained["train_tokens"],
        "tokens_per_s": trained["train_tokens_per_s"],
    }
    table = {}
    for m, rows in tables.items():
        table[m] = {
            "num_ppl_adjusted": rows["Numbers"]["ppl_adjusted"],
            "num_ppl_in_vocab": rows["Numbers"]["ppl_in_vocab"],
            **values.get(m, {}),
            **spent,
        }
    numerals = json.loads(args.numerals.read_text()) if args.numerals.is_file() else None
    if numerals is not None:
        for m, fig in numerals["models"].items():
            kept = (
                "num_ppl_adjusted",
                "num_ppl_in_vocab",
                "mape",
                "mdape",
                "mdae",
                "minutes",
                "train_tokens",
                "tokens_per_s",
            )
            table[PAPER_NAMES[m]] = {k: fig[k] for k in kept if k in fig}
    base = table.get("softmax", {}).get("num_ppl_adjusted")
    for row in table.values():
        row["change_vs_softmax"] = row["num_ppl_adjusted"] / base - 1 if base else None
    prompts = open_predict_many(loaded, plain, open_classes, PROMPTS, k=5, lam=lams["NSLM-open"])
    sum_error = sums_to_one(loaded, scorer, plain, open_classes, texts["test"], args.sum_positions)[
        "NSLM-open"
    ]
    short = {
        m: {r: rows[r] for r in ("Numbers", "Locations", "Global")} for m, rows in tables.items()
    }
    result = {
        "command": "python " + " ".join(sys.argv),
        "date": today(),
        "run": str(args.run),
        "numerals_file": str(args.numerals) if numerals is not None else None,
        "lambdas": lams,
        "new_member_probability": evaluation.escapes("valid"),
        "table4": table,
        "tables": short,
        "value_baselines": values.get("baselines"),
        "oov_class_tokens": oov_class_figures(
            evaluation.scores["test"]["plain"], cols, split, names
        ),
        "sums_to_one_max_error": sum_error,
        "sum_positions": args.sum_positions,
        "prompts": prompts,
        "ewt": ewt_figures(texts["ewt"], evaluation, lams),
        "seconds": time.perf_counter() - t0,
        "machine": machine_info(),
    }
    table["NSLM-open"]["oov_scored"] = int(evaluation.scores["test"]["plain"].scored_open.sum())
    write_json_atomic(args.out, result)
    log(f"wrote {args.out}")
    for m, row in table.items():
        change = row["change_vs_softmax"]
        log(
            f"{m:<18} {row['num_ppl_adjusted']:>9.1f} {row['num_ppl_in_vocab']:>9.1f} "
            + (f"{change:+.1%}" if change is not None else "")
        )


def oov_class_figures(plain, cols: dict, split, names) -> dict:
    """Per class: test tokens unseen in training, how many NSLM-open scores by an open
    micro-model, and their perplexity (adjusted) under NSLM-open and the NNLM."""
    out = {}
    for cid, name in enumerate(names):
        unseen = split.oov_class_mask & (split.rule_class_ids == cid)
        if cid == 0 or not unseen.any():
            continue
        out[name] = {
            "unseen": int(unseen.sum()),
            "scored": int((plain.scored_open & unseen).sum()),
            "ppl_nslm_open": perplexity(cols["NSLM-open"][unseen]),
            "ppl_nnlm": perplexity(cols["NNLM"][unseen]),
        }
    return out


def ewt_figures(text, evaluation, lams: dict) -> dict:
    """UD English EWT test read as plain text: its tokens, unseen class members, Numbers."""
    split, names = text.split, evaluation.class_names
    numbers = {m: rows["Numbers"] for m, rows in evaluation.table("ewt", lams).items()}
    # β_c as Good-Turing estimates it from the training counts, not tuned on WikiText valid
    plain = evaluation.scores["ewt"]["plain"].with_escapes(
        {names.index(n): b for n, b in evaluation.good_turing.items()}
    )
    gt = plain.ensemble(lams["NSLM-open"])[row_masks(split, names)["Numbers"]]
    unseen = {
        names[c]: int((split.oov_class_mask & (split.rule_class_ids == c)).sum())
        for c in range(1, len(names))
    }
    return {
        "tokens": len(split),
        "oov_tokens": text.oov_tokens,
        "unseen_class_members": {k: v for k, v in unseen.items() if v},
        "numbers": numbers,
        "num_ppl_adjusted": {m: r["ppl_adjusted"] for m, r in numbers.items()},
        "num_ppl_adjusted_nslm_open_good_turing": perplexity(gt),
        "oov_scored": int(evaluation.scores["ewt"]["plain"].scored_open.sum()),
    }


if __name__ == "__main__":
    main()
