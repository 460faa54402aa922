"""The open-vocabulary tables of ``nslm eval`` and of the Table 4 benchmark: every token counted.

For each closed table (Numbers, Locations) an open one: the table's classes by rule, its
aggregate and Global, each cell the adjusted perplexity beside the in-vocabulary one
(:mod:`nslm.evaluation.open_tables`), for the NNLM, the NSLM, NSLM-open and, when the run
has context-aware micro-models, NSLM-context and NSLM-context-open. λ of each ensemble is
tuned on the validation aggregate (adjusted), as the closed tables tune theirs, and β_c of
each open class on validation (:func:`nslm.evaluation.open_vocab.tune_escapes`); without a
validation text (``eval --text``) λ is the closed table's and β_c the Good-Turing estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.fixed_vocab import TextSplit
from nslm.evaluation.open_tables import open_rows, render_open_table, row_masks
from nslm.evaluation.open_vocab import OpenScores, open_scores, tune_escapes
from nslm.evaluation.tables import TABLES, table_classes, tables_for
from nslm.micro.open_vocab import OpenClass, fit_open
from nslm.scores.mixture import tune_lambda
from nslm.scores.passes import Scorer, head_of

# column → (micro-models: plain or context, open vocabulary)
COLUMNS = {
    "NSLM": ("plain", False),
    "NSLM-open": ("plain", True),
    "NSLM-context": ("context", False),
    "NSLM-context-open": ("context", True),
}


@dataclass
class OpenEvaluation:
    """A run's open scores of each text (``scores[text][micro]``), β_c tuned."""

    scores: dict[str, dict[str, OpenScores]]
    splits: dict[str, Split]
    open_classes: dict[str, OpenClass]
    class_names: Sequence[str]
    good_turing: dict[str, float]  # β_c before tuning, from the training counts

    @property
    def escapes(self) -> dict[str, float]:
        return {name: oc.escape for name, oc in self.open_classes.items()}

    def lambdas(self, row: str, valid: str = "valid") -> dict[str, float]:
        """λ of each column tuned on ``row`` (an aggregate) of the validation text."""
        per = self.scores[valid]
        mask = row_masks(self.splits[valid], self.class_names)[row]
        out = {}
        for column, (micro, is_open) in COLUMNS.items():
            if micro in per:
                out[column] = tune_lambda(per[micro].nnlm(), per[micro].pure(is_open), mask)[0]
        return out

    def columns(self, text: str, lams: dict[str, float]) -> dict[str, np.ndarray]:
        """Each column's adjusted per-position log-probabilities on ``text``."""
        per = self.scores[text]
        out = {"NNLM": per["plain"].nnlm()}
        for column, (micro, is_open) in COLUMNS.items():
            if micro in per and column in lams:
                out[column] = per[micro].ensemble(lams[column], is_open)
        return out

    def table(self, text: str, lams: dict[str, float]) -> dict[str, dict[str, Any]]:
        """``{column: {row: {ppl_adjusted, ppl_in_vocab, tokens, oov_tokens}}}``."""
        split, oov = self.splits[text], self.scores[text]["plain"].oov
        return {
            c: open_rows(lp, split, self.class_names, oov)
            for c, lp in self.columns(text, lams).items()
        }


def evaluate_open(
    scorer: Scorer,
    micro: dict[str, dict],
    texts: dict[str, TextSplit],
    class_names: Sequence[str],
) -> OpenEvaluation:
    """Score every text with each set of micro-models (``{"plain": …, "context": …}``);
    β_c tuned on ``texts["valid"]`` when there is one."""
    open_classes = fit_open(micro["plain"])
    good_turing = {name: oc.escape for name, oc in open_classes.items()}
    scores = {
        name: {
            m: open_scores(scorer, t.split, t.strings, mm, open_classes, class_names)
            for m, mm in micro.items()
        }
        for name, t in texts.items()
    }
    if "valid" in scores:
        escapes = tune_escapes(scores["valid"]["plain"])
        scores = {
            s: {m: sc.with_escapes(escapes) for m, sc in per.items()} for s, per in scores.items()
        }
        for cid, escape in escapes.items():
            open_classes[class_names[cid]].escape = escape
    splits = {name: t.split for name, t in texts.items()}
    return OpenEvaluation(scores, splits, open_classes, class_names, good_turing)


def open_tables(
    scorer: Scorer,
    micro: dict,
    texts: dict[str, TextSplit],
    corpus: PreparedCorpus,
    closed: dict[str, Any],
) -> dict[str, Any]:
    """``nslm eval``'s open-vocabulary tables beside the closed ones of ``closed`` (what
    :func:`nslm.evaluation.report.evaluate_run` returned): one per closed table, its rows
    counted by rule, λ tuned on the validation aggregate when ``texts`` has ``"valid"``,
    else the closed table's; ``texts`` cut to the closed tables' ``max_tokens``."""
    split = closed["split"]
    texts = {n: _head(t, closed["max_tokens"]) for n, t in texts.items() if n in (split, "valid")}
    saved = {table: entry["lambda"] for table, entry in closed["tables"].items()}
    evaluation = evaluate_open(scorer, {"plain": micro}, texts, corpus.class_names)
    out: dict[str, Any] = {"escapes": evaluation.escapes, "tables": {}}
    for table in tables_for(corpus):
        aggregate = TABLES[table][1] or "Global"
        if "valid" in texts:
            lams = evaluation.lambdas(aggregate)
        else:
            lams = {"NSLM": saved[table], "NSLM-open": saved[table]}
        rows = [*table_classes(corpus, table), aggregate, "Global"]
        rows = list(dict.fromkeys(rows))  # a user table's aggregate is Global
        columns = evaluation.table(split, lams)
        out["tables"][table] = {
            "lambdas": lams,
            "rows": rows,
            "columns": {c: {r: v[r] for r in rows} for c, v in columns.items()},
        }
    return out


def _head(text: TextSplit, max_tokens: int) -> TextSplit:
    """A prepared text's first ``max_tokens`` tokens (0 = all), strings with them."""
    if max_tokens <= 0:
        return text
    return replace(text, split=head_of(text.split, max_tokens), strings=text.strings[:max_tokens])


def render_open(result: dict[str, Any]) -> str:
    """The open-vocabulary tables of :func:`open_tables` as text."""
    blocks = []
    betas = ", ".join(f"{n} {b:.2g}" for n, b in result["escapes"].items())
    for table, entry in result["tables"].items():
        title = f"{TABLES[table][0]}, open vocabulary: every token counted by its rule class"
        lams = ", ".join(f"{c} λ={v:.2f}" for c, v in entry["lambdas"].items())
        text = render_open_table(entry["columns"], entry["rows"], title)
        blocks.append(f"{text}\n{lams}; β (new members) {betas}")
    return "\n\n".join(blocks)
