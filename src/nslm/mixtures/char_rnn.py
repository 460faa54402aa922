"""The CRNN baseline: a character-level LSTM per class, normalised over the class vocabulary.

For class c, P_CRNN(w | c) is the chain-rule probability of w's characters and an end mark,

    P_char(w) = Π_i p(ch_i | ch_<i) · p(⊣ | ch_1..n),

renormalised over V_c so that it is a distribution over the class vocabulary (the paper's
CRNN column; Spithourakis & Riedel 2018). With ``context="previous"`` the LSTM first reads
the previous token of the same class in the article, so it sees what the micro-models see.
Combined with P(c | h) from the HNLM head it scores class positions like Eq. 3 does.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save
from torch import nn

from nslm.data.corpus import PreparedCorpus, Split
from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.files.tensors import read_tensors
from nslm.micro.history import previous_index

PAD, END, SEP = 0, 1, 2  # SEP ends the context; the target's characters follow it


@dataclass
class CharRNNConfig:
    context: str = "none"  # "none" or "previous"
    embed: int = 32
    hidden: int = 128
    epochs: int = 3
    batch_size: int = 256
    lr: float = 3e-3
    seed: int = 0
    min_steps: int = 0  # more epochs until this many optimiser steps (small classes)
    max_seconds: float = 0.0  # stop training after this long (0 = run every epoch)


class _CharLSTM(nn.Module):
    def __init__(self, n_chars: int, cfg: CharRNNConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_chars, cfg.embed, padding_idx=PAD)
        self.lstm = nn.LSTM(cfg.embed, cfg.hidden, batch_first=True)
        self.out = nn.Linear(cfg.hidden, n_chars)

    def forward(self, x: torch.Tensor, state=None):
        h, state = self.lstm(self.embed(x), state)
        return torch.log_softmax(self.out(h), dim=-1), state


class CharRNNClassModel:
    """fit(corpus, cls) on the train split, then log-probabilities over V_c."""

    def __init__(self, config: CharRNNConfig | None = None) -> None:
        self.config = config or CharRNNConfig()
        if self.config.context not in ("none", "previous"):
            raise NslmError(
                f"CRNN context must be 'none' or 'previous', not {self.config.context!r}"
            )
        self.cls: str | None = None
        self.chars: list[str] = []
        self.candidates: np.ndarray = np.empty(0, dtype=np.int64)  # V_c type ids
        self._strings: list[str] = []
        self._net: _CharLSTM | None = None
        self.steps = 0  # optimiser steps taken (fewer than planned if max_seconds hit)

    # -- encoding ------------------------------------------------------------------------
    def _encode(self, text: str) -> list[int]:
        index = self._char_index
        return [index.get(ch, index["\x00unk"]) for ch in text]

    def _contexts(self, corpus: PreparedCorpus, split: Split, positions: np.ndarray) -> list[str]:
        if self.config.context == "none":
            return [""] * len(positions)
        cid = corpus.class_id(self.cls)
        prev = previous_index(split.rule_class_ids == cid, split.article_ids)[positions]
        itos, unk = corpus.vocab.itos, corpus.vocab.unk_id
        ids = split.token_ids
        return ["" if p < 0 or ids[p] == unk else itos[ids[p]] for p in prev]

    # -- fitting -------------------------------------------------------------------------
    def fit(self, corpus: PreparedCorpus, cls: str) -> CharRNNClassModel:
        self.cls = cls.strip("<>")
        self.candidates = corpus.class_vocab(self.cls)
        if len(self.candidates) == 0:
            raise NslmError(f"class <{self.cls}> has an empty vocabulary")
        self._strings = [corpus.vocab.itos[i] for i in self.candidates]
        self.chars = [
            "\x00pad",
            "\x00end",
            "\x00sep",
            "\x00unk",
            *sorted(set("".join(self._strings))),
        ]
        self._char_index = {ch: i for i, ch in enumerate(self.chars)}
        train = corpus.train
        positions = np.flatnonzero(train.class_ids == corpus.class_id(self.cls))
        contexts = self._contexts(corpus, train, positions)
        targets = [corpus.vocab.itos[i] for i in train.token_ids[positions]]
        torch.manual_seed(self.config.seed)
        self._net = _CharLSTM(len(self.chars), self.config)
        if targets:  # a class with no training token keeps the untrained (near-uniform) net
            self._train(contexts, targets)
        self._net.eval()
        return self

    def _sequences(self, contexts: list[str], targets: list[str]):
        """Input/target char ids with the loss only on the target word and its end mark."""
        rows = []
        for ctx, word in zip(contexts, targets, strict=True):
            prefix = [*self._encode(ctx), SEP]
            chars = [*self._encode(word), END]
            rows.append((prefix + chars[:-1], [PAD] * (len(prefix) - 1) + chars))
        width = max(len(x) for x, _ in rows)
        x = torch.full((len(rows), width), PAD, dtype=torch.long)
        y = torch.full((len(rows), width), PAD, dtype=torch.long)
        for i, (xi, yi) in enumerate(rows):
            x[i, : len(xi)] = torch.tensor(xi)
            y[i, : len(yi)] = torch.tensor(yi)
        return x, y

    def _train(self, contexts: list[str], targets: list[str]) -> None:
        assert self._net is not None
        x, y = self._sequences(contexts, targets)
        gen = torch.Generator().manual_seed(self.config.seed)
        optimiser = torch.optim.Adam(self._net.parameters(), lr=self.config.lr)
        self._net.train()
        deadline = time.perf_counter() + (self.config.max_seconds or float("inf"))
        per_epoch = -(-len(x) // self.config.batch_size)
        # A class with few tokens gets more epochs: a char LSTM needs ~10³ steps before its
        # distribution over V_c beats the class unigram (measured on <city>, 5k tokens).
        epochs = max(self.config.epochs, -(-self.config.min_steps // per_epoch))
        for _ in range(epochs):
            for batch in torch.randperm(len(x), generator=gen).split(self.config.batch_size):
                if time.perf_counter() > deadline:
                    break
                log_probs, _ = self._net(x[batch])
                loss = nn.functional.nll_loss(
                    log_probs.reshape(-1, log_probs.shape[-1]),
                    y[batch].reshape(-1),
                    ignore_index=PAD,
                )
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                self.steps += 1
        self._net.eval()

    # -- scoring -------------------------------------------------------------------------
    @torch.no_grad()
    def log_prob_matrix(self, contexts: list[str]) -> np.ndarray:
        """(len(contexts), |V_c|) log P_CRNN(w | c, context), each row normalised over V_c."""
        assert self._net is not None, "fit() first"
        cand = [[*self._encode(w), END] for w in self._strings]
        width = max(len(c) for c in cand)
        cand_ids = torch.full((len(cand), width), PAD, dtype=torch.long)
        for i, c in enumerate(cand):
            cand_ids[i, : len(c)] = torch.tensor(c)
        rows = {}
        for ctx in dict.fromkeys(contexts):  # each distinct context once
            ctx_log_probs, (h, c) = self._net(torch.tensor([[*self._encode(ctx), SEP]]))
            log_first = ctx_log_probs[0, -1]  # p(first char | context), read off after SEP
            k = len(cand)
            state = (h.expand(-1, k, -1).contiguous(), c.expand(-1, k, -1).contiguous())
            later, _ = self._net(cand_ids[:, :-1], state)  # p(ch_i | ch_<i), i ≥ 2, and p(⊣)
            steps = later.gather(2, cand_ids[:, 1:, None]).squeeze(2)
            scores = log_first[cand_ids[:, 0]] + (steps * (cand_ids[:, 1:] != PAD)).sum(dim=1)
            rows[ctx] = torch.log_softmax(scores.double(), dim=0).numpy()
        return np.stack([rows[ctx] for ctx in contexts]) if contexts else np.empty((0, len(cand)))

    def log_prob_targets(self, corpus: PreparedCorpus, split: Split) -> np.ndarray:
        """log P_CRNN(w_t | c) at the positions of this class (NaN elsewhere)."""
        out = np.full(len(split), np.nan)
        positions = np.flatnonzero(split.class_ids == corpus.class_id(self.cls))
        if positions.size == 0:
            return out
        matrix = self.log_prob_matrix(self._contexts(corpus, split, positions))
        column = np.searchsorted(self.candidates, split.token_ids[positions])
        out[positions] = matrix[np.arange(len(positions)), column]
        return out

    # -- persistence (safetensors + JSON, never pickle) ----------------------------------
    def save(self, directory: Path, **extra: object) -> None:
        """Weights as safetensors, the rest as JSON (plus ``extra`` keys), each atomically."""
        assert self._net is not None
        weights = {k: v.contiguous() for k, v in self._net.state_dict().items()}
        write_bytes_atomic(directory / f"crnn-{self.cls}.safetensors", save(weights))
        meta = {
            "config": asdict(self.config),
            "cls": self.cls,
            "chars": self.chars,
            "candidates": self.candidates.tolist(),
            "strings": self._strings,
            "steps": self.steps,
            **extra,
        }
        write_json_atomic(directory / f"crnn-{self.cls}.json", meta, indent=0)

    @classmethod
    def load(cls, directory: Path, name: str) -> CharRNNClassModel:
        meta = json.loads((directory / f"crnn-{name}.json").read_text())
        model = cls(CharRNNConfig(**meta["config"]))
        model.cls, model.chars, model._strings = meta["cls"], meta["chars"], meta["strings"]
        model.candidates = np.asarray(meta["candidates"], dtype=np.int64)
        model.steps = int(meta.get("steps", 0))
        model._char_index = {ch: i for i, ch in enumerate(model.chars)}
        model._net = _CharLSTM(len(model.chars), model.config)
        model._net.load_state_dict(read_tensors(directory / f"crnn-{name}.safetensors", "CRNN"))
        model._net.eval()
        return model
