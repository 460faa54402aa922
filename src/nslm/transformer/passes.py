"""One text through the Transformer, once: its corpus tokens with classes, its Transformer
tokens, their scores, and where each corpus token lies among them; kept on disk.

:func:`score_text` prepares the plain text with the corpus's rules
(:func:`nslm.data.fixed_vocab.prepare_text`), tokenizes it with the Transformer's tokenizer,
runs the pass (:func:`nslm.transformer.backbone.score_ids`) and keeps the arrays in a
safetensors file named by the text's name and a hash of everything they depend on (the
checkpoint, the text, the window, the members' token sets), so a later command reads them
instead of recomputing, whatever it names the text. ``max_tokens`` scores a prefix: the
text is cut at the last line break before that many Transformer tokens.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nslm.data.corpus import PreparedCorpus
from nslm.data.fixed_vocab import TextSplit, prepare_text
from nslm.files.atomic import write_bytes_atomic, write_json_atomic
from nslm.files.tensors import read_tensors
from nslm.transformer.alignment import char_spans, token_ranges
from nslm.transformer.backbone import TokenScores, score_after, score_ids
from nslm.transformer.candidates import Members

FORMAT = 1


@dataclass
class TextPass:
    """A text scored by the Transformer (see the module docstring)."""

    name: str
    plain: str
    text: TextSplit  # the corpus tokens, with classes
    ids: np.ndarray  # (N,) Transformer token ids
    offsets: np.ndarray  # (N, 2) their character spans in ``plain``
    ranges: np.ndarray  # (T, 2) Transformer tokens of each corpus token; −1 where not spelt
    scores: TokenScores

    @property
    def tokens(self) -> int:
        return len(self.ids)


def _link_as(kept: Path, path: Path) -> None:
    """A pass kept under another key, linked under ``path`` too (with its JSON beside it)
    where the file system allows; otherwise it is read where it is."""
    import os

    for source, target in ((kept, path), (kept.with_suffix(".json"), path.with_suffix(".json"))):
        if source.is_file() and not target.exists():
            try:
                os.link(source, target)
            except OSError:
                return


def cut_prefix(plain: str, offsets: np.ndarray, max_tokens: int) -> str:
    """``plain`` cut after the last line break that ends within its first ``max_tokens``
    Transformer tokens (the whole text if it is shorter)."""
    if not max_tokens or max_tokens >= len(offsets):
        return plain
    limit = int(offsets[max_tokens][0])
    cut = plain.rfind("\n", 0, limit)
    return plain[: cut + 1] if cut > 0 else plain[:limit]


def checkpoint_identity(source: str) -> str:
    """What names a checkpoint in a pass's key: its file's name and size, not its path, so
    that the same model installed under another virtual environment finds its kept passes."""
    path = Path(source)
    return f"{path.name}:{path.stat().st_size}" if path.is_file() else source


def pass_key(
    source: str,
    plain: str,
    settings: dict[str, Any],
    members: Members | None,
    identity: bool = True,
) -> str:
    """The key a pass is kept under; ``identity=False``: the key of passes kept before the
    checkpoint was named by :func:`checkpoint_identity` (by its path)."""
    named = checkpoint_identity(source) if identity else source
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": FORMAT, "source": named, **settings}).encode())
    digest.update(plain.encode("utf-8", errors="surrogatepass"))
    if members is not None:
        digest.update(np.asarray(members.continuing).tobytes())
        digest.update(np.asarray(members.extra).tobytes())
    return digest.hexdigest()[:16]


def score_text(
    bundle: Any,
    corpus: PreparedCorpus,
    members: Members,
    plain: str,
    name: str,
    *,
    cache_dir: Path | None = None,
    max_tokens: int = 0,
    progress: bool = False,
) -> TextPass:
    """``plain`` scored (or read back from ``cache_dir``); ``bundle``: a
    :class:`nslm.transformer.run.Transformer` (tokenizer, model, settings)."""
    tokenizer = bundle.checkpoint.tokenizer
    encoding = tokenizer.encode(plain, add_special_tokens=False)
    plain = cut_prefix(plain, np.asarray(encoding.offsets), max_tokens)
    encoding = tokenizer.encode(plain, add_special_tokens=False)
    ids = np.asarray(encoding.ids, dtype=np.int64)
    offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    text = prepare_text(corpus, plain, name=name, source=name)
    ranges = token_ranges(char_spans(plain, text.strings), offsets, plain)
    key = pass_key(bundle.checkpoint.source, plain, bundle.settings(), members)
    path = cache_dir / f"{name}-{key}.safetensors" if cache_dir is not None else None
    if path is not None and not path.is_file():  # the same text kept under another name
        legacy = pass_key(bundle.checkpoint.source, plain, bundle.settings(), members, False)
        kept = [*sorted(cache_dir.glob(f"*-{key}.safetensors"))]
        old = sorted(cache_dir.glob(f"*-{legacy}.safetensors"))
        if not kept and old:  # kept under the path's key: link it under the file's too
            _link_as(old[0], path)
        path = next(iter(kept + old), path)
    if path is not None and path.is_file():
        scores = _read(path)
    else:
        scores = score_ids(
            bundle.model,
            ids,
            bundle.checkpoint.start_id,
            window=bundle.window,
            stride=bundle.stride,
            batch=bundle.batch,
            token_sets=members.token_sets(),
            device=bundle.device,
            progress=progress,
            description=name,
        )
        if path is not None:
            _write(path, scores)
    return TextPass(name, plain, text, ids, offsets, ranges, scores)


def score_after_context(
    bundle: Any, corpus: PreparedCorpus, members: Members, context: str, continuations: list[str]
) -> tuple[list[TextPass], Any] | None:
    """:func:`score_text` of ``context + c`` for each continuation (nothing kept on disk),
    the context read once, and the context's keys and values
    (:func:`nslm.transformer.backbone.score_after`); None where that cannot be: the
    context's tokens are not the first tokens of every whole text, or a whole text is
    longer than a window."""
    tokenizer = bundle.checkpoint.tokenizer
    before = tokenizer.encode(context, add_special_tokens=False).ids
    wholes = [tokenizer.encode(context + c, add_special_tokens=False) for c in continuations]
    if any(w.ids[: len(before)] != before or len(w.ids) >= bundle.window for w in wholes):
        return None
    scores, kept = score_after(
        bundle.model,
        before,
        [w.ids[len(before) :] for w in wholes],
        bundle.checkpoint.start_id,
        token_sets=members.token_sets(),
    )
    out = []
    for c, whole, scored in zip(continuations, wholes, scores, strict=True):
        plain = context + c
        offsets = np.asarray(whole.offsets, dtype=np.int64).reshape(-1, 2)
        text = prepare_text(corpus, plain, name="text", source="text")
        ranges = token_ranges(char_spans(plain, text.strings), offsets, plain)
        ids = np.asarray(whole.ids, dtype=np.int64)
        out.append(TextPass("text", plain, text, ids, offsets, ranges, scored))
    return out, kept


def _write(path: Path, scores: TokenScores) -> None:
    import torch
    from safetensors.torch import save

    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {
        "log_probs": torch.from_numpy(scores.log_probs),
        "hidden": torch.from_numpy(scores.hidden),
        "set_log_probs": torch.from_numpy(scores.set_log_probs),
    }
    write_bytes_atomic(path, save(tensors, metadata={"seconds": repr(scores.seconds)}))
    write_json_atomic(path.with_suffix(".json"), {"seconds": scores.seconds, "tokens": len(scores)})


def _read(path: Path) -> TokenScores:
    tensors = read_tensors(path, "Transformer scores")
    meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    return TokenScores(
        tensors["log_probs"].numpy(),
        tensors["hidden"].numpy(),
        tensors["set_log_probs"].numpy(),
        float(meta["seconds"]),
    )
