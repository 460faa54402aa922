"""A prepared corpus: token ids, class ids, values and article ids as numpy arrays.

This is what every model, micro-model and evaluator in nslm consumes. It is saved as
``.npz`` arrays (loaded with ``allow_pickle=False``) and JSON, never as a pickle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nslm.data.custom import ClassRule
from nslm.data.numbers import NUMBER_CLASSES, can_be, number_value
from nslm.data.places import PLACE_CLASSES
from nslm.data.split import SPLIT_ARRAYS, Split
from nslm.data.vocab import Vocabulary


@dataclass
class PreparedCorpus:
    """The prepared corpus: vocabulary, class names and the three splits."""

    vocab: Vocabulary
    class_names: tuple[str, ...]  # index = class id; 0 is "word"
    splits: dict[str, Split]
    meta: dict = field(default_factory=dict)

    @property
    def train(self) -> Split:
        return self.splits["train"]

    @property
    def valid(self) -> Split:
        return self.splits["valid"]

    @property
    def test(self) -> Split:
        return self.splits["test"]

    def class_id(self, name: str) -> int:
        name = name.strip("<>")
        try:
            return self.class_names.index(name)
        except ValueError:
            from nslm.errors import NslmError

            known = ", ".join(self.class_names[1:])
            raise NslmError(f"unknown class {name!r}; this corpus has: {known}") from None

    def class_vocab(self, cls: str | int) -> np.ndarray:
        """V_c: the in-vocabulary type ids that may carry class ``cls`` (sorted)."""
        name = self.class_names[cls] if isinstance(cls, int) else cls.strip("<>")
        if name in NUMBER_CLASSES:
            keep = [i for i, t in enumerate(self.vocab.itos) if can_be(name, t)]
        elif name in PLACE_CLASSES:
            kinds = self.meta.get("place_types", {})
            keep = [i for i, t in enumerate(self.vocab.itos) if kinds.get(t) == name]
        elif (rule := self.class_rules.get(name)) is not None:
            claimed = self._builtin_class_types()
            keep = [
                i for i, t in enumerate(self.vocab.itos) if rule.matches(t) and i not in claimed
            ]
        else:
            raise KeyError(name)
        return np.asarray(keep, dtype=np.int64)

    @property
    def class_rules(self) -> dict[str, ClassRule]:
        """The user-defined classes of this corpus, by name."""
        return {
            r["name"]: ClassRule(r["name"], r["pattern"]) for r in self.meta.get("class_rules", [])
        }

    def _builtin_class_types(self) -> set[int]:
        """Type ids that a built-in class of this corpus can claim (they win over user rules)."""
        claimed: set[int] = set()
        for name in self.class_names[1:]:
            if name in NUMBER_CLASSES or name in PLACE_CLASSES:
                claimed.update(self.class_vocab(name).tolist())
        return claimed

    def type_values(self) -> np.ndarray:
        """The numeric value of every number type in the vocabulary, NaN for other types."""
        out = np.full(len(self.vocab), np.nan)
        for i, t in enumerate(self.vocab.itos):
            if t[0].isdigit() and can_be("range", t):
                out[i] = number_value(t)
        return out

    def type_class_counts(self) -> np.ndarray:
        """(V, C) int64: how often each type occurs as each class in the train split.

        The class is the modelling one (``Split.class_ids``). These counts are all that the
        class unigrams, the ``freq`` metric, π(c | w) of the single-task NSLM and the HNLM's
        top level need of the train split, so a run can keep them instead of the corpus.
        """
        cached = self.__dict__.get("_type_class_counts")
        if cached is None:
            train, n_cls = self.train, len(self.class_names)
            pairs = train.token_ids.astype(np.int64) * n_cls + train.class_ids.astype(np.int64)
            cached = np.bincount(pairs, minlength=len(self.vocab) * n_cls)
            cached = cached.reshape(len(self.vocab), n_cls).astype(np.int64)
            cached.setflags(write=False)  # shared by every caller
            self.__dict__["_type_class_counts"] = cached
        return cached

    def type_coords(self) -> np.ndarray:
        """(lat, lon) of every place type in the vocabulary, NaN for other types."""
        out = np.full((len(self.vocab), 2), np.nan)
        for name, (lat, lon) in self.meta.get("place_coords", {}).items():
            i = self.vocab.stoi.get(name)
            if i is not None:
                out[i] = (lat, lon)
        return out

    # -- persistence ---------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, split in self.splits.items():
            np.savez(directory / f"{name}.npz", **{k: getattr(split, k) for k in SPLIT_ARRAYS})
        (directory / "vocab.json").write_text(json.dumps(self.vocab.to_json()))
        meta = {**self.meta, "class_names": list(self.class_names)}
        (directory / "meta.json").write_text(json.dumps(meta, indent=1, sort_keys=True))

    @classmethod
    def load(cls, directory: Path) -> PreparedCorpus:
        meta = json.loads((directory / "meta.json").read_text())
        vocab = Vocabulary.from_json(json.loads((directory / "vocab.json").read_text()))
        splits = {}
        for name in ("train", "valid", "test"):
            with np.load(directory / f"{name}.npz", allow_pickle=False) as arrays:
                fields = {k: arrays[k] for k in SPLIT_ARRAYS}
            splits[name] = Split(name=name, unk_id=vocab.unk_id, **fields)
        return cls(vocab=vocab, class_names=tuple(meta["class_names"]), splits=splits, meta=meta)
