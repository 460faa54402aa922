"""The byte LM's cell states for probes: one vector per text, or one per byte.

Carvalho's probes (docs/byte-lm.md) read the LSTM's cell state c: after a text's last byte
for sentiment (Radford et al. 2017's sentiment neuron), at every byte for part of speech.
Texts go through the LSTM in batches, as they must on 2 cores, and batching must not change
what a text reads: texts are sorted by length and padded on the right, and each text's state
is read at its own last byte. The LSTM is causal, so bytes after a text's end (padding)
never reach the states read for it; left padding would, since the state would start after
the pad bytes. Every text starts from the zero state. Per-step cell states come from
:func:`nslm.models.lstm.lstm_state_chunks` (one fused pass, exact up to float rounding).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from nslm.models.lstm import lstm_state_chunks
from nslm.runs.load import LoadedRun, require_byte_lm


def text_bytes(text: str | bytes) -> bytes:
    """The bytes a byte LM reads: a str's UTF-8 encoding; bytes unchanged (any encoding)."""
    return text.encode("utf-8") if isinstance(text, str) else bytes(text)


def _sorted_batches(lengths: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    """Text indices in batches of similar length (longest first), so padding stays small."""
    order = np.argsort(-lengths, kind="stable")
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _padded(texts: list[bytes], index: np.ndarray) -> torch.Tensor:
    """(T, B) int64 byte ids of the texts at ``index``, padded on the right with 0."""
    width = max(1, max(len(texts[i]) for i in index))
    grid = np.zeros((width, len(index)), dtype=np.int64)
    for column, i in enumerate(index):
        grid[: len(texts[i]), column] = np.frombuffer(texts[i], dtype=np.uint8)
    return torch.from_numpy(grid)


def _each_batch(
    loaded: LoadedRun,
    texts: list[bytes],
    batch_size: int,
    read: Callable[[np.ndarray, np.ndarray, int, torch.Tensor, torch.Tensor], None],
    what: str,
) -> None:
    """Run every batch of ``texts`` and hand each chunk of states to ``read(index, lengths,
    t0, h, c)``; progress on stderr for long work."""
    require_byte_lm(loaded, what)
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    model = loaded.model
    backbone = model.backbone
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    total, done, last_report, start = (
        int(lengths.sum()),
        0,
        time.perf_counter(),
        time.perf_counter(),
    )
    was_training = model.training
    model.eval()
    try:
        for index in _sorted_batches(lengths, batch_size):
            x = _padded(texts, index)
            for t0, h, c in lstm_state_chunks(backbone, x):
                read(index, lengths[index], t0, h, c)
            done += int(lengths[index].sum())
            if total > 5_000_000 and time.perf_counter() - last_report > 30:
                rate = done / (time.perf_counter() - start)
                print(
                    f"{what}: {done:,} of {total:,} bytes ({rate:,.0f} bytes/s)",
                    file=sys.stderr,
                    flush=True,
                )
                last_report = time.perf_counter()
    finally:
        model.train(was_training)


def final_states(
    loaded: LoadedRun,
    texts: Sequence[str | bytes],
    *,
    last_bytes: int | None = None,
    batch_size: int = 64,
) -> dict[str, np.ndarray]:
    """For each text: "final_cell" (the cell state after its last byte), "mean_cell" and
    "mean_hidden" (means over its bytes), each (N, H) float32, and "mean_cell_hidden" (both
    means side by side, (N, 2H)). ``last_bytes``: only the
    text's last N bytes are read. Texts are sorted by length and padded on the right; each
    text's state is read at its own last byte, so padding never leaks (batched == one by one).

    An empty text keeps the zero state it starts from: zero rows.
    """
    data = [text_bytes(t) for t in texts]
    if last_bytes is not None:
        if last_bytes < 1:
            raise ValueError("last_bytes must be positive")
        data = [d[-last_bytes:] for d in data]
    n, hidden = len(data), loaded.model.backbone.out_dim
    final = np.zeros((n, hidden), dtype=np.float32)
    sum_cell = np.zeros((n, hidden), dtype=np.float64)
    sum_hidden = np.zeros((n, hidden), dtype=np.float64)

    def read(index: np.ndarray, lengths: np.ndarray, t0: int, h: torch.Tensor, c: torch.Tensor):
        steps = len(h)
        # mask (steps, B): which of the chunk's steps lie inside each text
        inside = torch.from_numpy(np.arange(t0, t0 + steps)[:, None] < lengths[None, :])
        weights = inside.unsqueeze(-1).to(h.dtype)
        sum_cell[index] += (c * weights).sum(0).double().numpy()
        sum_hidden[index] += (h * weights).sum(0).double().numpy()
        ends = lengths - 1 - t0  # each text's last byte, relative to this chunk
        here = (ends >= 0) & (ends < steps)
        if here.any():
            columns = np.flatnonzero(here)
            final[index[columns]] = c[ends[columns], columns].numpy()

    _each_batch(loaded, data, batch_size, read, "final_states")
    counts = np.maximum(np.array([len(d) for d in data], dtype=np.float64), 1.0)[:, None]
    mean_cell = (sum_cell / counts).astype(np.float32)
    mean_hidden = (sum_hidden / counts).astype(np.float32)
    return {
        "final_cell": final,
        "mean_cell": mean_cell,
        "mean_hidden": mean_hidden,
        "mean_cell_hidden": np.concatenate([mean_cell, mean_hidden], axis=1),
    }


def byte_cell_states(
    loaded: LoadedRun, texts: Sequence[str | bytes], *, batch_size: int = 64
) -> list[np.ndarray]:
    """Per-byte cell states of each text: a (len(text as UTF-8 bytes), H) float32 array each.

    Row j is the cell state after reading byte j (from the zero state at the text's start).
    """
    data = [text_bytes(t) for t in texts]
    hidden = loaded.model.backbone.out_dim
    out = [np.zeros((len(d), hidden), dtype=np.float32) for d in data]

    def read(index: np.ndarray, lengths: np.ndarray, t0: int, h: torch.Tensor, c: torch.Tensor):
        cells = c.numpy()
        for column, i in enumerate(index):
            stop = min(int(lengths[column]) - t0, len(cells))
            if stop > 0:
                out[i][t0 : t0 + stop] = cells[:stop, column]

    _each_batch(loaded, data, batch_size, read, "byte_cell_states")
    return out
