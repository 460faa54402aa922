"""Input embeddings of a fresh run: grounding (paper Table 6) and pretrained vectors (Table 5).

Both act on a freshly built model before training starts, after the seeded random
initialisation (neither draws random numbers, so the rest of the run's randomness is
unchanged). On ``--resume`` the checkpoint brings the same tensors back, so nothing here
runs again and the vector file need not exist any more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from nslm.config import TrainConfig
from nslm.errors import NslmError
from nslm.models.grounding import GroundedEmbedding, grounding_table
from nslm.models.pretrained import init_embedding, packaged_dim

INIT_VECTORS_FILE = "init_vectors.json"


def learnt_embedding(model: nn.Module) -> nn.Embedding:
    """The trainable input table of ``model``'s backbone (the learnt part if grounded)."""
    embed = getattr(model.backbone, "embed", None)
    if isinstance(embed, GroundedEmbedding):
        return embed.trainable
    if not isinstance(embed, nn.Embedding):
        raise NslmError("this backbone has no input embedding to initialise")
    return embed


def peek_dim(path: Path) -> int:
    """The vectors' dimension from the first line or two, to refuse a mismatch before the
    whole (possibly multi-GB) file is read."""
    import lzma

    if packaged_dim(str(path)) is not None:
        return packaged_dim(str(path))
    path = Path(path)
    if not path.is_file():
        raise NslmError(f"vector file not found: {path}")
    opener = lzma.open if path.suffix == ".xz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig") as handle:  # as read_vectors reads
            for number, line in enumerate(handle, start=1):
                parts = line.rstrip("\n").rstrip(" ").split(" ")
                if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    return int(parts[1])  # word2vec header: count, dimension
                if len(parts) < 2:  # a word without values: no dimension to compare
                    raise NslmError(f"{path}:{number}: expected 'word v1 … vd'")
                return len(parts) - 1
    except (UnicodeDecodeError, lzma.LZMAError, EOFError):
        raise NslmError(f"{path}: not a UTF-8 text vector file") from None
    raise NslmError(f"{path}: no vectors in file")


def coverage_report(corpus, found_rows: np.ndarray, path: Path, dim: int) -> dict[str, Any]:
    """init_vectors.json: overall coverage and per class (class types are the paper's focus)."""
    total = len(found_rows)
    found = int(found_rows.sum())
    by_class = {}
    for c, name in enumerate(corpus.class_names[1:], start=1):
        members = corpus.class_vocab(c)
        hit = int(found_rows[members].sum())
        by_class[name] = {
            "found": hit,
            "total": len(members),
            "coverage": hit / len(members) if len(members) else 0.0,
        }
    return {
        "path": str(path),
        "found": found,
        "total": total,
        "coverage": found / total if total else 0.0,
        "dim": dim,
        "by_class": by_class,
    }


def init_from_vectors(cfg: TrainConfig, model: nn.Module, corpus) -> dict[str, Any]:
    """Copy the vectors of ``cfg.init_vectors`` into the input embedding; the coverage report.

    A dimension other than the learnt embedding's (``emb_size``; the Transformer's
    ``hidden_size``) is a one-line error, raised before the file is read in full.
    """
    named = packaged_dim(cfg.init_vectors) is not None
    path = Path(cfg.init_vectors) if named else Path(cfg.init_vectors).expanduser()
    embedding = learnt_embedding(model)
    dim = peek_dim(path)
    if dim != embedding.embedding_dim:
        raise NslmError(
            f"{path}: vectors have {dim} dimensions but emb_size is {embedding.embedding_dim}; "
            f"set emb_size = {dim}"
        )
    before = embedding.weight.detach().clone()
    coverage = init_embedding(embedding, corpus.vocab.itos, path)
    # Which rows took a vector: init_embedding counts them but does not say which.
    itos = corpus.vocab.itos
    changed = (embedding.weight.detach()[: len(itos)] != before[: len(itos)]).any(dim=1).numpy()
    report = coverage_report(corpus, changed, path, coverage.dim)
    report["found"] = coverage.found  # a vector equal to the random row is still "found"
    report["coverage"] = coverage.fraction
    return report


def prepare_embeddings(
    cfg: TrainConfig, model: nn.Module, corpus, *, fresh: bool = True
) -> dict[str, Any] | None:
    """Ground and/or initialise ``model``'s input embedding.

    Returns the vector coverage report (for ``RUN/init_vectors.json``) or None. A resumed
    run (``fresh=False``) is grounded again (cheap, and equal to what its checkpoint holds)
    but does not read the vector file: its checkpoint holds the trained rows.
    """
    if cfg.grounded:
        embed = model.backbone.embed
        if not isinstance(embed, GroundedEmbedding):
            raise NslmError("config key 'grounded' needs model = 'lstm' or 'awd'")
        embed.set_fixed(grounding_table(corpus))
    if not cfg.init_vectors or not fresh:
        return None
    return init_from_vectors(cfg, model, corpus)


def describe(report: dict[str, Any]) -> str:
    share = f"{report['coverage']:.1%}"
    return (
        f"init-vectors: {report['found']:,} of {report['total']:,} types ({share}) have "
        f"vectors, d={report['dim']}"
    )
