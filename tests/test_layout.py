"""The package's layout is its data flow: no module imports a later stage, the core imports
no other system, and no modules import each other in a circle.

The NSLM core keeps its stage folders (README "How the code is laid out" lists them in this
order); each other system has one package of its own (:data:`SYSTEMS`), whose modules keep
the stage of what they do. A module may import its own stage and earlier ones only
(``models/`` never reads ``evaluation/``; ``word_pos.model`` never reads
``word_pos.evaluation``). The core knows nothing of the other systems: where one needs a
place in a shared piece, the core offers a hook (``nslm/hooks.py``) and the system's
package registers itself; only the front ends (:data:`FRONT_ENDS`) import the systems.

Every ``import`` and ``from … import`` of a module counts, wherever it stands: at the top,
inside a function, or under ``if TYPE_CHECKING:``. House.py reports the same lists
(``benchmarks/house/house.py``: ``arrows_back_up``, ``core_imports_of_systems``,
``circles``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nslm"
# stage of each top-level module or folder; utilities at 0
STAGES = {
    "errors": 0,
    "files": 0,
    "perplexity": 0,
    "stages": 0,
    "hooks": 0,  # where the other systems plug into the core; it imports nothing
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
    "lm_eval": 9,  # every run kind as an lm-eval model, through the API
    "cli": 10,
    "__main__": 10,
    "__init__": 10,  # the front door: nslm.load opens the API (api.py) on first use
}
# a system package's modules, each at the stage of what it does (the package's own entry
# above is the stage of its __init__ and of any module not listed here)
SYSTEM_STAGES = {
    "word_pos": 7,  # its __init__ registers the training task (word_pos.training)
    "word_pos.rules": 2,
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
    "byte_lm": 1,  # its __init__ registers its corpora (byte_lm.data)
    "byte_lm.data": 1,
    "byte_lm.labelled": 1,
    "byte_lm.intervention": 4,
    "byte_lm.generation": 8,
    "byte_lm.colour": 8,
    "byte_lm.steering": 8,
    "byte_lm.probes": 8,
    "mixtures": 8,
    "numerals": 4,  # its __init__ registers the numeral head (numerals.model)
    "numerals.rules": 2,
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
    "transformer.prompts": 1,
    "transformer.sites": 5,
    "transformer.functions": 7,
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
# the other systems' packages, and the front ends that bring every system to a user; every
# other module is the NSLM core
SYSTEMS = ("numerals", "byte_lm", "word_pos", "ngram", "mixtures", "transformer", "functions")
FRONT_ENDS = ("cli", "pages", "api", "lm_eval", "__init__", "__main__")


def stage_of(module: str) -> int:
    """The stage of a dotted module under nslm: its most specific entry."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in STAGES:
            return STAGES[".".join(parts[:n])]
    raise KeyError(module)


def module_of(path: Path) -> str:
    """The dotted name under nslm of a file of the package (``__init__`` for nslm's own)."""
    rel = path.relative_to(PACKAGE).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__") or "__init__"


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _is_module(name: str) -> bool:
    where = PACKAGE.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


@cache
def imports_of(path: Path) -> tuple[str, ...]:
    """The modules of nslm that the file ``path`` imports (:func:`imports_in`)."""
    text = path.read_text(encoding="utf-8")
    return imports_in(text, module_of(path), is_package=path.name == "__init__.py")


def imports_in(text: str, own: str, *, is_package: bool = False) -> tuple[str, ...]:
    """The modules of nslm that the module ``own`` of source ``text`` imports (dotted names
    under nslm, ``__init__`` for nslm itself), read from every import node of its syntax
    tree: top-level, inside functions, under ``if TYPE_CHECKING:``. ``from nslm.a import
    b`` names ``a.b`` when b is a module, else ``a`` (the package's ``__init__``); relative
    imports are resolved."""
    package = own if is_package else own.rpartition(".")[0]
    package = "" if package == "__init__" else package
    names: list[str] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)]
                source = ".".join(["nslm", *parts, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                inner = sub.startswith("nslm.") and _is_module(sub.removeprefix("nslm."))
                names.append(sub if inner else source)
    found = []
    for name in names:
        if name == "nslm":
            found.append("__init__")
        elif name.startswith("nslm."):
            found.append(name.removeprefix("nslm."))
    return tuple(dict.fromkeys(found))


def _top(module: str) -> str:
    return module.split(".")[0]


def is_core(module: str) -> bool:
    """Whether a module is the NSLM core's: neither another system's nor a front end's."""
    return _top(module) not in SYSTEMS + FRONT_ENDS


def arrows_back_up() -> list[str]:
    """Every import of a later stage, as ``module → imported``."""
    return [
        f"{module_of(path)} → {name}"
        for path in modules()
        for name in imports_of(path)
        if stage_of(name) > stage_of(module_of(path))
    ]


def core_imports_of_systems() -> list[str]:
    """Every import of another system's package by a module of the core."""
    return [
        f"{module_of(path)} → {name}"
        for path in modules()
        if is_core(module_of(path))
        for name in imports_of(path)
        if _top(name) in SYSTEMS
    ]


def import_graph() -> dict[str, set[str]]:
    """Module → the modules it imports. An import of ``a.b`` is an arrow to ``a.b`` alone:
    Python runs the package ``a``'s __init__ first, but a package that gathers its
    modules' names would otherwise stand in a circle with each of them."""
    return {module_of(p): set(imports_of(p)) - {module_of(p)} for p in modules()}


def circles() -> list[list[str]]:
    """The circles of the import graph: for each group of modules that import each other,
    round about (a strongly connected component), its shortest circle through its first
    module, which ends where it starts."""
    graph = import_graph()
    return [_shortest_circle(graph, group) for group in _strong_components(graph)]


def _strong_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (Tarjan 1972, "Depth-first search and linear graph algorithms");
    groups of one module are left out (a module that imports itself is no circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in sorted(graph[node] & graph.keys()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:  # node is the first of its group that was reached
            group = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def _shortest_circle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """The shortest path from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise AssertionError(f"{group} is no circle")


def test_every_top_level_entry_has_a_stage() -> None:
    entries = {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    entries.discard("__pycache__")
    assert entries <= set(STAGES), f"add {sorted(entries - set(STAGES))} to STAGES and README"


def test_systems_and_front_ends_have_stages() -> None:
    assert set(SYSTEMS + FRONT_ENDS) <= set(STAGES)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_later_stage(path: Path) -> None:
    own = module_of(path)
    later = [name for name in imports_of(path) if stage_of(name) > stage_of(own)]
    assert not later, f"{own} (stage {stage_of(own)}) imports a later stage: {later}"


@pytest.mark.parametrize(
    "path",
    [p for p in modules() if is_core(module_of(p))],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_the_core_imports_no_other_system(path: Path) -> None:
    systems = [name for name in imports_of(path) if _top(name) in SYSTEMS]
    assert not systems, (
        f"{module_of(path)} (the core) imports another system: {systems}; offer a hook in "
        "nslm/hooks.py and let the system register itself"
    )


def test_no_modules_import_each_other_in_a_circle() -> None:
    found = circles()
    assert not found, "modules that import each other: " + "; ".join(" → ".join(c) for c in found)


def test_the_checks_see_every_kind_of_import() -> None:
    """An eager, a lazy and a TYPE_CHECKING import all count, relative ones resolved."""
    text = (
        "from typing import TYPE_CHECKING\n"
        "from nslm.data import corpus\n"
        "from . import heads\n"
        "if TYPE_CHECKING:\n"
        "    from nslm.numerals.vocab import NumeralSpec\n"
        "def later():\n"
        "    import nslm.evaluation.tables\n"
        "    from nslm import byte_lm\n"
        "    from nslm.config import TrainConfig\n"
    )
    found = imports_in(text, "models.lm")
    expected = ("data.corpus", "models.heads", "numerals.vocab", "evaluation.tables", "byte_lm")
    assert set(found) == {*expected, "config"}


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert [_shortest_circle(graph, g) for g in _strong_components(graph)] == [["a", "b", "c", "a"]]
