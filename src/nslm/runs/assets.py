"""A run's own copy of the model side of its corpus: ``RUN/assets.json`` and ``RUN/assets.npz``.

Why: besides its weights, a trained run needs what the prepared corpus knows about types and
classes (the vocabulary, each V_c, values and coordinates, the training counts, the unit map
of ``<convert>``). The run keeps them, written when training starts, so that ``predict`` and
``generate`` need no machine holding the raw corpus.

``assets.json`` (format ``nslm-run-assets``, version 1)::

    corpus, classes, class_rules    what the corpus was prepared from (as in config.json)
    class_names                     index = class id; 0 is "word"
    vocab_size, vocab_fingerprint   of RUN/vocab.json, which holds the type strings
    arrays_sha256                   of assets.npz's arrays, so a mixed-up pair is refused
    meta                            the prepared corpus's metadata without per-machine paths:
                                    class_rules, unit_map (what <convert> converts to),
                                    place_types and place_coords (V_c and (lat, lon) of the
                                    place classes), cache_key, source, classes_option

``assets.npz`` (read with ``allow_pickle=False``): ``vocab_counts`` (V,) the training count
of each type, and the non-zero (type, class) counts of the train split as three parallel
arrays ``pair_type_ids``, ``pair_class_ids``, ``pair_counts``
(:meth:`PreparedCorpus.type_class_counts`).

Everything else the model side uses is a function of these: V_c (``class_vocab``),
``type_values`` and ``type_coords`` are recomputed from the strings and the metadata exactly
as from the prepared corpus. :class:`RunCorpus` is that prepared corpus without its splits;
a split is loaded only when one is scored, from the prepared-corpus cache entry the run was
trained on or else by preparing the corpus again, and it is a one-line error when the corpus
cannot be found. A run without assets (written before they existed) reads its prepared
corpus instead; opening a run never writes into it.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from nslm.config import TrainConfig, class_rules_of
from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.locate import SPLITS, locate_corpus
from nslm.data.prepare import prepare_corpus, prepared_cache_root
from nslm.data.vocab import Vocabulary
from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.hooks import corpus_kind_of

ASSETS_JSON = "assets.json"
ASSETS_NPZ = "assets.npz"
FORMAT = "nslm-run-assets"
VERSION = 1
# Metadata that describes the preparing machine or the preparation, not the model's types.
_NOT_MODEL_META = ("files", "ambiguous_places", "class_names")
_ARRAYS = ("vocab_counts", "pair_type_ids", "pair_class_ids", "pair_counts")


def vocab_fingerprint(itos: list[str]) -> str:
    """micro.json's fingerprint of a vocabulary (``nslm.micro.classdata``'s, same digest)."""
    return hashlib.sha256("\n".join(itos).encode()).hexdigest()[:16]


def _arrays_digest(arrays: Mapping[str, np.ndarray]) -> str:
    # Over the array contents, not the file: np.savez stamps the time into the zip.
    h = hashlib.sha256()
    for name in _ARRAYS:
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _LazySplits(Mapping[str, Split]):
    """``corpus.splits``: the three splits, loaded together on the first access to one."""

    def __init__(self, load: Callable[[], Mapping[str, Split]]) -> None:
        self._load = load
        self._splits: Mapping[str, Split] | None = None

    def __getitem__(self, name: str) -> Split:
        if name not in SPLITS:
            raise KeyError(name)
        if self._splits is None:
            self._splits = self._load()
        return self._splits[name]

    def __contains__(self, name: object) -> bool:  # without loading anything
        return name in SPLITS

    def __iter__(self) -> Iterator[str]:
        return iter(SPLITS)

    def __len__(self) -> int:
        return len(SPLITS)

    def __repr__(self) -> str:
        return f"<splits {'loaded' if self._splits is not None else 'not loaded yet'}>"


class RunCorpus(PreparedCorpus):
    """The prepared corpus as a run keeps it: everything but the splits, which load lazily.

    It is a :class:`PreparedCorpus`, so ``vocab``, ``class_names``, ``class_vocab``,
    ``class_id``, ``class_rules``, ``type_values``, ``type_coords``, ``type_class_counts``
    and ``meta`` work as before, without the corpus. ``splits``/``train``/``valid``/``test``
    need the corpus (see the module docstring).
    """

    def __init__(
        self,
        vocab: Vocabulary,
        class_names: tuple[str, ...],
        meta: dict[str, Any],
        type_class_counts: np.ndarray,
        splits: Mapping[str, Split] | None = None,
    ) -> None:
        lazy = splits if splits is not None else _LazySplits(self._load_splits)
        super().__init__(vocab=vocab, class_names=class_names, splits=lazy, meta=meta)  # type: ignore[arg-type]
        type_class_counts.setflags(write=False)
        self._counts = type_class_counts

    def type_class_counts(self) -> np.ndarray:
        return self._counts

    @property
    def corpus_name(self) -> str:
        return str(self.meta["source"])

    @classmethod
    def from_prepared(cls, corpus: PreparedCorpus, cfg: TrainConfig) -> RunCorpus:
        """The run's view of a corpus already prepared (its splits stay loaded)."""
        return cls(
            corpus.vocab,
            corpus.class_names,
            _model_meta(corpus.meta, cfg),
            np.array(corpus.type_class_counts()),
            splits=corpus.splits,
        )

    def _load_splits(self) -> Mapping[str, Split]:
        source, classes = self.corpus_name, str(self.meta["classes_option"])
        key = self.meta.get("cache_key")
        entry = prepared_cache_root() / str(key) if key else None
        if entry is not None and (entry / "meta.json").is_file():
            # the cache entry the run was trained on: no raw text needed
            prepared = PreparedCorpus.load(entry)
        else:
            try:
                kind = corpus_kind_of(source)  # a corpus another system prepares
                if kind is not None:
                    kind.locate(source)
                else:
                    locate_corpus(source, download=False)
            except NslmError as exc:
                raise NslmError(f"scoring a split needs the corpus {source}: {exc}") from None
            rules = tuple(self.class_rules.values())
            prepared = prepare_corpus(source, classes, class_rules=rules, download=False)
        if prepared.vocab.itos != self.vocab.itos or prepared.class_names != self.class_names:
            raise NslmError(
                f"the corpus {source} now prepares another vocabulary or class set than the "
                "run was trained on; its splits cannot be scored with this run"
            )
        return prepared.splits


def _model_meta(meta: Mapping[str, Any], cfg: TrainConfig) -> dict[str, Any]:
    out = {k: v for k, v in meta.items() if k not in _NOT_MODEL_META}
    # what the corpus is prepared from, as the run's config says (the cache may predate keys)
    out.update(
        source=cfg.corpus,
        classes_option=cfg.classes,
        class_rules=[r.to_json() for r in class_rules_of(cfg)],
    )
    return out


def write_run_assets(run_dir: Path | str, cfg: TrainConfig, corpus: PreparedCorpus) -> None:
    """Write RUN/assets.npz, then RUN/assets.json (each atomic; the JSON commits the pair)."""
    run_dir = Path(run_dir)
    counts = corpus.type_class_counts()
    types, classes = np.nonzero(counts)
    arrays = {
        "vocab_counts": np.asarray(corpus.vocab.counts, dtype=np.int64),
        "pair_type_ids": types.astype(np.int32),
        "pair_class_ids": classes.astype(np.int16),
        "pair_counts": counts[types, classes].astype(np.int64),
    }
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    write_bytes_atomic(run_dir / ASSETS_NPZ, buffer.getvalue())
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "corpus": cfg.corpus,
        "classes": cfg.classes,
        "class_rules": list(cfg.class_rules),
        "class_names": list(corpus.class_names),
        "vocab_size": len(corpus.vocab),
        "vocab_fingerprint": vocab_fingerprint(corpus.vocab.itos),
        "arrays_sha256": _arrays_digest(arrays),
        "meta": _model_meta(corpus.meta, cfg),
    }
    write_json_atomic(run_dir / ASSETS_JSON, payload)


def read_run_assets(run_dir: Path | str) -> RunCorpus:
    """The :class:`RunCorpus` of RUN's assets; a missing or inconsistent file is one line."""
    run_dir = Path(run_dir)
    path = run_dir / ASSETS_JSON
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
        itos = json.loads((run_dir / "vocab.json").read_text(encoding="utf-8"))["itos"]
    except FileNotFoundError as exc:
        raise NslmError(f"{run_dir}: missing {Path(str(exc.filename)).name}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise NslmError(f"{run_dir}: unreadable assets.json or vocab.json ({exc!r})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise NslmError(f"{path}: not a run's assets (format is not {FORMAT!r})")
    if payload.get("version") != VERSION:
        raise NslmError(f"{path}: assets version {payload.get('version')}, expected {VERSION}")
    if payload.get("vocab_fingerprint") != vocab_fingerprint(itos):
        raise NslmError(f"{path} does not belong to {run_dir / 'vocab.json'} (other vocabulary)")
    try:
        with np.load(run_dir / ASSETS_NPZ, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in _ARRAYS}
    except (OSError, KeyError, ValueError) as exc:
        raise NslmError(f"{run_dir / ASSETS_NPZ}: unreadable ({type(exc).__name__})") from None
    if _arrays_digest(arrays) != payload.get("arrays_sha256"):
        raise NslmError(f"{run_dir / ASSETS_NPZ} does not match {path} (files of two runs?)")
    v, class_names = len(itos), tuple(payload["class_names"])
    counts = np.zeros((v, len(class_names)), dtype=np.int64)
    counts[arrays["pair_type_ids"], arrays["pair_class_ids"]] = arrays["pair_counts"]
    vocab = Vocabulary(itos=list(itos), counts=arrays["vocab_counts"])
    return RunCorpus(vocab, class_names, dict(payload["meta"]), counts)


def run_corpus(run_dir: Path | str, cfg: TrainConfig) -> RunCorpus:
    """RUN's corpus from its assets; a run without them reads its prepared corpus (opening a
    run never writes into it)."""
    run_dir = Path(run_dir)
    if (run_dir / ASSETS_JSON).is_file():
        corpus = read_run_assets(run_dir)
        said = (corpus.meta.get("source"), corpus.meta.get("classes_option"))
        if said != (cfg.corpus, cfg.classes):  # the vocabulary side of another run
            raise NslmError(
                f"{run_dir / ASSETS_JSON} is of corpus {said[0]!r} (classes {said[1]!r}) but "
                f"{run_dir / 'config.json'} says {cfg.corpus!r} ({cfg.classes!r}): files of "
                "two runs?"
            )
        return corpus
    prepared = prepare_corpus(cfg.corpus, cfg.classes, class_rules=class_rules_of(cfg))
    return RunCorpus.from_prepared(prepared, cfg)
