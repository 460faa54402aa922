"""Find a corpus on disk, or fetch it, in this order (README.md, "Where corpora come from"):

1. an explicit path (a directory holding the split files);
2. ``$NSLM_DATA_DIR/<name>``;
3. the user cache, ``~/.cache/nslm/<name>`` (or ``$XDG_CACHE_HOME/nslm/<name>``);
4. a download from the corpus's canonical public address, verified by SHA-256.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from nslm.errors import NslmError

SPLITS = ("train", "valid", "test")


@dataclass(frozen=True)
class SplitFile:
    """One split of a known corpus: the names it may have on disk, and where to fetch it."""

    names: tuple[str, ...]
    url: str
    sha256: str  # of the uncompressed text


@dataclass(frozen=True)
class CorpusSpec:
    name: str
    splits: dict[str, SplitFile]


# The tokenized WikiText-2 (v1) as the PyTorch word-language-model example ships it; the
# SHA-256 below pins the content, whatever the branch holds.
_PYTORCH_EXAMPLES = (
    "https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/"
)


def _wikitext_split(split: str, sha256: str) -> SplitFile:
    names = (f"{split}.txt", f"{split}.txt.xz", f"wiki.{split}.tokens", f"wiki.{split}.tokens.xz")
    return SplitFile(names=names, url=_PYTORCH_EXAMPLES + f"{split}.txt", sha256=sha256)


KNOWN_CORPORA: dict[str, CorpusSpec] = {
    "wikitext-2": CorpusSpec(
        name="wikitext-2",
        splits={
            "train": _wikitext_split(
                "train", "9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f"
            ),
            "valid": _wikitext_split(
                "valid", "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8"
            ),
            "test": _wikitext_split(
                "test", "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"
            ),
        },
    ),
}


def user_cache_dir() -> Path:
    """The per-user cache root: ``$XDG_CACHE_HOME/nslm`` or ``~/.cache/nslm``."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "nslm"


def _find_split_files(directory: Path, names_per_split: dict[str, tuple[str, ...]]) -> dict | None:
    found: dict[str, Path] = {}
    for split, names in names_per_split.items():
        hit = next((directory / n for n in names if (directory / n).is_file()), None)
        if hit is None:
            return None
        found[split] = hit
    return found


def _generic_names() -> dict[str, tuple[str, ...]]:
    return {
        s: (f"{s}.txt", f"{s}.txt.xz", f"wiki.{s}.tokens", f"wiki.{s}.tokens.xz") for s in SPLITS
    }


def locate_corpus(name_or_path: str | Path, *, download: bool = True) -> dict[str, Path]:
    """Return ``{"train": path, "valid": path, "test": path}`` for a corpus.

    ``name_or_path`` is either an existing directory holding the three split files,
    or the name of a known corpus (``wikitext-2``).
    """
    candidate = Path(name_or_path).expanduser()
    spec = KNOWN_CORPORA.get(str(name_or_path))
    if spec is None:
        if candidate.is_file():
            raise NslmError(
                f"{candidate} is a file; pass the directory that holds train/valid/test files"
            )
        if candidate.is_dir():
            found = _find_split_files(candidate, _generic_names())
            if found is None:
                raise NslmError(
                    f"{candidate}: expected train.txt, valid.txt and test.txt "
                    "(or .xz, or wiki.*.tokens) in this directory"
                )
            return found
        known = ", ".join(sorted(KNOWN_CORPORA))
        raise NslmError(f"no such corpus or directory: {name_or_path} (known corpora: {known})")

    names = {split: f.names for split, f in spec.splits.items()}
    roots = []
    if os.environ.get("NSLM_DATA_DIR"):
        roots.append(Path(os.environ["NSLM_DATA_DIR"]).expanduser() / spec.name)
    roots.append(user_cache_dir() / spec.name)
    for root in roots:
        if root.is_dir() and (found := _find_split_files(root, names)) is not None:
            return found
    if not download:
        raise NslmError(f"{spec.name} not found; {_where_to_put(spec)}")
    return _download(spec)


def _where_to_put(spec: CorpusSpec) -> str:
    files = ", ".join(f.names[0] for f in spec.splits.values())
    return (
        f"put {files} in $NSLM_DATA_DIR/{spec.name} or {user_cache_dir() / spec.name}, "
        "or pass the directory that holds them"
    )


def _download(spec: CorpusSpec) -> dict[str, Path]:
    target = user_cache_dir() / spec.name
    target.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    for split, file in spec.splits.items():
        final = target / file.names[0]
        if not final.is_file():
            _fetch_verified(file, final, spec)
        found[split] = final
    return found


def _fetch_verified(file: SplitFile, final: Path, spec: CorpusSpec) -> None:
    """Download to a temporary file, check its SHA-256, then rename into place."""
    fd, tmp_name = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(file.url, timeout=30) as resp:
            while chunk := resp.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != file.sha256:
            raise NslmError(
                f"downloaded {final.name} has SHA-256 {digest.hexdigest()[:16]}…, "
                f"expected {file.sha256[:16]}…; {_where_to_put(spec)}"
            )
        os.replace(tmp, final)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NslmError(
            f"{spec.name} is not on disk and downloading it failed ({reason}); "
            f"{_where_to_put(spec)}"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)
