"""Write and read ARPA n-gram files (the format of SRILM, KenLM and most decoders).

Layout: a ``\\data\\`` header with ``ngram k=count`` lines, then one ``\\k-grams:`` section per
order of ``log10 P <TAB> w1 … wk [<TAB> log10 backoff]`` lines, then ``\\end\\``. Zero
probabilities (``<s>``, and MLE's unseen events) are written as −99, the ARPA convention, and
any value ≤ −99 reads back as log 0. Other numbers are written with Python's shortest
round-trip repr, so export → import gives bit-identical log-probabilities.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np

from nslm.errors import NslmError
from nslm.files.atomic import remove_stale_temporaries, temporary_prefix
from nslm.ngram.model import BOS, EOS, NgramModel

LOG_ZERO = -99.0
_HEADER_LINE = re.compile(r"ngram +([0-9]+) *= *([0-9]+)")  # "ngram 3=1234"


def ngram_words(model: NgramModel) -> list[np.ndarray]:
    """The word ids of every stored n-gram: one (n_k, k) array per order, in key order."""
    v = model.vocab_size
    words = [np.arange(v, dtype=np.int64).reshape(-1, 1)]
    for k in range(2, model.order + 1):
        keys = model.keys[k - 1]
        words.append(np.hstack([words[-1][keys // v], (keys % v).reshape(-1, 1)]))
    return words


def _fmt(values: np.ndarray) -> list[str]:
    clipped = np.where(np.isneginf(values), LOG_ZERO, values)
    return [repr(x) for x in clipped.tolist()]


def write_arpa(model: NgramModel, path: Path) -> None:
    """Write ``model`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)  # what a killed write left
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp")
    names = np.array(model.itos, dtype=object)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\\data\\\n")
            for k, size in enumerate(model.sizes(), start=1):
                out.write(f"ngram {k}={size}\n")
            for k, words in enumerate(ngram_words(model), start=1):
                out.write(f"\n\\{k}-grams:\n")
                # Object-array string arithmetic runs the concatenations in one C loop.
                text = np.array(_fmt(model.log10_prob[k - 1]), dtype=object)
                for j in range(k):
                    text = text + ("\t" if j == 0 else " ") + names[words[:, j]]
                if k < model.order:
                    text = text + "\t" + np.array(_fmt(model.log10_backoff[k - 1]), dtype=object)
                out.write("\n".join(text.tolist()))
                out.write("\n")
            out.write("\n\\end\\\n")
        os.replace(tmp_name, path)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)


def read_arpa(path: Path) -> NgramModel:
    """Read an ARPA file into a :class:`NgramModel`; malformed input raises NslmError."""
    path = Path(path)
    lines = _read_lines(path)
    sizes, pos = _read_header(path, lines)
    sections = []
    for k, n in enumerate(sizes, start=1):
        pos = _skip_blank(lines, pos)
        if pos == len(lines) or lines[pos].strip() != f"\\{k}-grams:":
            raise NslmError(f"{path}: expected the \\{k}-grams: section at line {pos + 1}")
        pos += 1
        chunk = lines[pos : pos + n]
        if len(chunk) < n:
            raise NslmError(
                f"{path}: header says {n} {k}-grams, the \\{k}-grams: section has fewer"
            )
        sections.append(_parse_section(path, chunk, k, k < len(sizes), pos))
        pos += n
        if pos < len(lines) and lines[pos].strip() and not lines[pos].startswith("\\"):
            raise NslmError(f"{path}: the \\{k}-grams: section has more than the {n} in the header")
    pos = _skip_blank(lines, pos)
    if pos == len(lines) or lines[pos].strip() != "\\end\\":
        raise NslmError(f"{path}: missing \\end\\ marker")
    return _assemble(path, sections)


def _read_lines(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig") as handle:  # a byte-order mark is not text
            return handle.read().split("\n")
    except FileNotFoundError:
        raise NslmError(f"ARPA file not found: {path}") from None
    except UnicodeDecodeError:
        raise NslmError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise NslmError(f"{path}: cannot read ({exc.strerror})") from None


def _skip_blank(lines: list[str], pos: int) -> int:
    while pos < len(lines) and not lines[pos].strip():
        pos += 1
    return pos


def _read_header(path: Path, lines: list[str]) -> tuple[list[int], int]:
    """The n-gram counts of the ``\\data\\`` header, and the line after it."""
    pos = 0
    while pos < len(lines) and lines[pos].strip() != "\\data\\":
        pos += 1
    if pos == len(lines):
        raise NslmError(f"{path}: broken ARPA header (no \\data\\ line)")
    pos += 1
    sizes: list[int] = []
    while pos < len(lines) and lines[pos].strip().startswith("ngram "):
        # ASCII digits only: str.isdigit takes "²", str.strip takes "\x1d", int() neither
        counts = _HEADER_LINE.fullmatch(lines[pos].strip())
        if counts is None:
            raise NslmError(f"{path}:{pos + 1}: broken ARPA header line {lines[pos][:60]!r}")
        if int(counts[1]) != len(sizes) + 1:
            raise NslmError(f"{path}:{pos + 1}: ARPA header lists orders out of sequence")
        sizes.append(int(counts[2]))
        pos += 1
    if not sizes:
        raise NslmError(f"{path}: broken ARPA header (no 'ngram k=count' lines)")
    return sizes, pos


def _parse_section(path: Path, chunk: list[str], k: int, may_back_off: bool, first_line: int):
    """log10 probabilities, word columns and backoffs of one section.

    The fast path splits the whole section at once (one C-level split instead of one per
    line); it applies when every line has the same number of fields. Otherwise the lines are
    checked one by one, to name the first bad one.
    """
    tokens = " ".join(chunk).split()
    n = len(chunk)
    if len(tokens) == n * (k + 1):
        width = k + 1
    elif may_back_off and len(tokens) == n * (k + 2):
        width = k + 2
    else:
        width = 0
    try:
        if width == 0:
            return _parse_mixed(path, chunk, k, may_back_off, first_line)
        probs = np.array(tokens[0::width], dtype=np.float64)
        backs = np.array(tokens[k + 1 :: width], dtype=np.float64) if width == k + 2 else None
        columns = [tokens[1 + j :: width] for j in range(k)]
    except ValueError as exc:
        raise NslmError(f"{path}: a number in the {k}-grams section is malformed ({exc})") from None
    return _finish(path, k, probs, columns, backs if backs is not None else np.zeros(n))


def _parse_mixed(path: Path, chunk: list[str], k: int, may_back_off: bool, first_line: int):
    for i, line in enumerate(chunk):
        if not line.strip() or line.startswith("\\"):
            raise NslmError(
                f"{path}: header says {len(chunk)} {k}-grams, the \\{k}-grams: section has {i}"
            )
    rows = [line.split() for line in chunk]
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    allowed = (lengths == k + 1) | ((lengths == k + 2) & may_back_off)
    if not allowed.all():
        bad = int(np.argmin(allowed))
        raise NslmError(
            f"{path}:{first_line + bad + 1}: expected a {k}-gram line, got {chunk[bad]!r}"
        )
    probs = np.array([r[0] for r in rows], dtype=np.float64)
    backs = np.zeros(len(rows))
    has_back = np.flatnonzero(lengths == k + 2)
    backs[has_back] = np.array([rows[i][-1] for i in has_back], dtype=np.float64)
    columns = [[r[1 + j] for r in rows] for j in range(k)]
    return _finish(path, k, probs, columns, backs)


def _finish(path: Path, k: int, probs: np.ndarray, columns: list[list[str]], backs: np.ndarray):
    if not (np.isfinite(probs).all() and np.isfinite(backs).all()):
        raise NslmError(f"{path}: non-finite number in the {k}-grams section")
    probs[probs <= LOG_ZERO] = -np.inf
    backs[backs <= LOG_ZERO] = -np.inf
    return probs, columns, backs


def _assemble(path: Path, sections) -> NgramModel:
    order = len(sections)
    uni_probs, uni_columns, uni_backs = sections[0]
    itos = list(uni_columns[0])
    if len(set(itos)) != len(itos):
        raise NslmError(f"{path}: duplicate unigram")
    for special in (BOS, EOS):
        if special not in itos:
            raise NslmError(f"{path}: the unigrams lack {special}")
    stoi = {s: i for i, s in enumerate(itos)}
    unk_id = stoi.get("<unk>", len(itos))
    if unk_id == len(itos):
        # No <unk> in the file: add one with probability 0, as a reader must map OOVs somewhere.
        itos.append("<unk>")
        uni_probs = [*uni_probs, -np.inf]
        uni_backs = [*uni_backs, 0.0]
    v = len(itos)
    keys = [np.arange(v, dtype=np.int64)]
    log10_prob = [np.asarray(uni_probs, dtype=np.float64)]
    log10_backoff = [np.asarray(uni_backs, dtype=np.float64)]
    for k in range(2, order + 1):
        probs, columns, backs = sections[k - 1]
        try:
            ids = np.stack(
                [np.fromiter(map(stoi.__getitem__, c), np.int64, len(c)) for c in columns]
            )
        except KeyError as exc:
            raise NslmError(f"{path}: {k}-gram uses {exc.args[0]!r}, not a unigram") from None
        ids = ids.T
        rank = ids[:, 0]
        for m in range(2, k):
            table = keys[m - 1]
            wanted = rank * v + ids[:, m - 1]
            idx = np.minimum(np.searchsorted(table, wanted), len(table) - 1)
            if len(table) == 0 or np.any(table[idx] != wanted):
                raise NslmError(f"{path}: a {k}-gram's prefix is missing from the {m}-grams")
            rank = idx
        key = rank * v + ids[:, k - 1]
        perm = np.argsort(key, kind="stable")
        key = key[perm]
        if np.any(key[1:] == key[:-1]):
            raise NslmError(f"{path}: duplicate {k}-gram")
        keys.append(key)
        log10_prob.append(np.asarray(probs, dtype=np.float64)[perm])
        log10_backoff.append(np.asarray(backs, dtype=np.float64)[perm])
    return NgramModel(
        itos=itos,
        bos_id=stoi[BOS],
        eos_id=stoi[EOS],
        unk_id=unk_id,
        keys=keys,
        log10_prob=log10_prob,
        log10_backoff=log10_backoff[: order - 1],
        meta={"method": "arpa", "source": str(path)},
    )
