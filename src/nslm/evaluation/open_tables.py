"""Per-class figures with every token counted: the open-vocabulary tables.

The closed tables (:mod:`nslm.evaluation.class_perplexity`) count a class row over the
class's in-vocabulary tokens. Here a row counts every token the rules gave the class
(``rule_class_ids``), scored under the proper convention of :mod:`nslm.evaluation.open_vocab`
(a distribution over every string), with Ueberla's adjusted figure and the in-vocabulary one
beside it (docs/nslm.md, "Open vocabulary").
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
    proper: np.ndarray,
    adjusted: np.ndarray,
    split: Split,
    class_names: Sequence[str],
    oov: np.ndarray,
) -> dict[str, dict[str, float | int]]:
    """``{row: {ppl_proper, ppl_adjusted, ppl_in_vocab, tokens, oov_tokens}}`` of one model's
    per-position log-probabilities under each convention (the in-vocabulary figure reads
    them at the tokens in the vocabulary, ``~oov``, where the two agree)."""
    scored = ~np.isnan(proper)
    seen = ~oov
    out: dict[str, dict[str, float | int]] = {}
    for row, mask in row_masks(split, class_names).items():
        every = mask & scored
        out[row] = {
            "ppl_proper": perplexity(proper[every]),
            "ppl_adjusted": perplexity(adjusted[every]),
            "ppl_in_vocab": perplexity(proper[every & seen]),
            "tokens": int(every.sum()),
            "oov_tokens": int((every & ~seen).sum()),
        }
    return out


def render_open_table(
    columns: dict[str, dict[str, dict[str, float | int]]], rows: Sequence[str], title: str
) -> str:
    """A plain-text table: one line per row, per column ``proper / adjusted / in-vocabulary``."""
    names = list(columns)
    head = f"{'':<10} {'tokens':>7} {'OOV':>5}  " + "  ".join(f"{n:>32}" for n in names)
    legend = "(each cell: proper perplexity / Ueberla's adjusted / in-vocabulary only)"
    lines = [title, legend, head]
    for row in rows:
        first = columns[names[0]].get(row)
        if first is None:
            continue
        cells = []
        for n in names:
            r = columns[n][row]
            cells.append(
                f"{r['ppl_proper']:>10.1f} / {r['ppl_adjusted']:>9.1f} / {r['ppl_in_vocab']:>8.1f}"
            )
        lines.append(
            f"{row:<10} {first['tokens']:>7,} {first['oov_tokens']:>5,}  " + "  ".join(cells)
        )
    return "\n".join(lines)
