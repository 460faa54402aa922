"""Generate text from an n-gram model: sample the next word from P(· | last N−1 words)."""

from __future__ import annotations

from nslm.generation.sampling import Sampler
from nslm.ngram.model import NgramModel


def generate_ngram(
    model: NgramModel, prompt: list[str], max_tokens: int, sampler: Sampler
) -> list[str]:
    """Continue ``prompt`` (already tokenised) by up to ``max_tokens`` sampled tokens.

    Prompt words outside the vocabulary become the model's unknown word. ``</s>`` ends a
    sentence; generation goes on in a fresh sentence (history ``<s>``), as in the corpus,
    where every line is a sentence. Returns the generated tokens only.
    """
    history = [int(i) for i in model.encode(prompt)]
    out: list[str] = []
    for _ in range(max_tokens):
        probs = model.distribution(history)
        token = sampler.sample(probs)
        out.append(model.itos[token])
        history.append(token)
        if len(history) > 2 * model.order:
            # only the last N−1 words (or those since </s>) matter; keep the list short
            history = history[-model.order :]
    return out
