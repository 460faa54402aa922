"""Generate text from a trained neural LM run (LSTM, fixed-window, … any backbone).

The backbone is run one token at a time with its carried state (the TBPTT state the
training loop carries), so each step costs one forward step, and the next-token
distribution is the chosen head's exact, normalised ``log_dist``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from nslm.generation.sampling import Sampler


@torch.no_grad()
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
    if head not in model.heads:
        raise ValueError(f"this model has no {head!r} head (it has {', '.join(model.heads)})")
    was_training = model.training
    model.eval()
    try:
        history = list(prompt_ids) or [eos_id]
        x = torch.as_tensor(history, dtype=torch.long).unsqueeze(1)  # (T, 1)
        h, state = model.features(x, None)
        out: list[int] = []
        for _ in range(max_tokens):
            log_probs = model.heads[head].log_dist(h[-1].float())[0].double().numpy()
            token = sampler.sample(np.asarray(log_probs), log_space=True)
            out.append(token)
            h, state = model.features(torch.tensor([[token]], dtype=torch.long), state)
    finally:
        model.train(was_training)
    return out
