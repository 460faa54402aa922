"""What kind of model a path holds, decided once, from its files.

Every front end (the CLI, :func:`nslm.load`, the explorer) asks :func:`locate_run` and
branches on the answer's ``kind``; nothing else reads a run's config.json to decide what the
run is. The kinds:

* ``nslm`` — a word LM trained by ``nslm train`` (NNLM/HNLM heads; its micro-models, when
  fitted, make it the NSLM of Eq. 4)
* ``numeral`` — a numeral model of Spithourakis & Riedel (2018) (a ``numeral`` head; paper
  Table 4, docs/numerals.md): a word LM whose numerals come from its own head
* ``byte`` — a byte LM (a ``bytes:`` corpus: 256 symbols, no classes)
* ``word_pos`` — a word+POS LM (``model = "word-pos"``, docs/word-pos.md)
* ``ngram`` — an n-gram model: a directory written by ``nslm ngram build`` or an ARPA file
* ``transformer`` — micro-models over a pretrained Transformer (docs/transformer.md): a
  directory whose config.json says ``"kind": "transformer"``
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from nslm.config import TrainConfig, read_config_json
from nslm.errors import NslmError
from nslm.hooks import corpus_kind_of

RunKind = Literal["nslm", "numeral", "byte", "word_pos", "ngram", "transformer"]
KINDS: tuple[RunKind, ...] = ("nslm", "numeral", "byte", "word_pos", "ngram", "transformer")
WORD_LMS: tuple[RunKind, ...] = ("nslm", "numeral")  # word LMs trained by nslm train
NGRAM_FILE = "model.json"  # nslm.ngram.model.NgramModel.save's description of the model


@dataclass(frozen=True)
class RunRef:
    """A model on disk and its kind. ``cfg`` is the training config of a trained run (None
    for an n-gram model). Works as a path (``ref / "micro.json"``, ``open(ref)``)."""

    path: Path
    kind: RunKind
    cfg: TrainConfig | None = None

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __getattr__(self, name: str):
        if name == "path":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.path, name)  # .name, .parent, .is_dir(), … of the path

    @property
    def has_micro(self) -> bool:
        """Whether the run's micro-models are fitted (``nslm micro fit RUN``)."""
        return self.kind == "nslm" and (self.path / "micro.json").is_file()


def no_run_message(path: Path | str) -> str:
    return f"no run at {path} (expected a directory with config.json; train one with 'nslm train')"


def kind_of_config(cfg: TrainConfig) -> RunKind:
    """The kind of a trained run, from its config."""
    if cfg.model == "word-pos":
        return "word_pos"
    corpus = corpus_kind_of(cfg.corpus)  # a corpus another system prepares: its kind
    if corpus is not None:
        return cast(RunKind, corpus.run_kind)
    return "numeral" if "numeral" in cfg.heads else "nslm"


def locate_run(path: Path | str, *, ngram: bool = False) -> RunRef:
    """``path`` as a trained run (a directory with config.json, checked readable here, so a
    damaged one is a one-line error before any command's work), or, with ``ngram``, also an
    n-gram model (a directory with model.json, or an ARPA file). Anything else is the one
    error every command gives."""
    path = Path(path)
    if (path / "config.json").is_file():
        if _says_transformer(path / "config.json"):
            return RunRef(path, "transformer")
        cfg = read_config_json(path / "config.json")
        return RunRef(path, kind_of_config(cfg), cfg)
    if ngram and ((path / NGRAM_FILE).is_file() or path.is_file()):
        return RunRef(path, "ngram")
    if ngram:
        raise NslmError(
            f"no run at {path} (expected a training run's directory with config.json, an "
            "n-gram model's with model.json from 'nslm ngram build', or an ARPA file)"
        )
    raise NslmError(no_run_message(path))


def _says_transformer(config: Path) -> bool:
    """Whether a config.json is a Transformer run's (``"kind": "transformer"``); anything
    unreadable is left to the training config's reader and its one-line error."""
    try:
        values = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(values, dict) and is_transformer_config(values)


def is_transformer_config(values: dict) -> bool:
    """Whether a config's keys (a run's config.json, or a TOML given to ``nslm train``) say
    ``kind = "transformer"``."""
    return values.get("kind") == "transformer"


def require_kind(ref: RunRef, wanted: tuple[RunKind, ...], what: str) -> None:
    """A one-line error unless ``ref`` is of one of the ``wanted`` kinds (``what`` needs it)."""
    if ref.kind not in wanted:
        names = {
            "nslm": "word LM",
            "numeral": "numeral-model",
            "byte": "byte LM",
            "word_pos": "word+POS",
            "ngram": "n-gram",
            "transformer": "Transformer",
        }
        allowed = " or ".join(names[k] for k in wanted)
        raise NslmError(f"{what} needs a {allowed} run; {ref.path} is a {names[ref.kind]} model")
