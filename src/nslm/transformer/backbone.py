"""The frozen Transformer as a scorer: token ids in, per-token log-probabilities and hidden
states out, in overlapping windows so every token is read with a long context.

A text's tokens x_0 … x_{N-1} are read after the checkpoint's document-start token, so
every token is scored, the first one included. Windows of ``window`` tokens advance by
``stride``; a token is scored in the window that gives it the most context (at least
``window − stride`` tokens once the first window is past). Position i of every array
belongs to token x_i: ``log_probs[i]`` = log P_T(x_i | x_<i) and ``hidden[i]`` is the final
hidden state that predicted it (after reading x_{i−1}). ``set_log_probs`` are the log
masses of given token sets at each position (what the micro-model mixture needs of the
full next-token distribution: :mod:`nslm.transformer.candidates`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nslm.transformer.checkpoint import Checkpoint


@dataclass
class TokenScores:
    """The Transformer's pass over one text (see the module docstring)."""

    log_probs: np.ndarray  # (N,) float64
    hidden: np.ndarray  # (N, D) float16
    set_log_probs: np.ndarray  # (N, S) float32: log P_T(token ∈ set s | x_<i)
    seconds: float  # wall time of the pass

    def __len__(self) -> int:
        return len(self.log_probs)


def build_model(checkpoint: Checkpoint) -> Any:
    """``transformers``' LlamaForCausalLM with the checkpoint's weights: float32, eval, frozen."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**checkpoint.config)
    model = LlamaForCausalLM(config)
    missing, unexpected = model.load_state_dict(checkpoint.state_dict, strict=False)
    allowed = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - allowed or unexpected:
        from nslm.errors import NslmError

        raise NslmError(
            f"{checkpoint.source}: weights do not fit a llama model "
            f"(missing {sorted(set(missing) - allowed)[:3]}, unexpected {sorted(unexpected)[:3]})"
        )
    if config.tie_word_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    model.float().eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def windows(n: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """(start, first scored, end) over the padded sequence [start token] + x: window j reads
    z[start:start+window] and scores targets x[first:end] (target k is predicted at z[k])."""
    if window < 2 or not 0 < stride <= window - 1:
        raise ValueError(f"need window ≥ 2 and 0 < stride < window, got {window}, {stride}")
    out, start, scored = [], 0, 0
    while scored < n:
        end = min(start + window - 1, n)
        out.append((start, scored, end))
        scored = end
        start += stride
        start = min(start, max(scored - (window - 1 - stride), 0))
    return out


def score_ids(
    model: Any,
    ids: Sequence[int],
    start_id: int,
    *,
    window: int = 1024,
    stride: int = 896,
    batch: int = 4,
    token_sets: Sequence[np.ndarray] = (),
    device: str = "cpu",
    progress: bool = False,
    description: str = "Transformer",
) -> TokenScores:
    """Score ``ids`` (see the module docstring); ``token_sets``: vocabulary masks (bool, V)."""
    import torch

    t0 = time.perf_counter()
    ids = np.asarray(ids, dtype=np.int64)
    n = len(ids)
    z = np.concatenate([[start_id], ids])
    width = model.config.hidden_size
    log_probs = np.zeros(n, dtype=np.float64)
    hidden = np.zeros((n, width), dtype=np.float16)
    sets = np.zeros((n, len(token_sets)), dtype=np.float32)
    masks = (
        torch.as_tensor(np.stack([np.asarray(m, dtype=bool) for m in token_sets]), device=device)
        if len(token_sets)
        else None
    )
    plan = windows(n, window, stride) if n else []
    model = model.to(device)
    with _progress(progress, description, n) as bar, torch.inference_mode():
        for b in range(0, len(plan), batch):
            group = plan[b : b + batch]
            length = max(first_end - start + 1 for start, _, first_end in group)
            inp = np.zeros((len(group), length), dtype=np.int64)
            attn = np.zeros((len(group), length), dtype=np.int64)
            for row, (start, _, end) in enumerate(group):
                piece = z[start : end + 1]
                inp[row, : len(piece)] = piece
                attn[row, : len(piece)] = 1
            out = model.model(
                input_ids=torch.as_tensor(inp, device=device),
                attention_mask=torch.as_tensor(attn, device=device),
            )
            states = out.last_hidden_state
            for row, (start, first, end) in enumerate(group):
                rows = slice(first - start, end - start)  # z[k] predicts x[k]
                h = states[row, rows]
                logits = model.lm_head(h).float()
                lsm = logits.log_softmax(-1)
                target = torch.as_tensor(ids[first:end], device=device)
                log_probs[first:end] = lsm.gather(1, target[:, None])[:, 0].double().cpu().numpy()
                hidden[first:end] = h.to(torch.float16).cpu().numpy()
                if masks is not None:
                    masked = lsm[:, None, :].masked_fill(~masks[None], float("-inf"))
                    sets[first:end] = torch.logsumexp(masked, -1).cpu().numpy()
                bar(end - first)
    return TokenScores(log_probs, hidden, sets, time.perf_counter() - t0)


def score_after(
    model: Any,
    context: Sequence[int],
    continuations: Sequence[Sequence[int]],
    start_id: int,
    *,
    token_sets: Sequence[np.ndarray] = (),
) -> tuple[list[TokenScores], Any]:
    """:func:`score_ids` of ``context + c`` for each continuation ``c`` (all within one
    window), reading the context once: its keys and values are kept and the continuations
    read their own tokens after them, side by side in one batch (right-padded: a causal
    model's real positions never see the padding). The arrays equal those of one window
    over the whole text (to float32 rounding). Also returns the keys and values of the
    start token and the context but its last token (None for an empty context): a
    :class:`nslm.transformer.generate.MixtureStepper` given them reads that token alone."""
    import copy

    import torch

    t0 = time.perf_counter()
    masks = (
        torch.as_tensor(np.stack([np.asarray(m, dtype=bool) for m in token_sets]))
        if len(token_sets)
        else None
    )

    def scored(states, targets):
        lsm = model.lm_head(states).float().log_softmax(-1)
        target = torch.as_tensor(np.asarray(targets, dtype=np.int64))
        log_probs = lsm.gather(1, target[:, None])[:, 0].double().numpy()
        sets = np.zeros((len(targets), len(token_sets)), dtype=np.float32)
        if masks is not None:
            masked = lsm[:, None, :].masked_fill(~masks[None], float("-inf"))
            sets = torch.logsumexp(masked, -1).numpy()
        return log_probs, states.to(torch.float16).numpy(), sets

    with torch.inference_mode():
        z = torch.as_tensor([[start_id, *context]], dtype=torch.long)
        kept = None
        if len(context):  # the context but its last token, then that token
            head = model.model(input_ids=z[:, :-1], use_cache=True)
            kept = copy.deepcopy(head.cache)
            out = model.model(input_ids=z[:, -1:], cache=head.cache, use_cache=True)
            states = torch.cat([head.last_hidden_state[0], out.last_hidden_state[0]])
        else:
            out = model.model(input_ids=z, use_cache=True)
            states = out.last_hidden_state[0]
        # row k of states predicts context[k]; the last, what follows the context
        shared = scored(states[:-1], context)
        # each continuation's rows: the context's last state, then its own tokens but the last
        longest = max((len(c) for c in continuations), default=0)
        later = None
        if longest > 1:
            steps = np.zeros((len(continuations), longest - 1), dtype=np.int64)
            for row, c in enumerate(continuations):
                if len(c) > 1:
                    steps[row, : len(c) - 1] = list(c[:-1])
            cache = out.cache
            cache.batch_repeat_interleave(len(continuations))
            later = model.model(input_ids=torch.as_tensor(steps), cache=cache, use_cache=True)
        results = []
        for row, c in enumerate(continuations):
            parts = [shared]
            if len(c):
                rows = [states[-1:]]
                if len(c) > 1:
                    rows.append(later.last_hidden_state[row, : len(c) - 1])
                parts.append(scored(torch.cat(rows), c))
            results.append(
                TokenScores(
                    np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]),
                    np.concatenate([p[2] for p in parts]),
                    time.perf_counter() - t0,
                )
            )
    return results, kept


class _progress:
    """A rich progress bar over tokens (a no-op when disabled)."""

    def __init__(self, enabled: bool, description: str, total: int) -> None:
        self.enabled, self.description, self.total = enabled, description, total

    def __enter__(self):
        if not self.enabled:
            return lambda k: None
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(
            TextColumn(self.description),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("tokens"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        self._bar.start()
        task = self._bar.add_task(self.description, total=self.total)
        return lambda k: self._bar.advance(task, k)

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._bar.stop()


def full_log_probs(model: Any, ids: Sequence[int], start_id: int) -> np.ndarray:
    """log P_T(· | x_<i) over the whole vocabulary after each prefix of ``ids`` (a short
    text: one window), (N + 1, V): row i is the distribution of x_i, row N the next token's."""
    import torch

    z = torch.as_tensor([[start_id, *ids]], dtype=torch.long)
    with torch.inference_mode():
        logits = model(input_ids=z).logits[0].float()
    return logits.log_softmax(-1).double().numpy()


def last_hidden(model: Any, ids: Sequence[int], start_id: int) -> np.ndarray:
    """The hidden state that predicts the token after ``ids`` (D,), float32."""
    import torch

    z = torch.as_tensor([[start_id, *ids]], dtype=torch.long)
    with torch.inference_mode():
        states = model.model(input_ids=z).last_hidden_state[0, -1]
    return states.float().numpy()
