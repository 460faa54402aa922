"""Grounded class-token embeddings (paper Table 6, "Grounding with External Knowledge").

The paper appends to the word-class embeddings "values for numbers and longitude/latitude
coordinates for geographic locations" and makes those dimensions non-trainable. Here every
type's input vector is ``[trainable (emb_size) | fixed (3)]`` with the fixed part

* ``magnitude`` = sign(v) · log10(1 + |v|) / 10, clipped to [−1, 1], for the types of a
  number class (v from :meth:`PreparedCorpus.type_values`);
* ``lat / 90`` and ``lon / 180`` for the types of a place class
  (:meth:`PreparedCorpus.type_coords`);
* zeros for every other type and for a family the corpus does not tag.

Why this scaling: every fixed dimension lands in [−1, 1], the range an LSTM's input weights
start from, so none saturates a gate. Coordinates have natural bounds. Number values span
0 … 1.5·10⁹ in WikiText-2, so a linear scale would squash all years into one point near 0
while one outlier sits at 1; the log keeps orders of magnitude apart (7 → 0.09, 1990 → 0.33,
10⁶ → 0.6). The constant 10 (not the corpus maximum) makes a type's value independent of
which outliers a corpus happens to hold: any number below 10¹⁰ is inside the range. The
price: neighbouring years differ by ~2·10⁻⁵, so the grounding tells the LSTM magnitudes
more than exact years (the paper reports a small gain, 9.2% on numbers).

The fixed part is a buffer, not a parameter: no optimizer sees it and no gradient reaches
it, but it is in the state dict, so it travels in ``model.safetensors`` and checkpoints.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from nslm.data.numbers import NUMBER_CLASSES
from nslm.data.places import PLACE_CLASSES

GROUND_DIMS = ("magnitude", "lat", "lon")
LOG_SCALE = 10.0  # log10 of the largest magnitude that stays below 1 (10^10)


def scale_number(value: np.ndarray | float) -> np.ndarray:
    """sign(v) · log10(1 + |v|) / 10, clipped to [−1, 1]."""
    v = np.asarray(value, dtype=np.float64)
    return np.clip(np.sign(v) * np.log10(1.0 + np.abs(v)) / LOG_SCALE, -1.0, 1.0)


def scale_coords(coords: np.ndarray) -> np.ndarray:
    """(lat, lon) in degrees → (lat / 90, lon / 180)."""
    return np.asarray(coords, dtype=np.float64) / np.array([90.0, 180.0])


def grounding_table(corpus) -> np.ndarray:
    """The fixed dimensions of every type of ``corpus``'s vocabulary: (V, 3) float32.

    Only types of a class the corpus tags are grounded: a places-only corpus leaves numbers
    at zero (they are plain words there), and vice versa.
    """
    v = len(corpus.vocab)
    out = np.zeros((v, len(GROUND_DIMS)), dtype=np.float64)
    tagged = set(corpus.class_names[1:])
    number_types = [corpus.class_vocab(c) for c in NUMBER_CLASSES if c in tagged]
    if number_types:
        ids = np.unique(np.concatenate(number_types))
        values = corpus.type_values()[ids]
        ok = np.isfinite(values)
        out[ids[ok], 0] = scale_number(values[ok])
    if any(c in tagged for c in PLACE_CLASSES):
        coords = corpus.type_coords()
        ok = np.isfinite(coords).all(axis=1)
        out[ok, 1:] = scale_coords(coords[ok])
    return out.astype(np.float32)


class GroundedEmbedding(nn.Module):
    """A trainable ``nn.Embedding`` (emb_size) followed by fixed, non-trainable dimensions.

    ``weight`` is the trainable table, so weight tying and pretrained-vector initialisation
    act on the learnt part only; ``embedding_dim`` is the full width the LSTM reads. A tied
    model swaps ``trainable`` for the softmax's adaptive input (models/adaptive_input.py).
    """

    def __init__(
        self, vocab_size: int, emb_size: int, n_fixed: int = len(GROUND_DIMS), sparse: bool = False
    ) -> None:
        super().__init__()
        self.trainable = nn.Embedding(vocab_size, emb_size, sparse=sparse)
        # Persistent: saved with the weights, so a loaded run needs no corpus to rebuild it.
        self.register_buffer("fixed", torch.zeros(vocab_size, n_fixed))
        self.embedding_dim = emb_size + n_fixed

    @property
    def weight(self) -> nn.Parameter:
        return self.trainable.weight

    def set_fixed(self, table: np.ndarray | Tensor) -> None:
        table = torch.as_tensor(np.asarray(table), dtype=self.fixed.dtype)
        if table.shape != self.fixed.shape:
            raise ValueError(f"grounding table {tuple(table.shape)} != {tuple(self.fixed.shape)}")
        self.fixed.copy_(table)

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.trainable(x), self.fixed[x]], dim=-1)


def make_embedding(
    vocab_size: int, emb_size: int, grounded: bool, sparse: bool = False
) -> nn.Module:
    """The input embedding of the LSTM backbones: plain, or grounded (see module doc);
    ``sparse``: its gradient holds only the rows a batch used (training/optim.py)."""
    if grounded:
        return GroundedEmbedding(vocab_size, emb_size, sparse=sparse)
    return nn.Embedding(vocab_size, emb_size, sparse=sparse)


def input_width(emb_size: int, grounded: bool) -> int:
    return emb_size + (len(GROUND_DIMS) if grounded else 0)
