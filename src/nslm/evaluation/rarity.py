"""Perplexity by how rare the target is in training (the paper's Figure 3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.evaluation.perplexity import AGGREGATES, perplexity

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
) -> dict[str, dict[str, dict[str, float | int]]]:
    """``{bucket: {model: {"ppl", "tokens"}}}`` over the class positions of ``family``.

    ``family`` is ``Numbers``, ``Locations`` or ``all`` (every class token). A position
    falls in the bucket of its target type's training count.
    """
    if family == "all":
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = list(table)
    models = list(next(iter(table.values())))
    width = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(7, 4))
    for k, model in enumerate(models):
        heights = [table[b][model]["ppl"] for b in buckets]
        xs = np.arange(len(buckets)) + (k - (len(models) - 1) / 2) * width
        ax.bar(xs, heights, width=width, label=model)
    ax.set_xticks(np.arange(len(buckets)), [f"{b}\n(n={_tokens(table, b)})" for b in buckets])
    ax.set_yscale("log")
    ax.set_xlabel("training count of the target token")
    ax.set_ylabel("perplexity (log scale)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _tokens(table: dict, bucket: str) -> int:
    return int(next(iter(table[bucket].values()))["tokens"])
