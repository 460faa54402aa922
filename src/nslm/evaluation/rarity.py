"""Perplexity by how rare the target is in training (the paper's Figure 3).

``nslm eval RUN --by-rarity`` records every column of each table on the reported split
(:class:`RarityRecorder`, the last column source) and reports, per table, the perplexity of
each model over the table's class tokens whose type occurs 1–2, 3–9, 10–99 or ≥ 100 times
in the train split: printed, in ``RUN/rarity_<split>.json`` and as a bar chart,
``RUN/rarity_<split>.png`` (one panel per table; the paper's Figure 3 is the places panel).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.evaluation.class_perplexity import AGGREGATES
from nslm.evaluation.columns import ColumnSource
from nslm.evaluation.tables import fmt_ppl, table_classes
from nslm.files.atomic import write_bytes_atomic
from nslm.perplexity import perplexity

# Training-count buckets: (label, lowest count, highest count or None for no bound)
BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1-2", 1, 2),
    ("3-9", 3, 9),
    ("10-99", 10, 99),
    (">=100", 100, None),
)


def rarity_table(
    log_probs: dict[str, np.ndarray],
    split: Split,
    corpus: PreparedCorpus,
    family: str = "Locations",
    classes: Sequence[str] | None = None,
) -> dict[str, dict[str, dict[str, float | int]]]:
    """``{bucket: {model: {"ppl", "tokens"}}}`` over the class positions of ``family``.

    ``family`` is ``Numbers``, ``Locations`` or ``all`` (every class token); ``classes``, if
    given, names the classes instead. A position falls in the bucket of its target type's
    training count.
    """
    if classes is not None:
        in_family = np.isin(split.class_ids, [corpus.class_names.index(c) for c in classes])
    elif family == "all":
        in_family = split.class_ids > 0
    else:
        ids = [corpus.class_names.index(c) for c in AGGREGATES[family] if c in corpus.class_names]
        in_family = np.isin(split.class_ids, ids)
    counts = corpus.vocab.counts[split.token_ids]
    table: dict[str, dict[str, dict[str, float | int]]] = {}
    for label, low, high in BUCKETS:
        in_bucket = in_family & (counts >= low)
        if high is not None:
            in_bucket &= counts <= high
        table[label] = {}
        for model, lp in log_probs.items():
            picked = lp[in_bucket & ~np.isnan(lp)]
            table[label][model] = {"ppl": perplexity(picked), "tokens": int(picked.size)}
    return table


def plot_rarity(table: dict, path: Path, title: str) -> None:
    """Grouped bars, one group per bucket, one bar per model, perplexity on a log axis."""
    plot_rarity_panels({title: table}, path)


def plot_rarity_panels(tables: dict[str, dict], path: Path, title: str = "") -> None:
    """One panel per table (the paper's Figure 3 has the places one), written as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(tables)
    models = list(next(iter(next(iter(tables.values())).values())))
    width = max(7.0, 0.8 * len(models) + 4)  # one panel a row: nine models' bars stay legible
    fig, axes = plt.subplots(n, 1, figsize=(width, 4.2 * n), squeeze=False)
    for ax, (name, table) in zip(axes[:, 0], tables.items(), strict=True):
        _bars(ax, table, name)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    write_bytes_atomic(path, buffer.getvalue())


def _bars(ax, table: dict, title: str) -> None:
    buckets = list(table)
    models = list(next(iter(table.values())))
    width = 0.8 / max(len(models), 1)
    for k, model in enumerate(models):
        heights = [_finite(table[b][model]["ppl"]) for b in buckets]
        xs = np.arange(len(buckets)) + (k - (len(models) - 1) / 2) * width
        ax.bar(xs, heights, width=width, label=model)
    ax.set_xticks(np.arange(len(buckets)), [f"{b}\n(n={_tokens(table, b)})" for b in buckets])
    ax.set_yscale("log")
    ax.set_xlabel("training count of the target token")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title(title)
    ax.legend(fontsize="small", ncol=2)


def _finite(x: Any) -> float:
    return float(x) if x is not None and np.isfinite(x) else np.nan


def _tokens(table: dict, bucket: str) -> int:
    return int(next(iter(table[bucket].values()))["tokens"])


def render_rarity(table: dict, title: str) -> str:
    """The table as text: one row per bucket, one column per model."""
    models = list(next(iter(table.values())))
    head = ["train count", "tokens", *models]
    rows = [
        [b, f"{_tokens(table, b):,}", *(fmt_ppl(_finite(table[b][m]["ppl"])) for m in models)]
        for b in table
    ]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def fmt(r: list[str]) -> str:
        cells = [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        return "  ".join([r[0].ljust(widths[0]), *cells])

    rule = "-" * len(fmt(head))
    return "\n".join([title, rule, fmt(head), rule, *(fmt(r) for r in rows), rule])


class RarityRecorder(ColumnSource):
    """The last :class:`~nslm.evaluation.columns.ColumnSource`: it adds nothing and keeps
    every column of each table on the reported split, so the rarity tables cover all
    models, extras included."""

    def __init__(self) -> None:
        self.columns: dict[str, dict[str, dict[str, np.ndarray]]] = {}  # split → table → cols
        self.splits: dict[str, Split] = {}

    def fit(
        self, table: str, valid: Split, columns: dict[str, np.ndarray], mask: np.ndarray | None
    ) -> dict:
        return {}  # nothing to tune, and the tables report the scored split only

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict:
        self.columns.setdefault(name, {})[table] = dict(columns)
        self.splits[name] = split
        return {}

    def tables(self, name: str, corpus: PreparedCorpus) -> dict[str, Any]:
        """``{table: rarity_table}`` for one reported split."""
        split = self.splits.get(name)
        return {
            table: rarity_table(cols, split, corpus, classes=table_classes(corpus, table))
            for table, cols in self.columns.get(name, {}).items()
        }
