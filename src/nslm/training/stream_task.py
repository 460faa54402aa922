"""The stream LM task: one backbone with NNLM/HNLM heads over a prepared corpus, trained
by stateful TBPTT on parallel streams (``batches/streams.py``) and validated by the one
scoring pass. Every word-level and byte-level config trains through it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from nslm.batches.streams import make_streams
from nslm.config import TrainConfig, class_rules_of
from nslm.data.corpus import PreparedCorpus
from nslm.data.numbers import number_positions
from nslm.errors import NslmError
from nslm.hooks import head_kinds
from nslm.models.hnlm_layout import HNLMLayout
from nslm.models.lm import LanguageModel
from nslm.perplexity import perplexity
from nslm.runs.assets import write_run_assets
from nslm.scores.passes import Scorer, head_of
from nslm.training import checkpoint as ck
from nslm.training.embeddings import INIT_VECTORS_FILE, describe, prepare_embeddings
from nslm.training.results import describe_validation, split_results


def load_corpus(cfg: TrainConfig) -> PreparedCorpus:
    from nslm.data import prepare_corpus

    return prepare_corpus(cfg.corpus, cfg.classes, class_rules=class_rules_of(cfg))


class StreamLMTask:
    """A :class:`~nslm.training.task.TrainingTask` over ``cfg.corpus``: this rank's
    ``batch_size / world`` streams of the train split, in TBPTT windows of ``bptt``."""

    def __init__(
        self, cfg: TrainConfig, *, rank: int, world: int, device: torch.device, resume: bool
    ) -> None:
        self.cfg, self.device = cfg, device
        self.corpus = load_corpus(cfg)
        self.byte_lm = self.corpus.vocab.is_bytes  # reports bits per byte and accuracy
        self.layout = None
        if "hnlm" in cfg.heads:
            shared = cfg.hnlm_top == "shared"
            self.layout = HNLMLayout.from_corpus(self.corpus, shared=shared)
        # another system's head (nslm.hooks), and what it knows before training
        self.head_kind = next((k for n, k in head_kinds().items() if n in cfg.heads), None)
        self.head_spec = None
        if self.head_kind is not None:  # built alike on every rank
            self.head_spec = self.head_kind.spec_from_corpus(cfg, self.corpus)
        # The seed right before the model's initialisation: the same weights as ever.
        torch.manual_seed(cfg.seed)
        self.model = LanguageModel(cfg, len(self.corpus.vocab), self.layout, self.head_spec)
        # Grounding (Table 6) and pretrained vectors (Table 5), before DDP copies the weights.
        self.vectors = prepare_embeddings(cfg, self.model, self.corpus, fresh=not resume)
        self.model.to(device)
        if cfg.compile:
            self.model.backbone = torch.compile(self.model.backbone)
        self.stat_names = list(cfg.heads)
        # results.json's and metrics.jsonl's established names: valid_ppl_nnlm, …
        self.metric_names = [f"ppl_{h}" for h in cfg.heads]
        if cfg.early_stopping_on == "numbers":  # the primary figure comes first
            self.metric_names.insert(0, f"ppl_numbers_{cfg.heads[0]}")
        train = self.corpus.train
        n = cfg.train_tokens or len(train)
        if cfg.batch_size % world:
            raise NslmError(f"batch_size {cfg.batch_size} is not divisible by {world} ranks")
        n = min(n, len(train))
        if n < 2 * cfg.batch_size:  # each stream needs an input and a target at least
            raise NslmError(
                f"config key 'batch_size' ({cfg.batch_size:,} streams) is too large "
                f"for the {n:,} training tokens: at most {n // 2:,}"
            )
        all_streams = make_streams(
            train.token_ids[:n], train.class_ids[:n], train.article_ids[:n], cfg.batch_size
        )
        per_rank = cfg.batch_size // world
        self.streams = all_streams.take(rank * per_rank, per_rank)
        self.state_fields: dict[str, Any] = {"streams_per_rank": per_rank}

    @classmethod
    def prepare(cls, cfg: TrainConfig) -> None:
        load_corpus(cfg)

    # -- batches ---------------------------------------------------------------------------

    def n_batches(self) -> int:
        return self.streams.n_batches(self.cfg.bptt)

    def batches(self, start: int) -> Iterator[tuple[int, tuple[np.ndarray, ...]]]:
        return self.streams.batches(self.cfg.bptt, start)

    def set_epoch(self, epoch: int) -> None:
        """Nothing to do: every epoch reads the same streams from their start."""

    def loss(
        self, module: nn.Module, batch: tuple[np.ndarray, ...], hidden: Any
    ) -> tuple[Tensor, Tensor, Any, int]:
        # ids may be stored narrow (uint8 bytes); the model takes int64 on its device
        x, y, c, pos = (torch.from_numpy(a).to(self.device).long() for a in batch)
        loss, stats, hidden = module(x, y, c, pos >= 0, hidden)
        # TBPTT: carry the state into the next window without its history.
        carried = None if hidden is None else tuple(t.detach() for t in hidden)
        # Real targets only: the last window is short and padding is masked.
        return loss, stats, carried, int((batch[3] >= 0).sum())

    # -- scores ----------------------------------------------------------------------------

    def _scorer(self) -> Scorer:
        """The one scoring pass over the heads (no micro-models yet), as evaluation runs it."""
        cfg = self.cfg
        return Scorer(
            self.model,
            batch_size=cfg.eval_batch_size,
            bptt=cfg.bptt,
            accuracy=self.byte_lm,
        )

    def validate(self) -> dict[str, float]:
        """Validation perplexity per head (the scoring pass sets eval mode and restores it)."""
        cfg = self.cfg
        valid = head_of(self.corpus.valid, cfg.valid_tokens)
        if cfg.progress:  # scoring takes a while and has no bar of its own
            n = len(valid.token_ids)
            print(f"validating on {n:,} tokens …", file=sys.stderr, flush=True)
        scores = self._scorer().score(valid)
        figures = {f"ppl_{h}": scores.perplexity(h) for h in cfg.heads}
        if cfg.early_stopping_on == "numbers":
            head = cfg.heads[0]
            at = number_positions(valid, self.corpus.class_names)
            figures[f"ppl_numbers_{head}"] = perplexity(getattr(scores, head)[at])
        return figures

    def describe(self, figures: dict[str, float]) -> str:
        ppl = {h: figures[f"ppl_{h}"] for h in self.cfg.heads}
        line = describe_validation(ppl, self.byte_lm)
        if self.cfg.early_stopping_on == "numbers":
            head = self.cfg.heads[0]
            line += f"; Numbers ppl ({head}) {figures[f'ppl_numbers_{head}']:.1f}"
        return line

    def final_results(self) -> dict[str, Any]:
        cfg, results = self.cfg, {}
        for split in ("valid", "test"):
            limit = cfg.valid_tokens if split == "valid" else cfg.test_tokens
            part = head_of(self.corpus.splits[split], limit)
            results.update(split_results(self._scorer(), part, cfg.heads, split))
        return results

    # -- the run directory -----------------------------------------------------------------

    def write_assets(self, run_dir: Path) -> None:
        ck.write_json_atomic(run_dir / "vocab.json", {"itos": self.corpus.vocab.itos})
        # the model side of the corpus, so the run alone serves predict and generate
        write_run_assets(run_dir, self.cfg, self.corpus)
        if self.layout is not None:
            ck.write_json_atomic(run_dir / "layout.json", self.layout.to_json())
        if self.head_kind is not None:
            spec_file = run_dir / self.head_kind.spec_file
            ck.write_json_atomic(spec_file, self.head_spec.to_json())
        if self.vectors is not None:
            ck.write_json_atomic(run_dir / INIT_VECTORS_FILE, self.vectors)
            print(describe(self.vectors), file=sys.stderr)

    def check_resume(self, run_dir: Path, state: dict[str, Any]) -> None:
        saved_vocab = ck.read_json(run_dir / "vocab.json").get("itos")
        if saved_vocab != self.corpus.vocab.itos:
            raise NslmError(f"{run_dir} was trained on a different vocabulary")
        ck.check_stream_layout(state)
