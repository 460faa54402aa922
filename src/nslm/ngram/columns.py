"""N-gram columns for the per-class tables: a modified-KN n-gram and the n-gram NSLM (Eq. 4).

``nslm eval RUN --ngram N`` adds two columns to every table of the run:

* ``N-gram``: interpolated modified Kneser-Ney of order N over the run's prepared train split,
  the stream ``nslm ngram build`` counts (``<eos>`` as ``</s>``, every line a sentence that
  starts with ``<s>``). Position t gets log P(w_t | the N−1 previous tokens of its line).
  The history is cut at ``<eos>`` while the LSTM carries its state across lines, but both
  score the same positions: every position of the split but 0 (the evaluator's contract).
* ``N-gram NSLM``: Eq. 4 with the n-gram as the neural factor. A second n-gram, over the
  class-tagged stream (class tokens replaced by their tags in history and target alike),
  gives P(c | h) at class positions and P(w | h) at word positions; a class position is then
  scored by its (class, word) pair P(c | h) · P_MM(w | c, w_prev), as the neural NSLM is.
  A class without a micro-model uses the class unigram P(w | c) (add-one over V_c): the
  class n-gram of Brown et al. (1992), the n-gram's counterpart of the HNLM's within-class
  softmax (Eq. 3), so the model stays a complete distribution over the vocabulary.
  Out-of-vocabulary class tokens are ``<unk>`` words, as for every model (docs/data.md,
  "Vocabulary and class vocabularies").

Both models are saved under a cache directory (default ``RUN/ngram/``) the way ``nslm ngram
build`` writes them (``NgramModel.save``: npz arrays and JSON, nothing pickled), one
directory per order and stream, and reused when their recorded corpus cache key, stream,
order and method match; ``nslm ngram eval DIR`` reads them too.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nslm.data.corpus import PreparedCorpus, Split
from nslm.errors import NslmError
from nslm.evaluation.columns import ColumnSource
from nslm.micro.model import MicroModel
from nslm.micro.pipeline import micro_log_probs
from nslm.ngram.build import Stream, build_model, prepared_stream
from nslm.ngram.counting import check_order
from nslm.ngram.model import EOS, NgramModel
from nslm.perplexity import perplexity
from nslm.scores.distribution import FullDistribution, position_in
from nslm.scores.mixture import nslm_log_probs

if TYPE_CHECKING:
    from nslm.runs.load import LoadedRun

# lmplz's --discount_fallback, used only for an order whose count-of-counts cannot give the
# closed-form discounts (a tiny custom corpus); WikiText-2 never needs it.
FALLBACK = (0.5, 1.0, 1.5)
KN = "kneser-ney"  # what estimate_kneser_ney records as the model's method


def column_names(order: int) -> tuple[str, str]:
    """The two columns' names: ("5-gram", "5-gram NSLM") for order 5."""
    return f"{order}-gram", f"{order}-gram NSLM"


def tag_ids(corpus: PreparedCorpus, members: dict[int, np.ndarray]) -> np.ndarray:
    """Stream id of each class's tag: words keep their vocabulary ids, the tags follow.

    −1 for c = 0 and for a class with an empty V_c: no token can carry it, and a tag the
    model never sees would still get a uniform unigram share, mass no word could claim.
    """
    out = np.full(len(corpus.class_names), -1, dtype=np.int64)
    nonempty = [c for c in range(1, len(corpus.class_names)) if len(members[c])]
    out[nonempty] = len(corpus.vocab) + np.arange(len(nonempty))
    return out


def tagged_stream(corpus: PreparedCorpus, split: Split, tags: np.ndarray) -> Stream:
    """``split`` with each in-vocabulary class token replaced by its class tag."""
    base = prepared_stream(corpus, split)
    cls = split.class_ids.astype(np.int64)
    ids = np.where(cls > 0, tags[cls], base.ids)
    if (ids < 0).any():
        raise NslmError("a class token of a class with an empty vocabulary: corpus mismatch?")
    names = [f"<{corpus.class_names[c]}>" for c in np.flatnonzero(tags >= 0)]
    return Stream(ids=ids, itos=[*base.itos, *names], eos_id=base.eos_id, unk_id=base.unk_id)


def stream_ids(model: NgramModel, stream: Stream) -> np.ndarray:
    """The stream in the model's ids, matched by string (a cached model may differ in order)."""
    return model.map_vocabulary(stream.itos, eos_token=EOS)[stream.ids]


def class_unigram(corpus: PreparedCorpus, cls: int, members: np.ndarray) -> np.ndarray:
    """log P(w | c) over V_c from the train split's class-c tokens, add-one smoothed."""
    train = corpus.train
    counts = np.bincount(train.token_ids[train.class_ids == cls], minlength=len(corpus.vocab))
    smoothed = counts[members].astype(np.float64) + 1.0
    return np.log(smoothed / smoothed.sum())


class NgramColumns(ColumnSource):
    """A :class:`~nslm.evaluation.columns.ColumnSource`: the N-gram and N-gram NSLM columns.

    ``micro`` None leaves the NSLM column (and its tagged model) out.
    """

    def __init__(
        self,
        corpus: PreparedCorpus,
        order: int,
        micro: dict[str, MicroModel] | None,
        cache_dir: Path | None,
        source: dict | None = None,
    ) -> None:
        check_order(order)
        self.corpus = corpus
        self.order = order
        self.micro = micro
        self.cache_dir = cache_dir
        self.source = dict(source or {})  # corpus name and classes, as nslm ngram build records
        self.names = column_names(order)
        self.build_seconds: dict[str, float] = {}
        self.loaded_from_cache: dict[str, bool] = {}
        self._memo: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self.word = self._model("prepared", lambda: prepared_stream(corpus, "train"))
        if micro is None:
            return
        n_cls = len(corpus.class_names)
        self.members = {c: corpus.class_vocab(c) for c in range(1, n_cls)}
        self.tags = tag_ids(corpus, self.members)
        self.tagged = self._model("tagged", lambda: tagged_stream(corpus, corpus.train, self.tags))
        covered = {corpus.class_names.index(name) for name in micro}
        self.unigram = {
            c: class_unigram(corpus, c, self.members[c])
            for c in np.flatnonzero(self.tags >= 0).tolist()
            if c not in covered
        }

    # -- models ------------------------------------------------------------------------------

    def _model(self, stream: str, make: Callable[[], Stream]) -> NgramModel:
        """The cached model of this stream if it matches this corpus, else a fresh build."""
        key = self.corpus.meta.get("cache_key")
        path = None if self.cache_dir is None else self.cache_dir / f"{self.order}-gram-{stream}"
        if path is not None and key is not None and (path / "model.json").is_file():
            try:
                model = NgramModel.load(path)
            except NslmError:
                model = None  # damaged: rebuild over it
            meta = {} if model is None else model.meta
            if (
                model is not None
                and model.order == self.order
                and meta.get("cache_key") == key
                and meta.get("stream") == stream
                and meta.get("method") == KN
            ):
                self.loaded_from_cache[stream] = True
                self.build_seconds[stream] = float(meta.get("build_seconds", math.nan))
                return model
        started = time.perf_counter()
        model = build_model(make(), self.order, "kn", discount_fallback=FALLBACK)
        model.meta.update(self.source, stream=stream, cache_key=key)
        model.meta["build_seconds"] = round(time.perf_counter() - started, 3)
        self.build_seconds[stream] = model.meta["build_seconds"]
        self.loaded_from_cache[stream] = False
        if path is not None:
            try:
                model.save(path)
            except (OSError, NslmError) as exc:  # a read-only run dir must not stop the eval
                print(f"warning: n-gram cache not written ({exc})", file=sys.stderr)
        return model

    # -- per-position scores -----------------------------------------------------------------

    def score(
        self, name: str, split: Split, columns: dict[str, np.ndarray], table: str = ""
    ) -> dict[str, np.ndarray]:
        """The ColumnSource hook: memoised per split name and length (a head is a prefix)."""
        memo = (name, len(split))
        if memo not in self._memo:
            self._memo[memo] = self.columns(split)
        return dict(self._memo[memo])

    def columns(self, split: Split) -> dict[str, np.ndarray]:
        """{"N-gram": …, "N-gram NSLM": …} for ``split``: float64, NaN at position 0."""
        word = self.word.score_ids(stream_ids(self.word, prepared_stream(self.corpus, split)))
        out = {self.names[0]: word}
        if self.micro is not None:
            out[self.names[1]] = self.nslm_log_probs(split)
        return out

    def class_log_probs(self, split: Split) -> np.ndarray:
        """log P(c_t | h) at class positions, log P(w_t | h) at word positions (tagged n-gram)."""
        stream = tagged_stream(self.corpus, split, self.tags)
        return self.tagged.score_ids(stream_ids(self.tagged, stream))

    def nslm_log_probs(self, split: Split) -> np.ndarray:
        """Eq. 4 per position, with the tagged n-gram's P(c | h) as the class factor."""
        top = self.class_log_probs(split)
        mm = micro_log_probs(self.micro or {}, split)
        # Classes without a micro-model: P(c | h) · P(w | c), the class n-gram (Eq. 3's shape).
        fallback = np.full(len(split), np.nan)
        cls = split.class_ids
        for c, logp in self.unigram.items():
            at = np.flatnonzero(cls == c)
            found, where = position_in(self.members[c], split.token_ids[at])
            # a type outside V_c gets probability 0, as the HNLM gives it
            fallback[at] = top[at] + np.where(found, logp[where], -np.inf)
        return nslm_log_probs(top, cls, mm, fallback)

    # -- the full next-token distribution (sum-to-one checks) --------------------------------

    def distribution_at(self, split: Split, positions: np.ndarray) -> FullDistribution:
        """The n-gram NSLM's distribution over every type at ``positions`` (each > 0)."""
        if self.micro is None:
            raise NslmError("the n-gram NSLM needs micro-models")
        positions = np.asarray(positions, dtype=np.int64)
        ids = stream_ids(self.tagged, tagged_stream(self.corpus, split, self.tags))
        v, n_cls = len(self.corpus.vocab), len(self.corpus.class_names)
        vocab_in_model = self.tagged.map_vocabulary(prepared_stream(self.corpus, split).itos, EOS)
        word = np.empty((len(positions), v))
        tag = np.full((len(positions), n_cls), -np.inf)
        tagged = np.flatnonzero(self.tags >= 0)
        tag_in_model = self.tagged.encode([f"<{self.corpus.class_names[c]}>" for c in tagged])
        keep = self.order - 1  # the last N−1 tokens are the whole context (fewer at the start)
        with np.errstate(divide="ignore"):
            for row, p in enumerate(positions.tolist()):
                dist = self.tagged.distribution(ids[max(0, p - keep) : p].tolist())
                word[row] = np.log(dist[vocab_in_model])
                tag[row, tagged] = np.log(dist[tag_in_model])
        within: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        source: dict[int, str] = {}
        for c in tagged.tolist():
            name = self.corpus.class_names[c]
            if name in self.micro:
                mm = self.micro[name]
                ctx = mm.cls.context(split, positions, mm.context)
                within[c] = (mm.cls.candidates.vocab_ids, mm.log_prob(ctx))
                source[c] = mm.label
            else:
                rows = np.broadcast_to(self.unigram[c], (len(positions), len(self.unigram[c])))
                within[c] = (self.members[c], rows.copy())
                source[c] = "class-unigram"
        return FullDistribution(word, tag, within, source)


def ngram_source(
    order: int,
    *,
    cache_dir: Path | None = None,
    micro: dict[str, MicroModel] | None = None,
    with_nslm: bool = True,
) -> Callable[[LoadedRun], NgramColumns]:
    """A factory for ``eval_tables(extra=…)`` / ``evaluate_run(extra=…)``.

    ``cache_dir`` defaults to ``RUN/ngram``; ``micro`` to the run's ``micro.json`` (give it
    when already loaded). ``with_nslm=False`` builds only the word n-gram.
    """
    check_order(order)

    def make(loaded: LoadedRun) -> NgramColumns:
        models = micro
        if with_nslm and models is None:
            from nslm.runs.micro import load_run_micro

            models = load_run_micro(loaded)
        cache = cache_dir if cache_dir is not None else Path(loaded.run_dir) / "ngram"
        source = {"corpus": loaded.cfg.corpus, "classes": loaded.cfg.classes}
        return NgramColumns(loaded.corpus, order, models if with_nslm else None, cache, source)

    return make


def ngram_global(columns: NgramColumns, split: Split) -> float:
    """Global perplexity of the word n-gram on ``split`` (every position but 0)."""
    word = columns.columns(split)[columns.names[0]]
    return perplexity(word)
