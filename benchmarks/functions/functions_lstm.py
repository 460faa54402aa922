"""The functions inside the LSTM NSLM: NNLM, NSLM and NSLM+functions on WikiText-2 test and
EWT, for benchmarks/functions/functions.py (``--run RUN``).

The NSLM's micro-models of the number classes get the functions mixed in
(:class:`nslm.functions.micro.FunctionMicroModel`); each column is the ensemble λ·NNLM +
(1 − λ)·NSLM with λ tuned on valid Numbers, proper (every OOV token spelt), as
benchmarks/open_vocab/open_vocab.py scores it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))  # shared helpers

from bits_per_byte import class_bits_per_byte
from nslm.data.fixed_vocab import prepare_text, prepare_text_file
from nslm.data.locate import locate_corpus
from nslm.data.numbers import NUMBER_CLASSES
from nslm.evaluation.open_report import evaluate_open
from nslm.functions.micro import FUNCTIONS_COLUMN, register, split_documents, with_functions
from nslm.functions.model import FunctionModel
from nslm.perplexity import perplexity
from nslm.runs.open import open_run
from nslm.scores.spelling import fit_spelling
from texts import ewt_text

COLUMNS = ("NNLM", "NSLM", FUNCTIONS_COLUMN)


def function_positions(model: FunctionModel, split, itos) -> np.ndarray:
    """The positions of ``split`` where a function fires (its trigger, right or not)."""
    documents, _ = split_documents(split, itos)
    out, start = [], 0
    for tokens in documents:
        out += [start + i for i in range(1, len(tokens)) if model.references(tokens, i)]
        start += len(tokens)
    return np.array(out, dtype=np.int64)


def lstm_rows(run: Path, functions: FunctionModel) -> dict:
    """``wt2_test``, ``ewt_test`` and ``computed_wt2_test`` rows of the LSTM columns."""
    register()
    opened = open_run(run, micro="plain")
    loaded, plain = opened.loaded, opened.micro
    corpus, names = loaded.corpus, loaded.corpus.class_names
    itos = corpus.vocab.itos
    numbers = [c for c in NUMBER_CLASSES if c in names]
    micro = {"plain": plain, "functions": with_functions(plain, functions, itos, numbers)}
    paths = locate_corpus("wikitext-2", download=False)
    texts = {s: prepare_text_file(corpus, paths[s], s, "tokenized") for s in ("valid", "test")}
    texts["ewt"] = prepare_text(corpus, ewt_text(), "ewt", "UD English EWT test", "plain")
    evaluation = evaluate_open(loaded.scorer(), micro, {}, fit_spelling(corpus), texts, names)
    lams = evaluation.lambdas("Numbers")
    out: dict = {"run": str(run), "lambdas": {c: lams.get(c) for c in COLUMNS[1:]}}
    for name, key in (("test", "wt2_test"), ("ewt", "ewt_test")):
        text = texts[name]
        columns = evaluation.columns(name, lams, "proper")
        table = evaluation.table(name, lams)
        out[key] = {}
        for column in COLUMNS:
            log_probs = columns[column]
            scored = np.isfinite(log_probs)
            total_bits = -float(np.nansum(log_probs[scored])) / np.log(2)
            by_class = class_bits_per_byte(log_probs, text, names)
            out[key][column] = {
                "bits_per_byte": total_bits / text.plain_bytes,
                "bpb_numbers": by_class["bpb_numbers"],
                "bpb_locations": by_class["bpb_locations"],
                "num_ppl": table[column]["Numbers"]["ppl_proper"],
            }
    test = texts["test"]
    at = function_positions(functions, test.split, itos)
    columns = evaluation.columns("test", lams, "proper")
    size = np.array([len(test.strings[p].encode("utf-8")) for p in at])
    out["computed_wt2_test"] = {
        column: {
            "positions": len(at),
            "bits_per_byte": -float(columns[column][at].sum()) / np.log(2) / int(size.sum()),
            "p_gold_median": float(np.median(np.exp(columns[column][at]))),
            "num_ppl_there": perplexity(columns[column][at]),
        }
        for column in COLUMNS
    }
    return out
