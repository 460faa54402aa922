"""The rules a training config follows: allowed values, ranges and combinations.

:func:`validate` runs on every config built (``build_config``), so a broken rule is a
one-line :class:`~nslm.errors.NslmError` before any work starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nslm.data.tagging import CLASS_CHOICES
from nslm.errors import NslmError
from nslm.hooks import config_rules, corpus_kind_of, head_kinds, training_tasks

if TYPE_CHECKING:
    from nslm.config.train_config import TrainConfig

# the core's values of each key; the models another system trains (a training task of its
# own, nslm.hooks) are allowed beside these
CHOICES: dict[str, tuple[str, ...]] = {
    "model": ("lstm", "awd", "transformer", "fixed-window"),
    "softmax": ("full", "adaptive"),
    "hnlm_top": ("separate", "shared"),
    "optimizer": ("sgd", "adam", "adamw"),
    "lr_schedule": ("plateau", "cosine", "constant", "linear", "halving"),
    "early_stopping_on": ("all", "numbers"),
    "classes": CLASS_CHOICES,  # none: only class_rules
}
HEAD_NAMES = ("nnlm", "hnlm")


def validate(cfg: TrainConfig) -> None:
    """Every rule a config must follow, the core's and then those the other systems
    registered (:mod:`nslm.hooks`); the first broken one is a one-line NslmError."""
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
    kind = corpus_kind_of(cfg.corpus)
    if kind is not None and not kind.has_classes and (cfg.classes != "none" or cfg.class_rules):
        raise NslmError(f"a {kind.name} has no classes: set classes = 'none' (and no class_rules)")
    for rule in config_rules():
        rule(cfg)
    _check_device(cfg)


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
    choices = {**CHOICES, "model": CHOICES["model"] + tuple(training_tasks())}
    for key, allowed in choices.items():
        if getattr(cfg, key) not in allowed:
            raise NslmError(f"config key {key!r} must be one of {', '.join(allowed)}")
    extra = head_kinds()
    # a head of another system trains alone, and that system's rules check the rest
    other_system = len(cfg.heads) == 1 and cfg.heads[0] in extra
    if not other_system and (not cfg.heads or any(h not in HEAD_NAMES for h in cfg.heads)):
        alone = "".join(f", or [{name!r}] ({kind.docs})" for name, kind in extra.items())
        raise NslmError(f"config key 'heads' must be a non-empty list of {HEAD_NAMES}{alone}")
    if cfg.hnlm_top == "shared" and set(cfg.heads) != set(HEAD_NAMES):
        raise NslmError("config key 'hnlm_top' = 'shared' needs heads = ['nnlm', 'hnlm']")


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
    own_task = cfg.model in training_tasks()  # not a stream LM
    if cfg.early_stopping_on == "numbers" and (cfg.classes == "none" or own_task):
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
    # another system's head ties its own input and output layers (nslm.hooks.HeadKind.attach)
    if cfg.model not in ("lstm", "awd") or not {"nnlm", *head_kinds()} & set(cfg.heads):
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
