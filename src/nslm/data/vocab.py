"""The closed vocabulary of a prepared corpus, and what each type means to the classes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

UNK = "<unk>"
EOS = "<eos>"
# A byte LM's types: byte b is the one-character string chr(b) (its Latin-1 reading), so
# vocab.json stays readable and type id = byte value.
BYTE_TYPES = [chr(b) for b in range(256)]


@dataclass
class Vocabulary:
    """Types sorted by training count (most frequent first, ties by first appearance).

    The frequency order lets adaptive-softmax heads take contiguous id ranges as clusters.
    A closed vocabulary (:func:`byte_vocabulary`: the 256 byte values, id = byte) has no
    ``<unk>``; its ``unk_id`` is −1.
    """

    itos: list[str]
    counts: np.ndarray  # int64 training count per type
    stoi: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.stoi = {s: i for i, s in enumerate(self.itos)}
        if UNK not in self.stoi and self.itos != BYTE_TYPES:
            raise ValueError("a vocabulary must contain <unk>")

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def unk_id(self) -> int:
        return self.stoi.get(UNK, -1)

    @property
    def is_bytes(self) -> bool:
        """Whether this is the byte vocabulary (type id = byte value)."""
        return self.itos == BYTE_TYPES

    def encode(self, tokens: list[str]) -> np.ndarray:
        unk = self.unk_id
        ids = (self.stoi.get(t, unk) for t in tokens)
        return np.fromiter(ids, dtype=np.int32, count=len(tokens))

    def decode(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]

    @classmethod
    def from_train_tokens(cls, tokens: list[str]) -> Vocabulary:
        first_seen: dict[str, int] = {}
        counts: dict[str, int] = {}
        for position, token in enumerate(tokens):
            if token not in counts:
                first_seen[token] = position
                counts[token] = 0
            counts[token] += 1
        if UNK not in counts:
            first_seen[UNK] = len(tokens)
            counts[UNK] = 0
        itos = sorted(counts, key=lambda t: (-counts[t], first_seen[t]))
        return cls(itos=itos, counts=np.array([counts[t] for t in itos], dtype=np.int64))

    def to_json(self) -> dict:
        return {"itos": self.itos, "counts": self.counts.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> Vocabulary:
        return cls(itos=list(data["itos"]), counts=np.asarray(data["counts"], dtype=np.int64))


def byte_vocabulary(counts: np.ndarray) -> Vocabulary:
    """The 256 byte values in byte order (id = byte), with their training counts."""
    return Vocabulary(itos=list(BYTE_TYPES), counts=np.asarray(counts, dtype=np.int64))
