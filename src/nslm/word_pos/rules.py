"""The config rules of the word+POS LMs (registered with :mod:`nslm.hooks`): their keys'
values, and that ``model = 'word-pos'`` and a tagged corpus go together."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nslm.errors import NslmError

if TYPE_CHECKING:
    from nslm.config.train_config import TrainConfig

MODEL = "word-pos"
CHOICES: dict[str, tuple[str, ...]] = {
    "pos_model": ("word_only", "joint", "eq11", "multitask", "tagger"),
    "eq11_loss": ("eq11", "eq5"),
}


def is_tagged_corpus(name: str) -> bool:
    """A POS-tagged corpus, which the word+POS models read (word_pos/tagged.py)."""
    return name in ("brown", "ewt") or name.startswith("tagged:")


def check_word_pos_config(cfg: TrainConfig) -> None:
    for key, allowed in CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise NslmError(f"config key {key!r} must be one of {', '.join(allowed)}")
    if (cfg.model == MODEL) != is_tagged_corpus(cfg.corpus):
        raise NslmError(
            "model = 'word-pos' trains on a tagged corpus ('brown', 'ewt' or 'tagged:DIR') "
            "and a tagged corpus needs model = 'word-pos'"
        )
    if cfg.model == MODEL and min(cfg.vocab_size - 1, cfg.tag_emb_size, cfg.shape_emb_size) <= 0:
        raise NslmError(
            "config keys 'vocab_size' (≥ 2), 'tag_emb_size' and 'shape_emb_size' "
            "(> 0) are out of range"
        )
