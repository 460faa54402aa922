"""``nslm eval RUN --crnn``: the paper's CRNN column.

At a class position the CRNN scores the (class, word) pair like Eq. 3, with a character
LSTM in place of the HNLM's neural within-class softmax:

    P_CRNN(w_t | h) = P(c_t | h) · P_char(w_t | c_t) / Σ_{w ∈ V_c} P_char(w | c_t)

P(c | h) is the HNLM's top level (the same factor as the NSLM's, Eq. 4; for a single-task
run, Table 8, the NNLM's sum over V_c) and P_char the chain-rule probability of the token's
characters and an end mark under class c's own LSTM (:mod:`nslm.mixtures.char_rnn`). At a
word position it is the top level's word probability (the NSLM's, too).

The per-class LSTMs are trained on the train split's tokens of their class the first time
and kept as safetensors + JSON in a directory (default ``RUN/crnn``); a later eval reuses
them when the training data and the configuration are unchanged (a fingerprint says so).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from nslm.data.corpus import Split
from nslm.evaluation.columns import ColumnSource
from nslm.mixtures.char_rnn import CharRNNClassModel, CharRNNConfig
from nslm.scores.mixture import nslm_log_probs
from nslm.scores.passes import Scorer


def fingerprint(corpus, cls: str, config: CharRNNConfig) -> str:
    """What a trained CRNN depends on: its config, V_c and the train split's class tokens."""
    train = corpus.train
    digest = hashlib.sha256()
    digest.update(json.dumps([cls, asdict(config)], sort_keys=True).encode())
    members = corpus.class_vocab(cls)
    digest.update(json.dumps([corpus.vocab.itos[i] for i in members]).encode())
    cid = corpus.class_id(cls)
    at = np.flatnonzero(train.class_ids == cid)
    digest.update(at.astype(np.int64).tobytes())
    digest.update(train.token_ids[at].astype(np.int64).tobytes())
    if config.context == "previous":  # the contexts come from the whole article stream
        digest.update(train.rule_class_ids.astype(np.int64).tobytes())
        digest.update(train.article_ids.astype(np.int64).tobytes())
    return digest.hexdigest()


def load_or_fit(
    corpus,
    cls: str,
    directory: Path,
    config: CharRNNConfig,
    progress: Callable[[str], None] | None = None,
) -> tuple[CharRNNClassModel, bool]:
    """Class ``cls``'s CRNN from ``directory`` if its fingerprint matches, else trained and
    saved there; (model, whether it was loaded)."""
    want = fingerprint(corpus, cls, config)
    meta_path = directory / f"crnn-{cls}.json"
    if meta_path.is_file() and (directory / f"crnn-{cls}.safetensors").is_file():
        try:
            found = json.loads(meta_path.read_text(encoding="utf-8")).get("fingerprint")
        except (OSError, ValueError):  # unreadable, not UTF-8, not JSON: train it afresh
            found = None
        if found == want:
            return CharRNNClassModel.load(directory, cls), True
    if progress:
        n = int((corpus.train.class_ids == corpus.class_id(cls)).sum())
        progress(f"training the CRNN of <{cls}> on {n:,} train tokens")
    model = CharRNNClassModel(config).fit(corpus, cls)
    model.save(directory, fingerprint=want)
    return model, False


class CRNNSource(ColumnSource):
    """A :class:`~nslm.evaluation.columns.ColumnSource` adding the "CRNN" column."""

    def __init__(
        self,
        scorer: Scorer,
        corpus,
        directory: Path,
        config: CharRNNConfig | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.scorer = scorer
        self.corpus = corpus
        self.directory = Path(directory)
        self.config = config or CharRNNConfig()
        self.progress = progress
        self._models: dict[str, CharRNNClassModel] | None = None
        self._memo: dict[tuple[str, int], np.ndarray] = {}
        self.loaded_from_disk: list[str] = []

    def models(self) -> dict[str, CharRNNClassModel]:
        """One CRNN per class the run has a tag for (trained or loaded on first use)."""
        if self._models is None:
            corpus = self.corpus
            tagged = self.scorer.classes.tagged
            self._models = {}
            for cid, name in enumerate(corpus.class_names):
                if cid and tagged[cid]:
                    model, reused = load_or_fit(
                        corpus, name, self.directory, self.config, self.progress
                    )
                    self._models[name] = model
                    if reused:
                        self.loaded_from_disk.append(name)
        return self._models

    def char_log_probs(self, split: Split) -> np.ndarray:
        """log P_char(w_t | c_t), normalised over V_c, at class positions (NaN elsewhere)."""
        corpus = self.corpus
        out = np.full(len(split), np.nan)
        for model in self.models().values():
            lp = model.log_prob_targets(corpus, split)
            hit = ~np.isnan(lp)
            out[hit] = lp[hit]
        return out

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict:
        key = (name, len(split))
        if key not in self._memo:
            got = self.scorer.score(split)
            crnn = self.char_log_probs(split)
            self._memo[key] = nslm_log_probs(got.top, split.class_ids, crnn, got.neural)
        return {"CRNN": self._memo[key]}
