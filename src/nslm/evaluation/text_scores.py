"""Scores of a text that do not depend on how it was tokenized, for ``nslm eval --text`` and
``--corpus``: bits per byte and word perplexity of the plain text (as lm-eval-harness reports
for WikiText), from proper scores, with the OOV-adjusted perplexity beside.

A model that maps a token outside its vocabulary to ``<unk>`` gives the whole class of unknown
words one probability. Proper scores spread it over the strings outside the vocabulary with
the spelling model (:mod:`nslm.scores.spelling`): an OOV token s scores P(``<unk>`` | h) ·
P_spell(s | s ∉ V), so each model is a distribution over every string and bits per byte
compare with any other LM's. The adjusted perplexity (Ueberla 1994, "Analysing a simple
language model: some general conclusions for language models for speech recognition") charges
each OOV token P(``<unk>`` | h) / |U| instead, U the distinct OOV types of the scored text: the
literature's convention, not a distribution, shown beside. Bits per byte: the total −log₂ P
of the text over its UTF-8 bytes; word perplexity: exp(−ln P / its whitespace words).
Positions without a history (a text's first token) are not scored by any model, and so count
in none of the figures.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nslm.data.fixed_vocab import TextSplit
from nslm.perplexity import perplexity
from nslm.scores.spelling import SpellingModel


def adjusted(log_probs: np.ndarray, text: TextSplit) -> np.ndarray:
    """``log_probs`` with each OOV position charged log |U| more (Ueberla's adjustment)."""
    out = np.asarray(log_probs, dtype=np.float64).copy()
    if text.oov_types > 1:
        out[text.oov_mask] -= math.log(text.oov_types)
    return out


def proper(log_probs: np.ndarray, text: TextSplit, spelling: SpellingModel) -> np.ndarray:
    """``log_probs`` with each OOV position charged log P_spell(s | s ∉ V)."""
    out = np.asarray(log_probs, dtype=np.float64).copy()
    where = np.flatnonzero(text.oov_mask)
    if len(where):
        out[where] += spelling.log_prob_outside([text.strings[i] for i in where])
    return out


def text_figures(
    columns: dict[str, np.ndarray], text: TextSplit, spelling: SpellingModel
) -> dict[str, Any]:
    """Per model (column): perplexity proper (the spelling model behind ``<unk>``), as
    scored and OOV-adjusted, bits per byte and word perplexity of the plain text (proper);
    with the text's token, OOV, byte and word counts."""
    models = {}
    for name, log_probs in columns.items():
        full = proper(log_probs, text, spelling)
        total = float(np.nansum(full))  # natural log of the text's probability
        models[name] = {
            "ppl_proper": perplexity(full),
            "ppl": perplexity(log_probs),
            "ppl_adjusted": perplexity(adjusted(log_probs, text)),
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
            f"{name:<12} {row['ppl_proper']:>10.2f} {row['ppl_adjusted']:>10.2f} "
            f"{row['bits_per_byte']:>10.3f} {row['word_ppl']:>10.2f}"
        )
    lines.append(
        "ppl: proper, each OOV token P(<unk>|h) · P_spell(token | outside the vocabulary); "
        "ppl adj.: P(<unk>|h)/|U| instead (Ueberla 1994, not a distribution); bits/byte and "
        "word ppl of the plain text, proper."
    )
    return "\n".join(lines)
