"""The experiment: one TOML file per run (``configs/``) read into a
:class:`TrainConfig` with dataclass defaults and ``--set key=value`` overrides."""

from nslm.config.checks import HEAD_NAMES, class_rules_of, validate
from nslm.config.train import (
    TrainConfig,
    build_config,
    config_from_json,
    load_config,
    read_config_json,
    read_toml,
    total_threads,
    valid_keys,
)

__all__ = [
    "HEAD_NAMES",
    "TrainConfig",
    "build_config",
    "class_rules_of",
    "config_from_json",
    "load_config",
    "read_config_json",
    "read_toml",
    "total_threads",
    "valid_keys",
    "validate",
]
