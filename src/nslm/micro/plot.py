"""Draw a fitted PDF over the histogram of its training metric values (paper Figure 2).

Figure 2 is the ``<year>`` class with metric ``diff``: the difference between a year and the
previous year in the article, sharply peaked at +1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nslm.data.corpus import Split
from nslm.micro.model import MicroModel, normalised_log_pdf


def plot_range(values: np.ndarray, coverage: float = 0.95) -> tuple[float, float]:
    """The central ``coverage`` of the values, so a few 900-year jumps don't flatten the peak."""
    lo, hi = np.quantile(values, [(1 - coverage) / 2, (1 + coverage) / 2])
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    pad = 0.05 * (hi - lo)
    return float(lo - pad), float(hi + pad)


def plot_model(model: MicroModel, train: Split, path: Path | str, coverage: float = 0.95) -> Path:
    """Write a PNG of ``model``'s PDF over its training histogram; return the path."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    values = np.asarray(model.target_metric(train), dtype=float)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    title = f"<{model.cls.name}>: {model.metric.name} + {model.pdf.name} ({model.context} context)"
    if model.pdf.name == "unigram":
        # pdf(m) = m + α is a weight, not a density over m: show P(w) for the top types
        counts = model.cls.candidates.counts
        top = np.argsort(-counts, kind="stable")[:25]
        probs = np.exp(normalised_log_pdf(model.pdf, counts[None, :]))[0]
        x = np.arange(len(top))
        ax.bar(x - 0.2, counts[top] / counts.sum(), width=0.4, label="training share", color="0.7")
        ax.bar(x + 0.2, probs[top], width=0.4, label="fitted", color="tab:red")
        labels = [model.cls.candidates.strings[i] for i in top]
        ax.set_xticks(x, labels, rotation=90, fontsize=7)
        ax.set_ylabel("probability")
    elif model.pdf.name == "binary":
        observed = [np.mean(values < 0.5), np.mean(values >= 0.5)]
        p = float(model.pdf.fitted["p"])
        ax.bar([-0.2, 0.8], observed, width=0.4, label="training targets", color="0.7")
        ax.bar([0.2, 1.2], [1 - p, p], width=0.4, label="fitted", color="tab:red")
        ax.set_xticks([0, 1], ["incorrect (0)", "correct (1)"])
        ax.set_ylabel("probability")
    else:
        lo, hi = plot_range(values, coverage)
        shown = values[(values >= lo) & (values <= hi)]
        if np.allclose(shown, np.round(shown)):  # integer metrics: bins on the integers
            width = max(1, int(np.ceil((hi - lo) / 250)))
            edges = np.arange(np.floor(lo) - 0.5, np.ceil(hi) + width + 0.5, width)
        else:
            edges = 60
        # Density over the *shown* range: the share of values inside it scales the curve too.
        share = shown.size / max(values.size, 1)
        ax.hist(shown, bins=edges, density=True, color="0.7", label="training targets")
        x = np.linspace(lo, hi, 2000)
        ax.plot(x, np.exp(model.pdf.log_density(x)) / share, color="tab:red", label="fitted")
        ax.set_xlim(lo, hi)
        ax.set_xlabel(f"{model.metric.name}(w_t, w_prev)")
        ax.set_ylabel("density")
        ax.text(
            0.99,
            0.97,
            f"{coverage:.0%} of {values.size:,} training pairs shown",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
    ax.set_title(title)
    ax.legend(loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
