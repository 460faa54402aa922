"""The rules a training config follows: allowed values, ranges and combinations.

:func:`validate` runs on every config built (``build_config``), so a broken rule is a
one-line :class:`~nslm.errors.NslmError` before any work starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nslm.byte_lm.data import is_byte_corpus
from nslm.data.tagging import CLASS_CHOICES
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
CHOICES: dict[str, tuple[str, ...]] = {
    "model": ("lstm", "awd", "transformer", "fixed-window", "word-pos"),
    "pos_model": ("word_only", "joint", "eq11", "multitask", "tagger"),
    "eq11_loss": ("eq11", "eq5"),
    "softmax": ("full", "adaptive"),
    "hnlm_top": ("separate", "shared"),
    "optimizer": ("sgd", "adam", "adamw"),
    "lr_schedule": ("plateau", "cosine", "constant", "linear", "halving"),
    "early_stopping_on": ("all", "numbers"),
    "classes": CLASS_CHOICES,  # none: only class_rules
    "numeral_model": NUMERAL_MODELS,
}
HEAD_NAMES = ("nnlm", "hnlm")


def validate(cfg: TrainConfig) -> None:
    """Every rule a config must follow; the first broken one is a one-line NslmError."""
    _check_choices(cfg)
    _check_ranges(cfg)
    _check_validation(cfg)
    class_rules_of(cfg)  # a bad NAME=REGEX or a built-in name fails here, before any work
    if cfg.grounded and cfg.model not in ("lstm", "awd"):
        raise NslmError("config key 'grounded' needs model = 'lstm' or 'awd'")
    if cfg.batch_size % cfg.processes:
        raise NslmError("config key 'batch_size' must be divisible by 'processes'")
    if cfg.sparse_embedding:
        _check_sparse_embedding(cfg)
    if cfg.tie_weights:
        _check_tying(cfg)
    if cfg.model == "transformer" and cfg.hidden_size % cfg.n_heads:
        raise NslmError("transformer: hidden_size must be divisible by n_heads")
    _check_word_pos(cfg)
    if is_byte_corpus(cfg.corpus) and (cfg.classes != "none" or cfg.class_rules):
        raise NslmError("a byte corpus has no classes: set classes = 'none' (and no class_rules)")
    _check_device(cfg)


def is_tagged_corpus(name: str) -> bool:
    """A POS-tagged corpus, which the word+POS models read (word_pos/tagged.py)."""
    return name in ("brown", "ewt") or name.startswith("tagged:")


def _check_word_pos(cfg: TrainConfig) -> None:
    if (cfg.model == "word-pos") != is_tagged_corpus(cfg.corpus):
        raise NslmError(
            "model = 'word-pos' trains on a tagged corpus ('brown', 'ewt' or 'tagged:DIR') "
            "and a tagged corpus needs model = 'word-pos'"
        )
    if (
        cfg.model == "word-pos"
        and min(cfg.vocab_size - 1, cfg.tag_emb_size, cfg.shape_emb_size) <= 0
    ):
        raise NslmError(
            "config keys 'vocab_size' (≥ 2), 'tag_emb_size' and 'shape_emb_size' "
            "(> 0) are out of range"
        )


def _check_device(cfg: TrainConfig) -> None:
    import torch

    try:
        device = torch.device(cfg.device)
    except RuntimeError:
        raise NslmError(f"config key 'device': not a device: {cfg.device!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise NslmError("config key 'device' must be cpu or cuda[:N]")
    # (whether the device exists is the trainer's check: a run trained on a GPU still loads
    # on a machine without one)
    if device.type == "cuda" and cfg.processes > 1:
        raise NslmError("device 'cuda' trains in one process: set processes = 1")


def _check_choices(cfg: TrainConfig) -> None:
    for key, allowed in CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise NslmError(f"config key {key!r} must be one of {', '.join(allowed)}")
    if cfg.heads == ["numeral"]:
        _check_numeral(cfg)
    elif not cfg.heads or any(h not in HEAD_NAMES for h in cfg.heads):
        raise NslmError(
            f"config key 'heads' must be a non-empty list of {HEAD_NAMES}, or "
            "['numeral'] (docs/numerals.md)"
        )
    if cfg.hnlm_top == "shared" and set(cfg.heads) != set(HEAD_NAMES):
        raise NslmError("config key 'hnlm_top' = 'shared' needs heads = ['nnlm', 'hnlm']")


def _check_numeral(cfg: TrainConfig) -> None:
    if cfg.model != "lstm" or cfg.classes not in ("all", "numbers"):
        raise NslmError("heads = ['numeral'] needs model = 'lstm' and classes with numbers")
    if cfg.numeral_min_count < 1 or cfg.digit_size < 1:
        raise NslmError("config keys 'numeral_min_count' and 'digit_size' must be positive")


def _check_ranges(cfg: TrainConfig) -> None:
    positive = ("emb_size", "hidden_size", "num_layers", "batch_size", "bptt", "eval_batch_size")
    for key in positive:
        if getattr(cfg, key) <= 0:
            raise NslmError(f"config key {key!r} must be positive")
    if not 0.0 <= cfg.dropout < 1.0:
        raise NslmError("config key 'dropout' must be in [0, 1)")
    if cfg.lr <= 0:
        raise NslmError("config key 'lr' must be positive")
    integers = all(isinstance(c, int) and not isinstance(c, bool) for c in cfg.cutoffs)
    if not integers or sorted(cfg.cutoffs) != cfg.cutoffs or any(c <= 0 for c in cfg.cutoffs):
        raise NslmError("config key 'cutoffs' must be increasing positive integers")
    if cfg.processes < 1:
        raise NslmError("config key 'processes' must be at least 1")
    marks = cfg.keep_checkpoints_at_minutes
    if any(not isinstance(m, int | float) or m <= 0 for m in marks) or marks != sorted(marks):
        raise NslmError("config key 'keep_checkpoints_at_minutes' must be increasing minutes > 0")
    if cfg.keep_weights_every < 0:
        raise NslmError("config key 'keep_weights_every' must be a number of steps ≥ 0")


def _check_validation(cfg: TrainConfig) -> None:
    """When validation runs and what the rate-halving schedule does with it."""
    if cfg.eval_every < 0:
        raise NslmError("config key 'eval_every' must be 0 (epoch ends only) or a step count")
    if not 0.0 <= cfg.halving_epsilon < 1.0:
        raise NslmError("config key 'halving_epsilon' must be in [0, 1)")
    if cfg.max_halvings < 1:
        raise NslmError("config key 'max_halvings' must be at least 1")
    if cfg.early_stopping_on == "numbers" and (cfg.classes == "none" or cfg.model == "word-pos"):
        raise NslmError(
            "config key 'early_stopping_on' = 'numbers' needs a corpus tagged with number "
            "classes (classes other than 'none') and a stream LM"
        )


def _check_sparse_embedding(cfg: TrainConfig) -> None:
    if cfg.model != "lstm":
        raise NslmError("config key 'sparse_embedding' needs model = 'lstm'")
    if cfg.weight_decay:
        raise NslmError("config key 'sparse_embedding' needs weight_decay = 0")
    if cfg.optimizer == "adamw" or (cfg.optimizer == "sgd" and cfg.momentum):
        raise NslmError(
            "config key 'sparse_embedding' needs optimizer 'adam', or 'sgd' without momentum"
        )


def _check_tying(cfg: TrainConfig) -> None:
    if cfg.model not in ("lstm", "awd") or not {"nnlm", "numeral"} & set(cfg.heads):
        raise NslmError("config key 'tie_weights' needs model 'lstm' or 'awd' and an nnlm head")
    if cfg.model == "awd" and cfg.softmax == "full":
        return  # the softmax's matrix is the learnt part of the embedding table
    if cfg.sparse_embedding:
        raise NslmError(
            "config key 'tie_weights' does not go with 'sparse_embedding' (the "
            "input table is the softmax's, whose gradient is dense)"
        )
    # awd's last layer has emb_size units when tied; an lstm's has hidden_size
    if cfg.model == "lstm" and cfg.emb_size != cfg.hidden_size:
        raise NslmError(
            "config key 'tie_weights' needs emb_size = hidden_size (the softmax's input width)"
        )


def class_rules_of(cfg: TrainConfig) -> tuple:
    """The run's user-defined classes as :class:`~nslm.data.custom.ClassRule` objects."""
    from nslm.data.custom import parse_class_rule

    if not all(isinstance(r, str) for r in cfg.class_rules):
        raise NslmError("config key 'class_rules' must be a list of \"NAME=REGEX\" strings")
    return tuple(parse_class_rule(r) for r in cfg.class_rules)
