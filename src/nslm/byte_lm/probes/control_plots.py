"""Figures of benchmarks/neurons/neuron_interventions.py: top-k accuracy against the
random-unit band, selectivity bars, and samples coloured by a unit (steered beside unsteered).

Each figure is written to ``path`` and, when given, copied to ``copy`` (the run's
``probes/interventions/`` folder, which ``nslm report`` shows).
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nslm.byte_lm.colour import characters, rgb
from nslm.byte_lm.probes.plots import _pyplot, _save

PANELS = (
    ("sst2", "SST-2"),
    ("imdb", "IMDB"),
    ("pos_grouped", "POS grouped"),
    ("pos_ungrouped", "POS ungrouped"),
    ("space", "SPACE alone"),
)


def _copy(path: Path, copy: Path | None) -> Path:
    if copy is not None:
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
    return path


def random_units_plot(result: dict, path: Path, copy: Path | None = None) -> Path:
    """Per probe: accuracy on its top k units against k random units (mean ± sd band)."""
    plt = _pyplot()
    panels = [(key, name) for key, name in PANELS if key in result]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2), dpi=120)
    for ax, (key, name) in zip(np.atleast_1d(axes), panels, strict=True):
        ks = [int(k) for k in result["ks"]]
        top = [result[key][str(k)]["top"] for k in ks]
        mean = np.array([result[key][str(k)]["random"]["mean"] for k in ks])
        sd = np.array([result[key][str(k)]["random"]["sd"] for k in ks])
        ax.plot(ks, top, marker="o", color="tab:red", label="top k units")
        ax.plot(ks, mean, marker="s", color="tab:gray", label="k random units")
        ax.fill_between(ks, mean - sd, mean + sd, color="tab:gray", alpha=0.3, label="± 1 sd")
        if "test_acc_all_units" in result[key]:
            ax.axhline(
                result[key]["test_acc_all_units"],
                color="black",
                linestyle="--",
                linewidth=1,
                label="all units",
            )
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("k")
        ax.set_title(name, fontsize=10)
    np.atleast_1d(axes)[0].set_ylabel("test accuracy")
    np.atleast_1d(axes)[0].legend(fontsize=7)
    return _copy(_save(fig, path), copy)


def selectivity_plot(result: dict, path: Path, copy: Path | None = None) -> Path:
    """Accuracy and control accuracy side by side, selectivity written above each pair."""
    plt = _pyplot()
    bars = [
        (f"POS {g[4:]} {k}", result[g][k])
        for g in ("pos_grouped", "pos_ungrouped")
        if g in result
        for k in ("all", "1", "2", "3")
    ]
    if "sst2" in result:
        bars.append(("SST-2 all", result["sst2"]))
    fig, ax = plt.subplots(figsize=(1.0 * len(bars) + 2, 3.6), dpi=120)
    x = np.arange(len(bars))
    ax.bar(x - 0.2, [b["acc"] for _, b in bars], 0.4, color="tab:red", label="task")
    ax.bar(x + 0.2, [b["control_acc"] for _, b in bars], 0.4, color="tab:gray", label="control")
    for i, (_, b) in enumerate(bars):
        ax.annotate(
            f"{b['selectivity']:+.2f}",
            (i, max(b["acc"], b["control_acc"])),
            textcoords="offset points",
            xytext=(0, 3),
            ha="center",
            fontsize=7,
        )
    ax.set_xticks(x, [name.replace(" ", "\n", 2) for name, _ in bars], fontsize=7)
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1.05)
    ax.set_title("selectivity = task − control (Hewitt & Liang 2019)", fontsize=10)
    ax.legend(fontsize=7)
    return _copy(_save(fig, path), copy)


def coloured_texts_png(
    texts: Sequence[bytes],
    values: Sequence[np.ndarray],
    titles: Sequence[str],
    path: Path,
    copy: Path | None = None,
    label: str = "",
    width: int = 70,
) -> Path:
    """Texts side by side, each character on the colour of its value (+1 red, −1 blue, as
    everywhere in nslm: :mod:`nslm.byte_lm.colour`), ``width`` characters a line."""
    plt = _pyplot()
    lines = [textwrap.wrap("x" * len(characters(t)), width) or [""] for t in texts]
    rows = max(len(x) for x in lines)
    fig, axes = plt.subplots(1, len(texts), figsize=(6.5 * len(texts), 0.3 * rows + 1), dpi=120)
    for ax, data, vals, title in zip(np.atleast_1d(axes), texts, values, titles, strict=True):
        ax.set_xlim(0, width)
        ax.set_ylim(rows, -0.5)
        ax.axis("off")
        ax.set_title(title, fontsize=9)
        for i, (char, last) in enumerate(characters(data)):
            row, col = divmod(i, width)
            colour = tuple(c / 255 for c in rgb(vals[last]))
            ax.text(
                col,
                row,
                char if char.isprintable() else " ",
                family="monospace",
                fontsize=7,
                va="center",
                ha="left",
                bbox={"facecolor": colour, "edgecolor": "none", "pad": 0.6},
            )
    fig.suptitle(label, fontsize=9)
    return _copy(_save(fig, path), copy)
