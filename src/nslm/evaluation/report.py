"""``nslm eval RUN`` with micro-models: the paper's Tables 2 and 3 for one run, as text and JSON.

λ of the reported ensemble λ·P_NNLM + (1 − λ)·P_NSLM is tuned on validation, per table, on
that table's aggregate (Numbers for Table 2, Locations for Table 3): the mixture is a proper
distribution for every fixed λ, and the paper's tables report one model per class family.
The table's Global row uses the same λ. ``lambda_objective="global"`` tunes one λ on the
validation Global perplexity instead, for every table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.fixed_vocab import TextSplit
from nslm.errors import NslmError
from nslm.evaluation.columns import ColumnSource
from nslm.evaluation.open_report import render_open
from nslm.evaluation.tables import (
    LEGEND,
    TABLES,
    build_table,
    render_table,
    table_classes,
    tables_for,
)
from nslm.evaluation.text_scores import render_text_figures, text_figures
from nslm.micro.model import MicroModel
from nslm.runs.load import LoadedRun
from nslm.runs.micro import selected_summary
from nslm.scores.mixture import tune_lambda
from nslm.scores.passes import Scorer, head_of
from nslm.scores.spelling import fit_spelling
from nslm.scores.split_scores import SplitScores

OBJECTIVES = ("table", "global")


def objective_mask(corpus: PreparedCorpus, split: Split, table: str, objective: str) -> np.ndarray:
    """The validation positions λ is tuned on: the table's classes, or every position."""
    if objective == "global":
        return np.ones(len(split), dtype=bool)
    ids = [corpus.class_names.index(c) for c in table_classes(corpus, table)]
    return np.isin(split.class_ids, ids)


@dataclass(frozen=True)
class EvalOptions:
    """How ``evaluate_run`` scores a split, beyond which split (``nslm eval``'s options).

    ``lambda_objective``: tune λ on valid per table (``table``) or on the Global perplexity
    (``global``). ``max_tokens``: score only each split's first N tokens (0: all). ``texts``
    replaces the corpus's splits by name (``nslm eval --text/--corpus``); ``plain``: the
    prepared texts behind them, whose tokenization-free figures (bits per byte, word and
    OOV-adjusted perplexity: :mod:`nslm.evaluation.text_scores`) go under ``"text"``;
    ``lambdas`` ({"global": λ, table: λ}, as a previous evaluation tuned them) skips
    validation altogether.
    """

    lambda_objective: str = "table"
    max_tokens: int = 0
    texts: Mapping[str, Split] | None = None
    plain: Mapping[str, TextSplit] | None = None
    lambdas: Mapping[str, float] | None = None

    def __post_init__(self) -> None:
        if self.lambda_objective not in OBJECTIVES:
            raise NslmError(f"λ objective must be one of {', '.join(OBJECTIVES)}")


def evaluate_run(
    loaded: LoadedRun,
    micro: dict[str, MicroModel],
    *,
    split: str = "test",
    options: EvalOptions = EvalOptions(),
    scores: dict[str, SplitScores] | None = None,
    extra: Sequence[ColumnSource] = (),
    scorer: Scorer | None = None,
) -> dict[str, Any]:
    """Score valid (for λ) and ``split``; return every table of the run as JSON-ready data.

    ``options``: the λ objective, a prefix of each split, outside texts and saved λ
    (:class:`EvalOptions`). ``scores`` may hold already computed :class:`SplitScores` by
    split name (the benchmark reuses them). ``extra`` adds columns after the run's own
    (:class:`nslm.evaluation.columns.ColumnSource`); give the ``scorer`` the extras read
    from, so that all of them share its one backbone pass per split.
    """
    lambdas, plain = options.lambdas, options.plain
    if lambdas is not None and extra:
        raise NslmError("extra columns tune on validation: they need the run's valid split")
    corpus = loaded.corpus
    scorer = scorer or loaded.scorer()
    scores = dict(scores or {})
    names = {split} if lambdas is not None else {"valid", split}
    given = options.texts or {}
    data = {
        s: head_of(given[s] if s in given else corpus.splits[s], options.max_tokens) for s in names
    }
    scores.update({n: scorer.nslm(part, micro) for n, part in data.items() if n not in scores})
    target = scores[split]
    selected = selected_summary(micro)
    out: dict[str, Any] = {
        "run": str(loaded.run_dir),
        "split": split,
        "lambda_objective": options.lambda_objective,
        "max_tokens": options.max_tokens,
        "tables": {},
    }
    if lambdas is None:
        valid = scores["valid"]
        lam_global, _ = tune_lambda(valid.nnlm, valid.pure)
    else:
        lam_global = lambdas["global"]
    out["lambda_global"] = lam_global
    for table in tables_for(corpus):
        if lambdas is None:
            mask = objective_mask(corpus, data["valid"], table, options.lambda_objective)
            lam, valid_ppl = tune_lambda(valid.nnlm, valid.pure, mask)
        else:
            lam, valid_ppl = lambdas.get(table, lam_global), None
        columns = target.columns(lam)
        if extra:
            valid_columns = valid.columns(lam)
            for source in extra:
                valid_columns.update(source.fit(table, data["valid"], valid_columns, mask))
                columns.update(source.score(split, data[split], columns, table))
        entry = build_table(table, columns, data[split], corpus, selected)
        entry["lambda"] = lam
        entry["lambda_valid_ppl"] = valid_ppl
        for source in extra:
            entry.update(source.describe(table, entry))
        out["tables"][table] = entry
    if plain and split in plain:  # one model per column: the Global λ's ensemble
        spelling = fit_spelling(corpus)
        out["text"] = text_figures(target.columns(lam_global), plain[split], spelling)
    return out


def render(result: dict[str, Any]) -> str:
    """Every table as text, with λ and what the NSLM columns mean."""
    blocks = []
    for table, entry in result["tables"].items():
        note = (
            f"NSLM = {entry['lambda']:.2f}·NNLM + {1 - entry['lambda']:.2f}·NSLM-pure "
            f"(λ tuned on valid {_objective_text(result, table)}); "
            "NSLM-pure = P(c|h)·P_MM (Eq. 4)."
        )
        note = "\n".join([note, *entry.get("notes", [])])  # the extras' lines (cache row, …)
        blocks.append(render_table(entry, note))
    if "text" in result:
        blocks.append(render_text_figures(result["text"]))
    if "open" in result:  # added by the caller: :func:`nslm.evaluation.open_report.open_tables`
        blocks.append(render_open(result["open"]))
    return "\n\n".join([*blocks, LEGEND])


def _objective_text(result: dict[str, Any], table: str) -> str:
    if result["lambda_objective"] == "global":
        return "Global perplexity"
    agg = TABLES[table][1] or "User"
    return f"{agg} perplexity"
