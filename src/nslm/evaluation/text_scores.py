"""Scores of a text that do not depend on how it was tokenized, for ``nslm eval --text`` and
``--corpus``: bits per byte and word perplexity of the plain text (as lm-eval-harness reports
for WikiText), and the OOV-adjusted perplexity.

A model that maps a token outside its vocabulary to ``<unk>`` gives the whole class of unknown
words one probability; the adjusted perplexity (Ueberla 1994, "Analysing a simple language
model: some general conclusions for language models for speech recognition") charges each OOV
token P(``<unk>`` | h) / |U|, with U the distinct OOV types of the scored text, so that a small
vocabulary cannot buy a low perplexity. Bits per byte and word perplexity are computed from
the adjusted log-probabilities too: the total −log₂ P of the text over its UTF-8 bytes, and
exp(−ln P / its whitespace words). Positions without a history (a text's first token) are
not scored by any model, and so count in none of the figures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nslm.data.fixed_vocab import TextSplit
from nslm.perplexity import perplexity


def adjusted(log_probs: np.ndarray, text: TextSplit) -> np.ndarray:
    """``log_probs`` with each OOV position charged log |U| more (Ueberla's adjustment)."""
    out = np.asarray(log_probs, dtype=np.float64).copy()
    if text.oov_types > 1:
        out[text.oov_mask] -= math.log(text.oov_types)
    return out


def text_figures(columns: dict[str, np.ndarray], text: TextSplit) -> dict[str, Any]:
    """Per model (column): perplexity as scored and OOV-adjusted, bits per byte and word
    perplexity of the plain text; with the text's token, OOV, byte and word counts."""
    models = {}
    for name, log_probs in columns.items():
        adj = adjusted(log_probs, text)
        total = float(np.nansum(adj))  # natural log of the text's probability
        models[name] = {
            "ppl": perplexity(log_probs),
            "ppl_adjusted": perplexity(adj),
            "bits_per_byte": -total / math.log(2) / max(text.plain_bytes, 1),
            "word_ppl": math.exp(min(-total / max(text.plain_words, 1), 700.0)),
        }
    return {
        "tokens": text.tokens,
        "oov_tokens": text.oov_tokens,
        "oov_rate": text.oov_tokens / max(text.tokens, 1),
        "oov_types": text.oov_types,
        "oov_class_tokens": text.oov_class_tokens,
        "bytes": text.plain_bytes,
        "words": text.plain_words,
        "models": models,
    }


def render_text_figures(figures: dict[str, Any]) -> str:
    """The figures as a small table (lower is better in every column)."""
    lines = [
        f"{figures['tokens']:,} tokens, {figures['oov_tokens']:,} outside the vocabulary "
        f"({figures['oov_rate']:.1%}, {figures['oov_types']:,} types); "
        f"{figures['bytes']:,} bytes, {figures['words']:,} words as plain text",
        f"{'model':<12} {'ppl':>10} {'ppl adj.':>10} {'bits/byte':>10} {'word ppl':>10}",
    ]
    for name, row in figures["models"].items():
        lines.append(
            f"{name:<12} {row['ppl']:>10.2f} {row['ppl_adjusted']:>10.2f} "
            f"{row['bits_per_byte']:>10.3f} {row['word_ppl']:>10.2f}"
        )
    lines.append(
        "ppl adj.: each OOV token scored P(<unk>|h)/|U| (Ueberla 1994); bits/byte and word ppl"
        " of the plain text, from the adjusted scores."
    )
    return "\n".join(lines)
