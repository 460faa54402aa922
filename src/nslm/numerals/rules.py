"""The config rules of the numeral models: which models ``numeral_model`` names, and what a
run with ``heads = ['numeral']`` needs (registered with :mod:`nslm.hooks`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.config.train_config import TrainConfig

# Spithourakis & Riedel (2018)'s numeral models (numerals/model.py; docs/numerals.md)
NUMERAL_MODELS = (
    "softmax",
    "softmax+rnn",
    "h-softmax",
    "h-softmax+rnn",
    "d-rnn",
    "mog",
    "combination",
)


def check_numeral_config(cfg: TrainConfig) -> None:
    """The numeral keys of every config, and what the numeral head needs of the rest."""
    if cfg.numeral_model not in NUMERAL_MODELS:
        raise NslmError(f"config key 'numeral_model' must be one of {', '.join(NUMERAL_MODELS)}")
    if cfg.heads != ["numeral"]:
        return
    if cfg.model != "lstm" or cfg.classes not in ("all", "numbers"):
        raise NslmError("heads = ['numeral'] needs model = 'lstm' and classes with numbers")
    if cfg.numeral_min_count < 1 or cfg.digit_size < 1:
        raise NslmError("config keys 'numeral_min_count' and 'digit_size' must be positive")
