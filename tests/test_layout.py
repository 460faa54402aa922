"""The package's layout is its data flow: no module imports a later stage.

The NSLM core keeps its stage folders (README "How the code is laid out" lists them in this
order); each other system has one package of its own (``numerals``, ``byte_lm``,
``word_pos``, ``ngram``, ``mixtures``), whose modules keep the stage of what they do. A
module may import its own stage and earlier ones only (``models/`` never reads
``evaluation/``; ``word_pos.model`` never reads ``word_pos.evaluation``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nslm"
# stage of each top-level module or folder; utilities at 0
STAGES = {
    "errors": 0,
    "files": 0,
    "perplexity": 0,
    "stages": 0,
    "data": 1,
    "config": 2,
    "batches": 3,
    "ngram": 3,
    "models": 4,
    "micro": 4,
    "scores": 5,
    "runs": 6,
    "training": 7,
    "evaluation": 8,
    "generation": 8,
    "experiments": 9,
    "pages": 9,
    "api": 9,
    "cli": 10,
    "__main__": 10,
    "__init__": 10,  # the front door: nslm.load opens the API (api.py) on first use
}
# a system package's modules, each at the stage of what it does (the package's own entry
# above is the stage of its __init__ and of any module not listed here)
SYSTEM_STAGES = {
    "word_pos": 0,
    "word_pos.brown_tags": 1,
    "word_pos.tagged": 1,
    "word_pos.vocab": 1,
    "word_pos.batches": 3,
    "word_pos.model": 4,
    "word_pos.scores": 5,
    "word_pos.run": 6,
    "word_pos.training": 7,
    "word_pos.evaluation": 8,
    "word_pos.generation": 8,
    "ngram.columns": 8,
    "ngram.generation": 8,
    "byte_lm": 0,
    "byte_lm.data": 1,
    "byte_lm.labelled": 1,
    "byte_lm.intervention": 4,
    "byte_lm.generation": 8,
    "byte_lm.colour": 8,
    "byte_lm.steering": 8,
    "byte_lm.probes": 8,
    "mixtures": 8,
    "numerals": 0,
    "numerals.vocab": 4,
    "numerals.branches": 4,
    "numerals.model": 4,
    "numerals.scoring": 8,
    "numerals.values": 8,
    "numerals.value_metrics": 8,
    "mixtures.char_rnn": 4,
    "transformer": 0,
    "transformer.alignment": 1,
    "transformer.checkpoint": 4,
    "transformer.backbone": 4,
    "transformer.candidates": 4,
    "transformer.class_head": 4,
    "transformer.passes": 5,
    "transformer.mixture": 5,
    "transformer.scoring": 5,
    "transformer.run": 6,
    "transformer.fit": 7,
    "transformer.tables": 8,
    "transformer.predict": 8,
    "transformer.generate": 8,
    "transformer.commands": 8,
    "functions": 4,
    "functions.base": 1,
    "functions.writing": 1,
    "functions.builtin": 1,
    "functions.documents": 1,
    "functions.model": 4,
    "functions.check": 8,
    "functions.micro": 8,
    "functions.fitted": 8,
    "functions.run": 8,
    "functions.api": 9,
}
STAGES.update(SYSTEM_STAGES)


def stage_of(module: str) -> int:
    """The stage of a dotted module under nslm: its most specific entry."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in STAGES:
            return STAGES[".".join(parts[:n])]
    raise KeyError(module)


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return [n for n in names if n.startswith("nslm.")]


def test_every_top_level_entry_has_a_stage() -> None:
    entries = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    entries.discard("__pycache__")
    assert entries <= set(STAGES), f"add {sorted(entries - set(STAGES))} to STAGES and README"


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE))
)
def test_no_module_imports_a_later_stage(path: Path) -> None:
    rel = path.relative_to(PACKAGE).with_suffix("")
    own = ".".join(p for p in rel.parts if p != "__init__") or "__init__"
    later = [
        name for name in _imports(path) if stage_of(name.removeprefix("nslm.")) > stage_of(own)
    ]
    assert not later, f"{own} (stage {stage_of(own)}) imports a later stage: {later}"
