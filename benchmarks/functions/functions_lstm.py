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
from nslm.data.numbers import NUMBER_CLASSES, is_number
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
    top1 = top1_exact(opened, functions, test, at, lams)
    out["computed_wt2_test"] = {
        column: {
            **at_positions(columns[column], at, size),
            "top1_exact": top1[column],
            "top1_reading": "the likeliest next token (predict) after the article up to the "
            "position, read afresh from the article's start",
        }
        for column in COLUMNS
    }
    number = np.array([is_number(test.strings[p]) for p in at], dtype=bool)
    out["computed_wt2_test_numbers"] = {
        column: at_positions(columns[column], at[number], size[number]) for column in COLUMNS
    }
    return out


def at_positions(log_probs: np.ndarray, at: np.ndarray, size: np.ndarray) -> dict:
    """Bits per byte, the median P(gold) and the perplexity of ``log_probs`` at ``at``."""
    return {
        "positions": len(at),
        "bits_per_byte": -float(log_probs[at].sum()) / np.log(2) / int(size.sum()),
        "p_gold_median": float(np.median(np.exp(log_probs[at]))),
        "num_ppl_there": perplexity(log_probs[at]),
    }


def top1_exact(opened, functions, text, at: np.ndarray, lams: dict, chunk: int = 16) -> dict:
    """At each position ``at`` of ``text``: whether each column's likeliest next token is the
    text's (``nslm predict``'s lists: the NNLM's; the NSLM's ensemble at its λ; with the
    ``functions`` mixed in at NSLM+functions' λ). The prompt is the article up to there."""
    from nslm.functions.micro import mix_into_distribution
    from nslm.generation.predict import predict_many

    loaded, micro = opened.loaded, opened.micro
    split, strings = text.split, text.strings
    starts = np.flatnonzero(np.r_[True, np.diff(split.article_ids) != 0])
    prompts, gold = [], []
    for p in at.tolist():
        start = int(starts[np.searchsorted(starts, p, side="right") - 1])
        prompts.append(" ".join(strings[start:p]))
        gold.append(strings[p])
    corpus = loaded.corpus

    def adjust(full, tokens) -> None:
        mix_into_distribution(full, functions, tokens, corpus.vocab.itos, corpus.class_names)

    hits = {column: [] for column in COLUMNS}
    for a in range(0, len(prompts), chunk):
        batch = prompts[a : a + chunk]
        plain = predict_many(loaded, micro, batch, k=1, lam=lams["NSLM"], input_format="tokenized")
        mixed = predict_many(
            loaded,
            micro,
            batch,
            k=1,
            lam=lams[FUNCTIONS_COLUMN],
            input_format="tokenized",
            adjust=adjust,
        )
        for g, p_row, m_row in zip(gold[a : a + chunk], plain, mixed, strict=True):
            hits["NNLM"].append(p_row["nnlm"][0]["token"] == g)
            hits["NSLM"].append(p_row["nslm"][0]["token"] == g)
            hits[FUNCTIONS_COLUMN].append(m_row["nslm"][0]["token"] == g)
    return {column: float(np.mean(v)) if v else None for column, v in hits.items()}
