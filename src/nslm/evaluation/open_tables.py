"""Per-class figures with every token counted: the open-vocabulary tables.

The closed tables (:mod:`nslm.evaluation.class_perplexity`) count a class row over the
class's in-vocabulary tokens. Here a row counts every token the rules gave the class
(``rule_class_ids``), scored under the adjusted convention of
:mod:`nslm.evaluation.open_vocab`, with the in-vocabulary figure beside it, so the two
conventions can be read side by side (docs/nslm.md, "Open vocabulary").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nslm.data.corpus import Split
from nslm.evaluation.class_perplexity import AGGREGATES
from nslm.perplexity import perplexity


def row_masks(split: Split, class_names: Sequence[str]) -> dict[str, np.ndarray]:
    """Every class's tokens by rule, the aggregates (Numbers, Locations) and Global."""
    rule = split.rule_class_ids
    masks = {name: rule == cid for cid, name in enumerate(class_names) if cid}
    for row, members in AGGREGATES.items():
        ids = [class_names.index(m) for m in members if m in class_names]
        if ids:
            masks[row] = np.isin(rule, ids)
    masks["Global"] = np.ones(len(split), dtype=bool)
    return masks


def open_rows(
    log_probs: np.ndarray, split: Split, class_names: Sequence[str], oov: np.ndarray
) -> dict[str, dict[str, float | int]]:
    """``{row: {ppl_adjusted, ppl_in_vocab, tokens, oov_tokens}}`` of one model's adjusted
    per-position log-probabilities (``in_vocab`` reads the same array at the tokens in the
    vocabulary, ``~oov``: for a closed model that is today's figure)."""
    scored = ~np.isnan(log_probs)
    seen = ~oov
    out: dict[str, dict[str, float | int]] = {}
    for row, mask in row_masks(split, class_names).items():
        every = mask & scored
        out[row] = {
            "ppl_adjusted": perplexity(log_probs[every]),
            "ppl_in_vocab": perplexity(log_probs[every & seen]),
            "tokens": int(every.sum()),
            "oov_tokens": int((every & ~seen).sum()),
        }
    return out


def render_open_table(
    columns: dict[str, dict[str, dict[str, float | int]]], rows: Sequence[str], title: str
) -> str:
    """A plain-text table: one line per row, per column ``adjusted / in-vocabulary``."""
    names = list(columns)
    head = f"{'':<10} {'tokens':>7} {'OOV':>5}  " + "  ".join(f"{n:>21}" for n in names)
    lines = [title, "(each cell: adjusted perplexity / in-vocabulary perplexity)", head]
    for row in rows:
        first = columns[names[0]].get(row)
        if first is None:
            continue
        cells = []
        for n in names:
            r = columns[n][row]
            cells.append(f"{r['ppl_adjusted']:>10.1f} / {r['ppl_in_vocab']:>8.1f}")
        lines.append(
            f"{row:<10} {first['tokens']:>7,} {first['oov_tokens']:>5,}  " + "  ".join(cells)
        )
    return "\n".join(lines)
