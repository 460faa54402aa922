"""The package's layout is its data flow: no module imports a later stage.

README "How the code is laid out" lists the folders of ``src/nslm`` in this order; a module
may import its own stage and earlier ones only (``models/`` never reads ``evaluation/``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nslm"
# stage of each top-level module or folder; utilities at 0
STAGES = {
    "errors": 0,
    "atomic": 0,
    "json_policy": 0,
    "tensor_files": 0,
    "perplexity": 0,
    "stages": 0,
    "__init__": 0,
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
    "probes": 8,
    "experiments": 9,
    "pages": 9,
    "cli": 10,
    "__main__": 10,
}


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
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    later = [name for name in _imports(path) if STAGES[name.split(".")[1]] > STAGES[own]]
    assert not later, f"{own}/ imports a later stage: {later}"
