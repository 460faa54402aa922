"""The word+POS task: a :class:`~nslm.training.task.TrainingTask` over a tagged corpus.

Sentences are batched whole (``word_pos/batches.py``), each from a fresh state, so the task
is stateless; under DDP each rank takes every ``world``-th batch of the epoch's shuffled
order. Validation scores the valid split with the gold history (word and joint
perplexity); the tagger is validated on its own error rate, tagging with its own history.
The final figures (``results.json``) are the comparison of docs/word-pos.md: word
perplexity with gold previous tags and with the model's own, joint perplexity, and tagging
accuracy next to the most-frequent-tag baseline.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from nslm.config import TrainConfig
from nslm.errors import NslmError
from nslm.files.json_policy import read_json
from nslm.training import checkpoint as ck
from nslm.word_pos.batches import SentenceBatch, batch_plan, epoch_batches
from nslm.word_pos.model import model_inputs
from nslm.word_pos.run import VOCAB_FILE, word_pos_model
from nslm.word_pos.scores import TaggedScores, score_tagged, split_figures
from nslm.word_pos.tagged import TaggedCorpus, load_tagged_corpus
from nslm.word_pos.vocab import TaggedVocab


class WordPosTask:
    """One word+POS model (``cfg.pos_model``) on ``cfg.corpus``."""

    def __init__(
        self, cfg: TrainConfig, *, rank: int, world: int, device: torch.device, resume: bool
    ) -> None:
        self.cfg, self.device, self.rank, self.world = cfg, device, rank, world
        self.corpus: TaggedCorpus = load_tagged_corpus(cfg.corpus)
        self.vocab = TaggedVocab.build(self.corpus.train.words, self.corpus.tagset, cfg.vocab_size)
        self.encoded = {
            name: self.vocab.encode(split.words, split.tags)
            for name, split in self.corpus.splits.items()
        }
        counts = torch.tensor(self.vocab.tag_given_word_counts(self.encoded["train"]))
        torch.manual_seed(cfg.seed)
        self.model = word_pos_model(cfg, self.vocab, counts).to(device)
        self.kind = cfg.pos_model
        self.stat_names = ["word", "tag"]
        self.metric_names = ["tag_error"] if self.kind == "tagger" else ["ppl_word"]
        if self.kind in ("joint", "eq11"):
            self.metric_names.append("ppl_joint")
        self.epoch = 0
        self.state_fields: dict[str, Any] = {"word_pos_batch_size": cfg.batch_size}

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> None:
        load_tagged_corpus(cfg.corpus)  # a malformed corpus is one line before any rank starts

    # -- batches ---------------------------------------------------------------------------

    def n_batches(self) -> int:
        return len(batch_plan(self.encoded["train"], self.cfg.batch_size)) // self.world

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self, start: int) -> Iterator[tuple[int, SentenceBatch]]:
        """This rank's share: batch ``i`` of the shuffled epoch goes to rank ``i % world``."""
        every = epoch_batches(
            self.encoded["train"],
            self.vocab,
            self.cfg.batch_size,
            seed=self.cfg.seed,
            epoch=self.epoch,
            start=start * self.world + self.rank,
        )
        n = self.n_batches()
        for index, batch in every:
            if index // self.world >= n:
                return
            if index % self.world == self.rank:
                yield index // self.world, batch

    def loss(
        self, module: nn.Module, batch: SentenceBatch, hidden: Any
    ) -> tuple[Tensor, Tensor, Any, int]:
        h, _ = module(*model_inputs(self.kind, batch, self.device))
        mask = torch.from_numpy(batch.mask).to(self.device)
        words = torch.from_numpy(batch.target_words).to(self.device)[mask]
        tags = torch.from_numpy(batch.target_tags).to(self.device)[mask]
        loss, parts = self.model.loss(h[mask], words, tags)
        n = batch.n_targets
        stats = torch.stack([parts * n, parts.new_full((2,), float(n))], dim=1)
        return loss, stats, None, n

    # -- scores ----------------------------------------------------------------------------

    def _score(self, split: str, history: str) -> TaggedScores:
        return score_tagged(
            self.model,
            self.encoded[split],
            self.vocab,
            history=history,
            batch_size=self.cfg.eval_batch_size,
        )

    def validate(self) -> dict[str, float]:
        if self.kind == "tagger":
            accuracy = self._score("valid", "predicted").tagger_accuracy()
            return {"tag_error": 1.0 - accuracy}
        scores = self._score("valid", "gold")
        figures = {"ppl_word": scores.word_perplexity()}
        if "ppl_joint" in self.metric_names:
            figures["ppl_joint"] = scores.joint_perplexity()
        return figures

    def describe(self, figures: dict[str, float]) -> str:
        if self.kind == "tagger":
            return f"valid tagging accuracy {1.0 - figures['tag_error']:.4f}"
        return ", ".join(f"valid {k.replace('ppl_', '')} ppl {v:.2f}" for k, v in figures.items())

    def final_results(self) -> dict[str, Any]:
        results: dict[str, Any] = {"pos_model": self.kind, "corpus": self.cfg.corpus}
        for split in ("valid", "test"):
            if self.cfg.progress:
                print(f"scoring {split} …", file=sys.stderr, flush=True)
            results.update(
                split_figures(
                    self.model,
                    self.vocab,
                    self.encoded["train"],
                    self.encoded[split],
                    split,
                    batch_size=self.cfg.eval_batch_size,
                )
            )
        return results

    # -- the run directory -----------------------------------------------------------------

    def write_assets(self, run_dir: Path) -> None:
        ck.write_json_atomic(run_dir / VOCAB_FILE, self.vocab.to_json())

    def check_resume(self, run_dir: Path, state: dict[str, Any]) -> None:
        if read_json(run_dir / VOCAB_FILE) != self.vocab.to_json():
            raise NslmError(f"{run_dir} was trained on a different vocabulary")
        if state.get("word_pos_batch_size", self.cfg.batch_size) != self.cfg.batch_size:
            raise NslmError(f"{run_dir} was trained with another batch_size")
