"""Bits per byte of a scored text, overall and on each class's words, and word perplexity.

Every model is scored on the same plain text, so the figures compare across tokenizations
(the LSTM's corpus tokens, the Transformer's byte-level BPE): bits per byte = the text's
total −log₂ P over its UTF-8 bytes; word perplexity = exp(−ln P / the text's whitespace
words), as :mod:`nslm.evaluation.text_scores` gives them for ``nslm eval --text``.

A class's bits per byte: the bits of its words over their bytes. A word's bits are those of
the Transformer tokens that spell it (the space before it included) plus the "it ends here"
part of the token after it (:class:`nslm.transformer.mixture.Scored`); its bytes are the
word's own, as written. A class word whose span does not start and end on Transformer
token edges (rare: :func:`nslm.transformer.alignment.token_ranges`) is left out of its
class and counted in ``unspelt``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES
from nslm.transformer.mixture import Scored
from nslm.transformer.passes import TextPass

AGGREGATES = {"numbers": NUMBER_CLASSES, "locations": PLACE_CLASSES}


def word_bits(text_pass: TextPass, scored: Scored) -> tuple[np.ndarray, np.ndarray]:
    """Per corpus token: its bits and its bytes (NaN and 0 where it is not spelt)."""
    ranges = text_pass.ranges
    n = text_pass.tokens
    cum = np.concatenate([[0.0], np.cumsum(scored.log_probs)])
    bits = np.full(len(ranges), np.nan)
    size = np.zeros(len(ranges), dtype=np.int64)
    for k, (a, b) in enumerate(ranges):
        if a < 0:
            continue
        end = scored.end_part[b] if b < n else 0.0
        bits[k] = -(cum[b] - cum[a] + end) / math.log(2)
        start, stop = int(text_pass.offsets[a][0]), int(text_pass.offsets[b - 1][1])
        size[k] = len(text_pass.plain[start:stop].lstrip().encode("utf-8", errors="surrogatepass"))
    return bits, size


def class_figures(
    text_pass: TextPass, scored: Scored, class_names: tuple[str, ...]
) -> dict[str, Any]:
    """``bits_per_byte``, ``word_ppl``, ``bpb_numbers``, ``bpb_locations`` and per class
    (``classes``: bits per byte, words, bytes), with ``unspelt`` per class."""
    total = float(np.sum(scored.log_probs))  # natural log of the text's probability
    plain = text_pass.plain
    n_bytes = len(plain.encode("utf-8", errors="surrogatepass"))
    bits, size = word_bits(text_pass, scored)
    classes = text_pass.text.split.rule_class_ids.astype(np.int64)
    out: dict[str, Any] = {
        "bits_per_byte": -total / math.log(2) / max(n_bytes, 1),
        "word_ppl": math.exp(min(-total / max(len(plain.split()), 1), 700.0)),
        "tokens": int(text_pass.tokens),
        "bytes": n_bytes,
        "words": len(plain.split()),
    }
    per_class: dict[str, Any] = {}
    for c, name in enumerate(class_names):
        if c == 0:
            continue
        here = classes == c
        ok = here & ~np.isnan(bits)
        per_class[name] = {
            "bits_per_byte": _ratio(bits[ok].sum(), size[ok].sum()),
            "words": int(ok.sum()),
            "bytes": int(size[ok].sum()),
            "unspelt": int((here & np.isnan(bits)).sum()),
        }
    out["classes"] = per_class
    for aggregate, members in AGGREGATES.items():
        ids = [class_names.index(m) for m in members if m in class_names]
        ok = np.isin(classes, ids) & ~np.isnan(bits)
        out[f"bpb_{aggregate}"] = _ratio(bits[ok].sum(), size[ok].sum())
        out[f"{aggregate}_words"] = int(ok.sum())
    return out


def _ratio(bits: float, n_bytes: int) -> float | None:
    return float(bits / n_bytes) if n_bytes else None


def render(figures: Mapping[str, Mapping[str, Any]]) -> str:
    """A small table: one row per model (bits per byte overall, Numbers, Locations; word ppl)."""
    lines = [f"{'model':<24} {'bits/byte':>10} {'Numbers':>10} {'Locations':>10} {'word ppl':>10}"]
    for name, row in figures.items():

        def cell(value: Any) -> str:
            return f"{value:>10.4f}" if isinstance(value, float) else f"{'—':>10}"

        lines.append(
            f"{name:<24} {cell(row.get('bits_per_byte'))} {cell(row.get('bpb_numbers'))} "
            f"{cell(row.get('bpb_locations'))} {row.get('word_ppl', float('nan')):>10.2f}"
        )
    return "\n".join(lines)
