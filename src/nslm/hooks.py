"""Where the other systems plug into the NSLM core, which imports none of them.

A shared piece of the core that another system needs a place in offers a hook here, and
the system's package registers its entry when it is imported:

* a **corpus kind** that the system prepares its own way (the byte LM's ``bytes:`` corpora):
  ``prepare_corpus`` hands such a corpus to it, and a run trained on one is of its kind;
* an **extra head** beside the NNLM and HNLM heads (the numeral models' ``numeral`` head):
  ``LanguageModel`` attaches it, training builds what it knows before training, and a
  run keeps that in a file of its own;
* a **training task** for a model that does not train as a stream LM (``word-pos``);
* **config rules** for the keys a system reads, run by ``validate`` after the core's own.

The registries live in this module, which imports nothing, rather than in the stage folders
that read them: ``nslm/__init__.py`` imports every registering package, so that any entry
point (the CLI, ``nslm.load``, a test, a DDP worker) sees the entries, and ``import nslm``
stays light. The entries' functions import their system's modules only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from os import PathLike
from typing import Any

# The entries take and give a training config (config/), a prepared corpus (data/) and torch
# modules; they are typed Any here, where none of those stages may be imported.


@dataclass(frozen=True)
class CorpusKind:
    """Corpora that a system prepares itself, told apart by their names."""

    name: str  # what one is called in messages ("byte corpus")
    run_kind: str  # the kind of a run trained on one (runs/kinds.py)
    matches: Callable[[str | PathLike], bool]  # whether a corpus name or path is one
    prepare: Callable[[str | PathLike], Any]  # → a PreparedCorpus
    locate: Callable[[str | PathLike], object]  # its files, or a one-line NslmError
    has_classes: bool = True  # False: a config must set classes = 'none' for it


@dataclass(frozen=True)
class HeadKind:
    """A head that ``heads = [name]`` trains in place of the NNLM and HNLM heads.

    What the head knows before training (its spec: anything with ``to_json()``) is built
    from the training corpus, saved beside config.json as ``spec_file`` and read back from
    it, so a trained run rebuilds the head without the corpus.
    """

    name: str
    docs: str  # the page that describes its config
    spec_file: str
    spec_from_corpus: Callable[[Any, Any], Any]  # (cfg, corpus) → spec
    spec_from_json: Callable[[dict], Any]
    attach: Callable[[Any, Any, Any], Any]  # (cfg, backbone, spec) → the head module


_CORPUS_KINDS: list[CorpusKind] = []
_HEAD_KINDS: dict[str, HeadKind] = {}
_TRAINING_TASKS: dict[str, Callable[[], type]] = {}
_CONFIG_RULES: list[Callable[[Any], None]] = []


def register_corpus_kind(kind: CorpusKind) -> None:
    _CORPUS_KINDS.append(kind)


def corpus_kind_of(name: str | PathLike) -> CorpusKind | None:
    """The registered kind of the corpus ``name``; None for a corpus the core prepares."""
    return next((kind for kind in _CORPUS_KINDS if kind.matches(name)), None)


def register_head_kind(kind: HeadKind) -> None:
    _HEAD_KINDS[kind.name] = kind


def head_kinds() -> dict[str, HeadKind]:
    """The registered extra heads, by name."""
    return dict(_HEAD_KINDS)


def register_training_task(model: str, task: Callable[[], type]) -> None:
    """``model = '<model>'`` trains by the task class ``task()`` gives (imported then)."""
    _TRAINING_TASKS[model] = task


def training_tasks() -> dict[str, Callable[[], type]]:
    """The models with a training task of their own, and how to get its class."""
    return dict(_TRAINING_TASKS)


def register_config_rule(rule: Callable[[Any], None]) -> None:
    """``rule(cfg)`` raises a one-line NslmError when the config breaks it."""
    _CONFIG_RULES.append(rule)


def config_rules() -> list[Callable[[Any], None]]:
    return list(_CONFIG_RULES)
