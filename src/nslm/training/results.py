"""What a finished run reports about a split (``results.json``), and where it trains.

Per head the perplexity; for a byte LM also bits per byte (mean NLL in nats / ln 2) and
next-byte accuracy (the argmax of the next-byte distribution is the byte that follows), as
Carvalho's byte LM reports its loss and accuracy (docs/byte-lm.md).
"""

from __future__ import annotations

import math

import torch

from nslm.config import TrainConfig
from nslm.data.corpus import Split
from nslm.errors import NslmError
from nslm.scores.passes import Scorer


def split_results(scorer: Scorer, split: Split, heads: list[str], name: str) -> dict[str, float]:
    """``{name}_ppl_{head}`` for each head, plus ``{name}_bpb`` and ``{name}_accuracy`` of
    the NNLM head when the scorer reads accuracy (byte LMs)."""
    figures = scorer.score(split).head_figures(heads)
    short = {"bits_per_byte": "bpb"}  # results.json's established key
    return {f"{name}_{short.get(k, k)}": v for k, v in figures.items()}


def describe_validation(ppl: dict[str, float], byte_lm: bool) -> str:
    """The validation figure a training log shows: perplexity per head, or bits per byte."""
    if byte_lm:
        bpb = math.log2(ppl["nnlm"]) if ppl["nnlm"] > 0 else math.nan
        return f"valid bits/byte {bpb:.3f}"
    return "valid ppl " + ", ".join(f"{h} {v:.2f}" for h, v in ppl.items())


def training_device(cfg: TrainConfig) -> torch.device:
    """The config's ``device``, checked to exist on this machine (one line if not)."""
    device = torch.device(cfg.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise NslmError(f"device {cfg.device!r}: this PyTorch sees no CUDA device")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise NslmError(f"device {cfg.device!r}: only {torch.cuda.device_count()} GPUs")
    return device
