"""Generate text from a trained neural LM run (LSTM, fixed-window, … any backbone).

The backbone is run one token at a time with its carried state (the TBPTT state the
training loop carries), so each step costs one forward step, and the next-token
distribution is the chosen head's exact, normalised ``log_dist``.
"""

from __future__ import annotations

from typing import Any

import torch

from nslm.generation.sampling import Sampler


def generate_neural(
    model: Any,
    prompt_ids: list[int],
    max_tokens: int,
    sampler: Sampler,
    *,
    head: str = "nnlm",
    eos_id: int,
) -> list[int]:
    """Continue ``prompt_ids`` by up to ``max_tokens`` sampled ids (the generated ids only).

    An empty prompt starts after an ``<eos>``, i.e. at the start of a line.
    """
    return generate_many(model, prompt_ids, 1, max_tokens, sampler, head=head, eos_id=eos_id)[0]


@torch.no_grad()
def generate_many(
    model: Any,
    prompt_ids: list[int],
    n: int,
    max_tokens: int,
    sampler: Sampler,
    *,
    head: str = "nnlm",
    eos_id: int,
) -> list[list[int]]:
    """``n`` continuations of ``prompt_ids`` sampled side by side: one batch of n rows, so
    each step is one matrix product for all of them (hundreds of samples on 2 cores). Row r's
    draw of each step comes before row r + 1's, from the one seeded ``sampler``."""
    if head not in model.heads:
        raise ValueError(f"this model has no {head!r} head (it has {', '.join(model.heads)})")
    was_training = model.training
    model.eval()
    try:
        history = list(prompt_ids) or [eos_id]
        x = torch.as_tensor(history, dtype=torch.long).unsqueeze(1).expand(-1, n)  # (T, n)
        h, state = model.features(x, None)
        out: list[list[int]] = [[] for _ in range(n)]
        for _ in range(max_tokens):
            log_probs = model.heads[head].log_dist(h[-1].float()).double().numpy()
            tokens = [sampler.sample(row, log_space=True) for row in log_probs]
            for row, token in zip(out, tokens, strict=True):
                row.append(token)
            h, state = model.features(torch.tensor([tokens], dtype=torch.long), state)
    finally:
        model.train(was_training)
    return out
