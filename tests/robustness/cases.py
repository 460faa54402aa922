"""The battery's cases (table rows × kinds), what each must give, and running one.

Defaults by kind: the clean input works; a CRLF or BOM variant of a text file works and
gives what the clean one gives; a big line is taken or refused in one line; every other
kind is one ``error: …`` line (exit 2) naming the input: its file, the config key at fault,
or the run directory. Whatever the outcome, no temporary file is left in the case folder,
every JSON, safetensors or npz file it wrote reads whole, and no pickle was executed.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from robustness.inputs import mutate_run, toml_text, write_text_input
from robustness.runner import (
    Outcome,
    command_line,
    error_problems,
    is_temporary,
    leftover_problems,
    ok_or_error_problems,
    ok_problems,
    run_in_process,
)
from robustness.table import KNOWN_BUGS, SLOTS, Slot
from robustness.world import OTHER_CORPUS_NAME, World

RUN_NAME = "the-run"
CORPUS_NAME = "the-corpus"
UNPICKLED = "unpickled"  # what a PickleBomb creates if anything executes it


@dataclass(frozen=True)
class Case:
    slot: Slot
    kind: str

    @property
    def id(self) -> str:
        return f"{self.slot.id} [{self.kind}]"

    def expected(self) -> str:
        if self.kind in self.slot.expect:
            return self.slot.expect[self.kind]
        if self.kind == "clean":
            return "ok"
        if self.slot.family != "run" and self.kind in ("crlf", "bom"):
            return "same"
        if self.kind == "big_line":
            return "ok_or_error"
        return "error"

    def needle(self) -> str:
        """What the error message must name: the file, the key, the run, or the corpus that
        is not the run's."""
        if self.kind in self.slot.extra:
            return self.slot.extra[self.kind][1]
        if self.kind == "other_corpus":
            return OTHER_CORPUS_NAME
        if self.slot.family == "run":
            return RUN_NAME
        return Path(self.slot.filename).name

    def known_bug(self) -> str | None:
        return KNOWN_BUGS.get((self.slot.id, self.kind))


def all_cases(slots: list[Slot] = SLOTS) -> list[Case]:
    return [Case(slot, kind) for slot in slots for kind in slot.kinds]


def command_of(text: str) -> str:
    """The nslm command a row runs: ``eval --crnn`` → ``eval``, ``ngram build --raw`` →
    ``ngram build``, ``train (byte LM)`` → ``train``."""
    import click

    from nslm.cli import cli

    words = text.split()
    return " ".join(words[:2] if isinstance(cli.commands[words[0]], click.Group) else words[:1])


def place_input(case: Case, world: World, folder: Path) -> Path:
    """Put the case's input in ``folder``; its path, as the command line names it."""
    slot = case.slot
    if slot.family == "run":
        run = folder / RUN_NAME
        shutil.copytree(slot.base_run(world), run)
        mutate_run(run, case.kind, world.other_run, world.other_corpus, folder / UNPICKLED)
        return run
    if slot.family == "corpus":
        tree = slot.tree(world)
        copy = folder / CORPUS_NAME
        shutil.copytree(tree, copy)
        good = (tree / slot.filename).read_bytes()
        write_text_input(copy / slot.filename, case.kind, good, slot.big_line_bytes)
        return copy
    path = folder / slot.filename
    if case.kind in slot.extra:
        path.write_bytes(slot.extra[case.kind][0](world))
    else:
        assert slot.good is not None, slot.id
        write_text_input(path, case.kind, slot.good(world), slot.big_line_bytes)
    return path


def template_values(case: Case, world: World, folder: Path, path: Path) -> dict[str, object]:
    """What a row's templates name: the world's files, ``{input}``, ``{out}``, ``{folder}``
    and ``{config}`` (the world's training config with the row's changes, in the folder)."""
    values: dict[str, object] = {
        **vars(world),
        "input": path,
        "out": folder / "out",
        "folder": folder,
    }
    changes = {
        key: value.format(**values) if isinstance(value, str) else value
        for key, value in case.slot.config.items()
    }
    config = folder / "config.toml"
    config.write_text(toml_text(world.config(**changes)), encoding="utf-8")
    return {**values, "config": config}


def execute(case: Case, world: World, folder: Path) -> tuple[Outcome, object]:
    """Run the case in ``folder`` (fresh); its outcome and what the row observes."""
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "out").mkdir(parents=True)
    path = place_input(case, world, folder)
    if case.slot.setup is not None:
        case.slot.setup(world, path)
    values = template_values(case, world, folder, path)
    env = {name: value.format(**values) for name, value in case.slot.env.items()}
    outcome = run_in_process(command_line(case.slot.template, values), {**world.env, **env})
    seen = None
    if outcome.code == 0:
        stdout = outcome.stdout.replace(str(folder), "<case>")
        seen = case.slot.observe(folder, stdout) if case.slot.observe else stdout
    return outcome, seen


def case_problems(case: Case, world: World, folder: Path, reference: object = None) -> list[str]:
    """Everything wrong with how the command met the case's input (empty: all good).

    ``reference``: what the clean input gives, for the cases expected to give the same.
    """
    outcome, seen = execute(case, world, folder)
    expected = case.expected()
    if expected == "error":
        problems = error_problems(outcome, (case.needle(),))
    elif expected == "ok_or_error":
        problems = ok_or_error_problems(outcome)
    else:
        problems = ok_problems(outcome)
        if expected == "same" and not problems and seen != reference:
            problems.append("the output differs from the clean input's")
    problems += leftover_problems(folder / "out")
    problems += [
        f"left a temporary {p.relative_to(folder)}"
        for p in folder.rglob("*")
        if is_temporary(p) and not p.is_relative_to(folder / "out")
    ]
    if (folder / UNPICKLED).exists():
        problems.append("a pickle was executed")
    return problems


_REFERENCES: dict[tuple[Path, str], object] = {}


def reference(slot: Slot, world: World, folder: Path) -> object:
    """What the slot's clean input gives (run once per world, in ``folder``)."""
    key = (world.root, slot.id)
    if key not in _REFERENCES:
        outcome, seen = execute(Case(slot, "clean"), world, folder)
        assert outcome.code == 0, f"{slot.id}: the clean input fails: {outcome.stderr}"
        _REFERENCES[key] = seen
    return _REFERENCES[key]
