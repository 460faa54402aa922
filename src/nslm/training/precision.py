"""Which floating-point precision a training run actually uses.

A config's ``bf16 = true`` asks for bfloat16 autocast. On a CPU, PyTorch runs the LSTM under
autocast through oneDNN, which has a bfloat16 LSTM only where the processor has the
instructions for it (AVX-512 BF16, AMX, or AVX-512 with its emulation); elsewhere the first
forward pass fails with "could not create a primitive descriptor". So the request is checked
once per process against the very operations a step runs (an embedding, an LSTM and a
linear layer, forward and backward), and a machine that cannot run them trains in float32
with one line on stderr. The run's ``results.json`` records the precision it used.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator

import torch

BFLOAT16 = "bfloat16"
FLOAT32 = "float32"


@functools.cache
def bf16_runs_on(device_type: str) -> bool:
    """Whether bfloat16 autocast runs a step of an LSTM LM on this kind of device."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device_type != "cpu":
        return False
    gen = torch.Generator().manual_seed(0)
    embed = torch.nn.Embedding(5, 8)
    lstm = torch.nn.LSTM(8, 8, num_layers=2, batch_first=True)
    out = torch.nn.Linear(8, 5)
    x = torch.randint(0, 5, (2, 3), generator=gen)
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h, _ = lstm(embed(x))
            loss = out(h).float().logsumexp(-1).mean()
        loss.backward()
    except RuntimeError:  # oneDNN has no bfloat16 primitive for this processor
        return False
    return bool(torch.isfinite(loss))


def training_precision(bf16: bool, device: torch.device, *, announce: bool = True) -> str:
    """The precision a run that asks for ``bf16`` trains in on ``device``: "bfloat16" where
    it runs there, else "float32" (with one notice on stderr when ``announce``)."""
    if not bf16:
        return FLOAT32
    if bf16_runs_on(device.type):
        return BFLOAT16
    if announce:
        print(
            f"note: this {device.type.upper()} has no bfloat16 support for the LSTM "
            "(bf16 = true); training in float32",
            file=sys.stderr,
            flush=True,
        )
    return FLOAT32


@contextlib.contextmanager
def autocast_to(precision: str, device: torch.device) -> Iterator[None]:
    """bfloat16 autocast for "bfloat16", nothing for "float32"."""
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == BFLOAT16):
        yield
