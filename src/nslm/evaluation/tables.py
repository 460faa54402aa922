"""The paper's Tables 2 (numbers) and 3 (places) from per-position log-probabilities.

A table has one row per class of its family, with the class's selected metric and PDF, then
the aggregate (Numbers or Locations) and Global, each with the % change against the NNLM as
the paper prints it: a reduction in parentheses, "(39.8%)", an increase bare, "3.1%". Under
the table: how many class tokens were left out because they are outside the vocabulary
(they are scored as ``<unk>`` words and count only in Global; docs/data.md, "Vocabulary and
class vocabularies").

User-defined classes (``class_rules``) get a third table of the same shape, "User classes".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.evaluation.class_perplexity import class_perplexities
from nslm.perplexity import perplexity

# table key → (title, aggregate row, the family's classes or None for "the user classes")
TABLES: dict[str, tuple[str, str | None, tuple[str, ...] | None]] = {
    "numbers": ("Table 2: perplexities for number word classes", "Numbers", NUMBER_CLASSES),
    "places": ("Table 3: perplexities for geographic word classes", "Locations", PLACE_CLASSES),
    "user": ("User classes", None, None),
}
BASELINE = "NNLM"


def table_classes(corpus: PreparedCorpus, table: str) -> list[str]:
    """The classes of ``corpus`` that belong in ``table``, in the corpus's order."""
    members = TABLES[table][2]
    builtin = (*NUMBER_CLASSES, *PLACE_CLASSES)
    names = corpus.class_names[1:]
    if members is None:
        return [n for n in names if n not in builtin]
    return [n for n in names if n in members]


def tables_for(corpus: PreparedCorpus) -> list[str]:
    """Which tables this corpus has: numbers, places and/or user."""
    return [t for t in TABLES if table_classes(corpus, t)]


def pct_change(value: float, baseline: float) -> float:
    """(value − baseline) / baseline in percent (negative = perplexity reduced)."""
    if not (math.isfinite(value) and math.isfinite(baseline)) or baseline == 0:
        return math.nan
    return 100.0 * (value - baseline) / baseline


def build_table(
    table: str,
    columns: dict[str, np.ndarray],
    split: Split,
    corpus: PreparedCorpus,
    selected: dict[str, dict[str, str]],
) -> dict[str, Any]:
    """One table as JSON-ready data.

    ``columns`` maps a model name (NNLM, HNLM, NSLM, NSLM-pure, …) to its per-position
    log-probabilities on ``split``; ``selected[class]`` holds the micro-model's ``metric``,
    ``pdf`` and ``context`` (a class without one shows "neural").
    """
    title, aggregate, _ = TABLES[table]
    classes = table_classes(corpus, table)
    per_model = {m: class_perplexities(lp, split, corpus) for m, lp in columns.items()}
    rows: dict[str, dict[str, float]] = {}
    tokens: dict[str, int] = {}
    agg_rows = ([aggregate] if aggregate else []) + ["Global"]
    for row in [*classes, *agg_rows]:
        rows[row] = {m: float(res[row]["ppl"]) for m, res in per_model.items()}
        tokens[row] = int(next(iter(per_model.values()))[row]["tokens"])
    if aggregate is None:
        # user classes: their aggregate is every position of these classes together
        ids = [corpus.class_names.index(c) for c in classes]
        mask = np.isin(split.class_ids, ids)
        rows["User"] = {m: perplexity(lp[mask]) for m, lp in columns.items()}
        tokens["User"] = int((mask & ~np.isnan(next(iter(columns.values())))).sum())
        agg_rows = ["User", "Global"]
    change = {
        row: {m: pct_change(v, rows[row][BASELINE]) for m, v in rows[row].items() if m != BASELINE}
        for row in agg_rows
        if BASELINE in rows[row]
    }
    class_ids = [corpus.class_names.index(c) for c in classes]
    oov = split.oov_class_mask & np.isin(split.rule_class_ids, class_ids)
    oov_by_class = {
        c: int((split.oov_class_mask & (split.rule_class_ids == i)).sum())
        for c, i in zip(classes, class_ids, strict=True)
    }
    return {
        "title": title,
        "split": split.name,
        "models": list(columns),
        "classes": {c: selected.get(c, {"metric": "neural", "pdf": "neural"}) for c in classes},
        "aggregates": agg_rows,
        "rows": rows,
        "tokens": tokens,
        "change": change,
        "oov_class_tokens": int(oov.sum()),
        "oov_by_class": oov_by_class,
    }


def fmt_ppl(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:,.1f}"


def fmt_change(x: float) -> str:
    """The paper's style: a reduction in parentheses, an increase bare."""
    if not math.isfinite(x):
        return ""
    return f"({abs(x):.1f}%)" if x < 0 else f"{x:.1f}%"


LEGEND = (
    "Perplexity per class: lower is better. % change is against the NNLM: (12.3%) is a "
    "reduction, a bare 4.5% an increase.\n"
    "NNLM: flat softmax (paper Eq. 2). HNLM: class tag × neural within-class softmax (Eq. 3). "
    "NSLM-pure: P(class | h) × the class's micro-model (Eq. 4). NSLM: the reported ensemble "
    "λ·NNLM + (1 − λ)·NSLM-pure. Metric/PDF: the micro-model selected on validation."
)


def render_table(data: dict[str, Any], note: str = "") -> str:
    """The table as plain text (monospace), ready to print."""
    models = data["models"]
    head = ["Class", "Metric", "PDF", *models]
    lines: list[list[str]] = []
    for cls, sel in data["classes"].items():
        row = data["rows"][cls]
        lines.append([f"<{cls}>", sel["metric"], sel["pdf"], *(fmt_ppl(row[m]) for m in models)])
    for agg in data["aggregates"]:
        row = data["rows"][agg]
        lines.append([agg, "", "", *(fmt_ppl(row[m]) for m in models)])
        change = data["change"].get(agg, {})
        lines.append(["  % change", "", "", *(fmt_change(change.get(m, math.nan)) for m in models)])
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]

    def fmt(r: list[str]) -> str:
        left = [r[i].ljust(widths[i]) for i in range(3)]
        return "  ".join(left + [r[i].rjust(widths[i]) for i in range(3, len(r))])

    rule = "-" * len(fmt(head))
    out = [f"{data['title']} ({data['split']})", rule, fmt(head), rule]
    out += [fmt(r) for r in lines] + [rule]
    tok = data["tokens"]
    agg = data["aggregates"][0]
    oov = data["oov_class_tokens"]
    out.append(
        f"{tok[agg]:,} {agg.lower()} tokens scored; {oov:,} out-of-vocabulary class "
        f"{'token' if oov == 1 else 'tokens'} left out (scored as <unk> words, in Global only)."
    )
    if note:
        out.append(note)
    return "\n".join(out)
