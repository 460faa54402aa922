"""The probes' figures: weight bars, a neuron's histogram by label, a sentence coloured by a
neuron (HTML), and the emergence of the probes over training.

Carvalho's figures: the sentiment probe's weights with one standing out, the histogram of
that neuron on SST train coloured by label; per POS tag the weights, the histogram of the top
neuron for the tag's bytes ("match") against the rest, and a text whose bytes are coloured by
tanh of the neuron's cell state (-1 red, +1 blue) with the tag of each byte under it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nslm.byte_lm.colour import characters, rgb


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path | str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    _pyplot().close(fig)
    return path


def weight_bars(weights: np.ndarray, path: Path | str, title: str) -> Path:
    """One bar per neuron; the largest |weight| is marked and named."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2), dpi=120)
    top = int(np.argmax(np.abs(weights)))
    ax.bar(np.arange(len(weights)), weights, width=1.0, color="tab:gray")
    ax.bar([top], [weights[top]], width=max(1.0, len(weights) / 150), color="tab:red")
    ax.annotate(
        f"neuron {top}",
        (top, weights[top]),
        textcoords="offset points",
        xytext=(6, 0),
        color="tab:red",
        fontsize=8,
    )
    ax.axhline(0, color="black", linewidth=0.5)
    ax.set_xlim(-1, len(weights))
    ax.set_xlabel("neuron (cell-state dimension)")
    ax.set_ylabel("weight (standardised)")
    ax.set_title(title, fontsize=10)
    return _save(fig, path)


def label_histogram(
    values: np.ndarray,
    match: np.ndarray,
    path: Path | str,
    title: str,
    names: tuple[str, str] = ("negative", "positive"),
    threshold: float | None = None,
) -> Path:
    """The histogram of one neuron's values, split by a boolean label (``names``: False, True)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    # the central 99%: a few outliers must not squeeze the two distributions into one bar
    lo, hi = np.quantile(values, [0.005, 0.995])
    edges = np.linspace(lo, hi, 61) if hi > lo else np.histogram_bin_edges(values, bins=60)
    ax.hist(values[~match], bins=edges, alpha=0.6, color="tab:red", label=names[0], density=True)
    ax.hist(values[match], bins=edges, alpha=0.6, color="tab:blue", label=names[1], density=True)
    if threshold is not None:
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1, label="threshold")
    ax.set_xlabel("cell state")
    ax.set_ylabel("density")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, path)


def sentence_html(
    texts: Sequence[bytes],
    states: Sequence[np.ndarray],
    tags: Sequence[Sequence[str]],
    neuron: int,
    tag: str,
    path: Path | str,
    title: str = "",
) -> Path:
    """An HTML page: each character coloured by tanh of ``neuron`` after its last byte, the
    tag of its bytes under it (``tag`` in yellow)."""
    rows = []
    for data, cells, row_tags in zip(texts, states, tags, strict=True):
        cells_html = []
        for char, last in characters(data):
            shown = "&nbsp;" if char == " " else html.escape(char)
            t = row_tags[last]  # a character's bytes share their word's tag
            mark = ' style="background:#ff0"' if t == tag else ""
            value = float(cells[last, neuron])
            r, g, b = rgb(np.tanh(value))
            cells_html.append(
                f'<span class="c"><span class="b" style="background:rgb({r},{g},{b})"'
                f' title="{value:.3f}">{shown}</span>'
                f'<span class="t"{mark}>{html.escape(t)}</span></span>'
            )
        rows.append(f'<div class="s">{"".join(cells_html)}</div>')
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; }}
.s {{ margin-bottom: 1.5em; line-height: 1; }}
.c {{ display: inline-flex; flex-direction: column; align-items: center; margin: 0 0 4px 0; }}
.b {{ font-family: monospace; font-size: 18px; padding: 2px 1px; min-width: 0.6em; }}
.t {{ font-size: 8px; color: #333; writing-mode: vertical-rl; height: 4em; }}
</style></head><body>
<h3>{html.escape(title)}</h3>
<p>Each character is coloured by tanh of neuron {neuron}'s cell state after it
(+1 red, 0 white, -1 blue, as everywhere in nslm; hover for the value); under it the tag
of its bytes, <span style="background:#ff0">{html.escape(tag)}</span> in yellow.</p>
{"".join(rows)}
</body></html>
"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def emergence_plot(points: Sequence[dict], path: Path | str, title: str = "") -> Path:
    """Probe accuracies (left axis) and valid bits/byte (right axis) against bytes trained."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=120)
    x = np.array([p["bytes"] for p in points], dtype=float)
    for key, label in [
        ("sst_all_acc", "SST-2, all neurons"),
        ("sst_one_neuron_acc", "SST-2, one neuron"),
        ("pos_grouped_all_acc", "POS grouped, all neurons"),
    ]:
        ax.plot(x, [p.get(key) for p in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("bytes trained")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    bpb = [p.get("valid_bpb") for p in points]
    if any(b is not None for b in bpb):
        right = ax.twinx()
        right.plot(
            x,
            [np.nan if b is None else b for b in bpb],
            color="black",
            linestyle="--",
            marker="s",
            label="valid bits/byte",
        )
        right.set_ylabel("valid bits/byte")
        right.legend(loc="upper right", fontsize=8)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title(title, fontsize=10)
    return _save(fig, path)
