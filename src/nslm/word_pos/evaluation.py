"""``nslm eval`` of a word+POS run: the comparison table of docs/word-pos.md.

Rows are splits; columns the word perplexity with the gold previous tags and with the
model's own tags, the joint (word, tag) perplexity, and the model as a left-to-right tagger
beside the most-frequent-tag baseline. Figures come from one function,
:func:`nslm.word_pos.scores.split_figures`, the same that ends training (results.json).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nslm.word_pos.run import load_word_pos_run
from nslm.word_pos.scores import split_figures
from nslm.word_pos.tagged import load_tagged_corpus

COLUMNS = (
    ("word_ppl_gold_prev_tags", "word ppl, gold prev tags", "{:.2f}"),
    ("word_ppl_predicted_tags", "word ppl, own tags", "{:.2f}"),
    ("joint_ppl", "joint ppl", "{:.2f}"),
    ("tagger_acc", "tagger acc", "{:.4f}"),
    ("tagger_acc_unknown", "on unknowns", "{:.4f}"),
    ("tagger_mft_baseline_acc", "most-frequent-tag acc", "{:.4f}"),
)


def evaluate_word_pos(
    run_dir: Path, splits: tuple[str, ...] = ("valid", "test"), data_dir: Path | None = None
) -> dict[str, Any]:
    """Every figure of the run on ``splits`` of its corpus, keyed by split."""
    run = load_word_pos_run(run_dir)
    corpus = load_tagged_corpus(run.cfg.corpus, data_dir)
    encode = {name: run.vocab.encode(s.words, s.tags) for name, s in corpus.splits.items()}
    out: dict[str, Any] = {"pos_model": run.cfg.pos_model, "corpus": run.cfg.corpus}
    for split in splits:
        figures = split_figures(
            run.model,
            run.vocab,
            encode["train"],
            encode[split],
            split,
            batch_size=run.cfg.eval_batch_size,
        )
        out[split] = {k.removeprefix(f"{split}_"): v for k, v in figures.items()}
    return out


def results_by_split(results: dict[str, Any]) -> dict[str, Any]:
    """results.json's flat ``{split}_{figure}`` keys as ``evaluate_word_pos`` nests them."""
    out: dict[str, Any] = {"pos_model": results.get("pos_model"), "corpus": results.get("corpus")}
    for split in ("valid", "test"):
        prefix = f"{split}_"
        out[split] = {k.removeprefix(prefix): v for k, v in results.items() if k.startswith(prefix)}
    return out


def render_word_pos(results: dict[str, Any]) -> str:
    """The table as text (— where a figure does not apply to the model)."""
    header = ["split", *(label for _, label, _ in COLUMNS)]
    rows = [header]
    for split, figures in results.items():
        if not isinstance(figures, dict):
            continue
        cells = [split]
        for key, _, fmt in COLUMNS:
            value = figures.get(key)
            ok = value is not None and not (isinstance(value, float) and math.isnan(value))
            cells.append(fmt.format(value) if ok else "—")
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    title = f"{results.get('pos_model')} on {results.get('corpus')} (perplexity: lower is better)"
    return "\n".join([title, *lines])
