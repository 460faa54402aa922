"""A word+POS run directory: its config, vocabulary and model (docs/word-pos.md).

``vocab.json`` holds the :class:`~nslm.word_pos.vocab.TaggedVocab` (words with unknown
signatures, tags, suffixes) and ``model.safetensors`` the weights, the counted Q(p | w) of
an Eq. 11 model and the tag-word table of a joint one included: a run needs no corpus to
load, only to be scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nslm.config import TrainConfig, read_config_json
from nslm.errors import NslmError
from nslm.files.json_policy import read_json
from nslm.runs.files import load_model_tensors
from nslm.word_pos.model import WordPosLM, WordPosSizes
from nslm.word_pos.vocab import TaggedVocab

VOCAB_FILE = "vocab.json"


def word_pos_model(
    cfg: TrainConfig, vocab: TaggedVocab, counts: torch.Tensor | None = None
) -> WordPosLM:
    """The model ``cfg`` describes over ``vocab``; ``counts`` = train count(word, tag), which
    starts the joint's tag-word table and is the Eq. 11 model's Q(p | w) (zeros when the
    weights are loaded afterwards)."""
    sizes = WordPosSizes(
        n_words=len(vocab.words),
        n_tags=len(vocab.tags),
        n_suffixes=len(vocab.suffixes),
        emb_size=cfg.emb_size,
        tag_emb_size=cfg.tag_emb_size,
        shape_emb_size=cfg.shape_emb_size,
        hidden_size=cfg.hidden_size,
        num_layers=cfg.num_layers,
        dropout=cfg.dropout,
    )
    if counts is None:
        counts = torch.zeros(sizes.n_words, sizes.n_tags)
    return WordPosLM(cfg.pos_model, sizes, counts, cfg.eq11_loss, cfg.tag_weight)


@dataclass
class WordPosRun:
    run_dir: Path
    cfg: TrainConfig
    vocab: TaggedVocab
    model: WordPosLM


def load_word_pos_run(run_dir: Path | str, weights: str = "model.safetensors") -> WordPosRun:
    """The run in ``run_dir`` with its best weights (or ``weights``), in eval mode."""
    run_dir = Path(run_dir)
    config = run_dir / "config.json"
    if not config.is_file():
        raise NslmError(f"not a run directory: {run_dir} has no config.json")
    cfg = read_config_json(config)
    if cfg.model != "word-pos":
        raise NslmError(f"{run_dir} is not a word+POS run (model = {cfg.model!r})")
    vocab = TaggedVocab.from_json(read_json(run_dir / VOCAB_FILE))
    model = word_pos_model(cfg, vocab)
    path = run_dir / weights
    if not path.is_file():
        raise NslmError(f"{run_dir} has no weights yet ({weights}): train it first")
    load_model_tensors(model, path)
    return WordPosRun(run_dir, cfg, vocab, model.eval())
