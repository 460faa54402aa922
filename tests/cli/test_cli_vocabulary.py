"""One CLI vocabulary: each concept one spelling, each spelling one concept, the same across
commands, and nothing hidden (issue 41).

:data:`VOCABULARY` maps every concept of the ``nslm`` command tree to its one name (an option
by its long name, an argument by its metavar) and the kind of value it takes. The tests walk
the tree (``from nslm.cli import cli``) and fail when

- a name of the tree is not in the table: a new name is a decision, written down here;
- one name carries two kinds of value or two meanings: two kinds (a flag here, a choice
  there), two parameter names behind it (``--top-k`` as ``k`` and as ``top_k``), or two
  concepts in the table;
- one concept has two names: an option with two long names (``-o/--out/--run-dir``), or a
  short flag that stands for two long names;
- a command or an option is hidden (an old spelling kept as an alias);
- a ``nslm …`` command in README.md, BENCHMARKS.md or docs/ names an option its command does
  not take, or more positionals than it takes (docs/history.md quotes old spellings).

:func:`collisions` counts the names with two meanings and the concepts with two names;
benchmarks/house/house.py reports that count as ``cli_collisions``.
"""

from __future__ import annotations

import re
import shlex
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import click

from nslm.cli import cli


class Word(NamedTuple):
    name: str  # the option's long name (or short, if it has none), an argument's metavar
    kind: str  # flag, int, float, text, choice, file, dir, path, list of …; "-" for arguments


# concept → its one name and the kind of value it takes. Keep the concepts apart in words:
# two rows with one name, or one concept that needs two names, is what the tests refuse.
VOCABULARY: dict[str, Word] = {
    # what a command reads
    "a training run (or, for generate, any model nslm can load)": Word("RUN", "-"),
    "the runs a server offers": Word("RUNS", "-"),
    "an n-gram model: its directory or an ARPA file": Word("MODEL", "-"),
    "the text whose continuation is predicted or generated": Word("PROMPT", "-"),
    "the text corpus read: a known name or a train/valid/test directory": Word("--corpus", "text"),
    "a labelled data set a probe fits and is tested on": Word("--dataset", "choice"),
    "a text file scored in place of a split": Word("--text", "path"),
    "the text nslm check reads: a file, or - for standard input": Word("TEXT", "-"),
    "lm-evaluation-harness's own arguments, handed to it as they are": Word("ARGS", "-"),
    "the odds of a function's reading above which nslm check flags a number": Word(
        "--threshold", "float"
    ),
    "the splits scored": Word("--split", "list of text"),
    "the TOML file that configures a run": Word("--config", "file"),
    "a config key overridden": Word("--set", "list of text"),
    "how the text read is written (plain or tokenized)": Word("--input-format", "choice"),
    "the corpus as raw text, as lmplz reads it (no preparation)": Word("--raw", "flag"),
    "the texts read verbatim (no review framing, no detokenising)": Word("--verbatim", "flag"),
    "class tokens replaced by their tags": Word("--tagged", "flag"),
    "the classes tagged in a prepared corpus": Word("--classes", "choice"),
    "a user class given by a regex": Word("--class-rule", "list of text"),
    "a TOML file of user classes and plug-ins": Word("--class-file", "file"),
    "a .py file or module that registers metrics and PDFs": Word("--plugin", "list of text"),
    "where prepared corpora are cached": Word("--prepared-dir", "dir"),
    "a micro.json file": Word("--micro-file", "file"),
    "which micro-models an NSLM uses (auto, plain, context)": Word("--micro", "choice"),
    "which LM scores or generates (auto, nslm, neural)": Word("--model", "choice"),
    "the neural head sampled from": Word("--head", "text"),
    "pretrained input embeddings": Word("--init-vectors", "file"),
    "the run continued from its last checkpoint": Word("--resume", "dir"),
    # where output goes
    "the file a command writes": Word("--out", "file"),
    "the folder a command writes its files into": Word("--out-dir", "dir"),
    "the training run a command writes": Word("--run-dir", "dir"),
    "an HTML page of the coloured text": Word("--html", "file"),
    "JSON printed instead of text": Word("--json", "flag"),
    "how the words written look (plain or tokenized)": Word("--output-format", "choice"),
    "no figures written": Word("--no-figures", "flag"),
    "where a CRNN's weights are kept": Word("--crnn-dir", "dir"),
    "where an experiment keeps its corpora and runs": Word("--work-dir", "dir"),
    # sizes and counts
    "how many tokens generate produces": Word("--max-tokens", "int"),
    "the most tokens one request to the server may generate": Word("--max-request-tokens", "int"),
    "the longest prompt one request to the server may send": Word("--max-prompt", "int"),
    "how many first tokens of each split are scored": Word("--prefix-tokens", "int"),
    "how many likeliest next tokens are listed": Word("--n-best", "int"),
    "the corpus sizes of the increment experiment": Word("--sizes", "list of text"),
    "how many train texts a probe reads": Word("--train-texts", "int"),
    "how many dev texts a probe reads": Word("--dev-texts", "int"),
    "how many test texts a probe reads": Word("--test-texts", "int"),
    "how many train bytes a probe reads": Word("--train-bytes", "int"),
    "how many last bytes of each text a probe reads": Word("--last-bytes", "int"),
    "texts per batch": Word("--batch-size", "int"),
    # sampling
    "the sampling temperature": Word("--temperature", "float"),
    "sampling among the k likeliest tokens only": Word("--top-k", "int"),
    "nucleus sampling's probability mass": Word("--top-p", "float"),
    "the random seed": Word("--seed", "int"),
    "each generated class token shown with its class": Word("--show-classes", "flag"),
    # n-gram models
    "the n of an n-gram model": Word("--order", "int"),
    "the estimator of an n-gram model": Word("--method", "choice"),
    "the constant add-k smoothing adds": Word("--add-k", "float"),
    "lmplz's fixed discounts where count-of-counts give none": Word("--discount-fallback", "flag"),
    "an N-gram column (and N-gram NSLM) in the tables": Word("--ngram", "int"),
    # micro-models
    "the classes fitted or plotted": Word("--only", "list of text"),
    "micro-model metrics": Word("--metric", "list of text"),
    "micro-model PDFs": Word("--pdf", "list of text"),
    "the grid without its slowest PDFs": Word("--fast", "flag"),
    "the context-aware micro-models fitted": Word("--context", "flag"),
    "grid cells per class of the context-aware micro-models": Word("--components", "int"),
    "the previous token a metric reads: same class or same family": Word(
        "--metric-context", "choice"
    ),
    "micro-models refitted though fitted before": Word("--fresh", "flag"),
    # evaluation
    "the ensemble's weight of the NNLM": Word("--lambda", "float"),
    "what the ensemble's weight is tuned for": Word("--lambda-objective", "choice"),
    "NSLM-open: members outside the vocabulary take part (predict's list, generate's draws)": Word(
        "--open-vocab", "flag"
    ),
    "neural-cache columns": Word("--cache", "flag"),
    "the cache windows tried": Word("--cache-window", "list of text"),
    "the cache θ values tried": Word("--cache-theta", "list of text"),
    "the cache λ values tried": Word("--cache-lambda", "list of text"),
    "the CRNN column": Word("--crnn", "flag"),
    "a CRNN's training steps per class": Word("--crnn-steps", "int"),
    "a CRNN's training time per class": Word("--crnn-max-seconds", "float"),
    "the NSLM-best column": Word("--best", "flag"),
    "perplexity by training count (Figure 3)": Word("--by-rarity", "flag"),
    # byte LM: probes and interventions
    "the tags a POS probe learns": Word("--tags", "choice"),
    "a probe's inverse L1 strength": Word("-C", "float"),
    "no bag-of-words baseline": Word("--no-bow", "flag"),
    "the neuron that colours the text": Word("--neuron", "int"),
    "units set to 0 or their mean": Word("--ablate", "list of text"),
    "what an ablated unit holds": Word("--ablate-mode", "choice"),
    "units fixed to a value": Word("--clamp", "list of text"),
    "a direction added at every step": Word("--steer", "text"),
    "where the direction is added": Word("--steer-at", "list of text"),
    "the direction's scale": Word("--steer-scale", "float"),
    # training
    "the device trained on": Word("--device", "text"),
    "passes over the training text": Word("--epochs", "int"),
    "a training time limit": Word("--minutes", "float"),
    # the server
    "the address served on": Word("--host", "text"),
    "the port served on": Word("--port", "int"),
    "server processes": Word("--workers", "int"),
    # the program
    "nslm's version": Word("--version", "flag"),
}

KINDS = {
    "integer": "int",
    "integer range": "int",
    "float": "float",
    "float range": "float",
    "text": "text",
    "choice": "choice",
    "boolean": "flag",
    "file": "file",
    "directory": "dir",
    "path": "path",
}


class Use(NamedTuple):
    command: str  # "nslm micro fit"
    name: str
    kind: str  # "-" for an argument
    dest: str  # the parameter's name in Python: what the command makes of it
    names: tuple[str, ...]  # every long name of an option (one, unless aliased)
    short: tuple[str, ...]
    hidden: bool


def commands(
    command: click.Command = cli, path: str = "nslm"
) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from commands(sub, f"{path} {name}")


def kind_of(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag:
        return "flag"
    kind = KINDS.get(param.type.name, param.type.name)
    return f"list of {kind}" if param.multiple or param.nargs == -1 else kind


def uses(tree: click.Command = cli) -> list[Use]:
    """Every option and argument of the tree, where it is and what it is."""
    found = []
    for path, command in commands(tree):
        for param in command.params:
            if isinstance(param, click.Argument):
                name = param.human_readable_name
                found.append(Use(path, name, "-", param.name or "", (name,), (), False))
                continue
            longs = tuple(o for o in param.opts if o.startswith("--"))
            shorts = tuple(o for o in param.opts if not o.startswith("--"))
            name = longs[0] if longs else shorts[0]
            hidden = bool(getattr(param, "hidden", False))
            found.append(Use(path, name, kind_of(param), param.name or "", longs, shorts, hidden))
    return found


def collisions(tree: click.Command = cli) -> list[str]:
    """The names with two meanings and the concepts with two names, one line each."""
    found = []
    table: dict[str, set[str]] = defaultdict(set)
    for concept, word in VOCABULARY.items():
        table[word.name].add(concept)
    kinds = {word.name: word.kind for word in VOCABULARY.values()}
    by_name: dict[str, list[Use]] = defaultdict(list)
    for use in uses(tree):
        by_name[use.name].append(use)
    for name, its in sorted(by_name.items()):
        meanings = sorted({(u.kind, u.dest) for u in its})
        if len(meanings) > 1:
            where = "; ".join(f"{u.command}: {u.kind} {u.dest}" for u in its)
            found.append(f"{name} has {len(meanings)} meanings ({where})")
        elif len(table.get(name, ())) > 1:
            found.append(f"{name} stands for {len(table[name])} concepts in the table")
        elif name in kinds and meanings[0][0] != kinds[name]:
            found.append(f"{name} takes a {meanings[0][0]}; the vocabulary says a {kinds[name]}")
    for use in uses(tree):
        if len(use.names) > 1:
            found.append(f"{use.command}: one concept, {len(use.names)} names: {use.names}")
    longs_of: dict[str, set[str]] = defaultdict(set)
    for use in uses(tree):
        for short in use.short:
            longs_of[short].add(use.name)
    for short, longs in sorted(longs_of.items()):
        if len(longs) > 1:
            found.append(f"{short} stands for {len(longs)} names: {', '.join(sorted(longs))}")
    return found


def test_every_name_of_the_tree_is_in_the_vocabulary() -> None:
    names = {word.name for word in VOCABULARY.values()}
    unknown = sorted({f"{u.command} {u.name}" for u in uses() if u.name not in names})
    assert not unknown, f"add these to VOCABULARY, each with its concept: {unknown}"


def test_every_name_in_the_vocabulary_is_used() -> None:
    used = {u.name for u in uses()}
    unused = [w.name for w in VOCABULARY.values() if w.name not in used]
    assert not unused, f"names no command takes: {unused}"


def test_each_name_takes_the_kind_of_value_the_vocabulary_says() -> None:
    kinds = {word.name: word.kind for word in VOCABULARY.values()}
    wrong = [
        f"{u.command} {u.name}: {u.kind}, not {kinds[u.name]}"
        for u in uses()
        if u.name in kinds and u.kind != kinds[u.name]
    ]
    assert not wrong, wrong


def test_no_name_has_two_meanings_and_no_concept_two_names() -> None:
    assert collisions() == []


def test_each_concept_of_the_vocabulary_has_one_name() -> None:
    names = [word.name for word in VOCABULARY.values()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_nothing_is_hidden() -> None:
    hidden = [f"{path} (command)" for path, command in commands() if command.hidden]
    hidden += [f"{u.command} {u.name}" for u in uses() if u.hidden]
    assert not hidden, hidden


def test_collisions_are_found() -> None:
    """The check itself: an alias, a name with two kinds, and a name with two meanings."""

    @click.group()
    def tree() -> None:
        pass

    @tree.command("a")
    @click.option("-o", "--out", "--run-dir", "out", type=click.Path(dir_okay=False))
    @click.option("--top-k", "k", type=int)
    @click.option("--context", is_flag=True)
    def a(out: str, k: int, context: bool) -> None:
        pass

    @tree.command("b")
    @click.option("-o", "--out-dir", "out", type=click.Path(file_okay=False))
    @click.option("--top-k", "top_k", type=int)
    @click.option("--context", type=click.Choice(["class", "family"]))
    def b(out: str, top_k: int, context: str) -> None:
        pass

    found = collisions(tree)
    assert len(found) == 4, found
    assert any(line.startswith("--top-k has 2 meanings") for line in found)
    assert any(line.startswith("--context has 2 meanings") for line in found)
    assert any("one concept, 2 names" in line for line in found)
    assert any(line.startswith("-o stands for 2 names") for line in found)


# -- the documents speak the same vocabulary -----------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
HISTORY = ROOT / "docs" / "history.md"  # quotes the old spellings on purpose


def documented_commands(text: str) -> Iterator[str]:
    """The ``nslm …`` command lines of a markdown text: in code blocks (a trailing
    backslash continues a line) and in inline code."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        code = line.split(" #")[0].strip()
        if re.match(r"^([A-Z_][A-Z0-9_]*=\S+ )*((\S*/)?nslm|torchrun .* -m nslm) ", code):
            yield code[code.index("nslm ") :]
    yield from re.findall(r"`(nslm [^`]+)`", text)


def misspelt(command: str) -> str | None:
    """Why ``command`` is not a valid ``nslm`` command line, or None (placeholders and
    brackets of a synopsis are read loosely; a command path that does not resolve is
    skipped)."""
    try:
        words = shlex.split(command.replace("[", " ").replace("]", " ").replace("…", " "))
    except ValueError:
        return None
    target: click.Command = cli
    words = words[1:]
    while isinstance(target, click.Group) and words and words[0] in target.commands:
        target = target.commands[words.pop(0)]
    if isinstance(target, click.Group):
        return None
    if target.context_settings.get("ignore_unknown_options"):
        return None  # its words are another program's (nslm lm-eval hands them to lm-eval)
    options = {o: p for p in target.params if isinstance(p, click.Option) for o in p.opts}
    options.update(
        {o: p for p in target.params if isinstance(p, click.Option) for o in p.secondary_opts}
    )
    arguments = [p for p in target.params if isinstance(p, click.Argument)]
    most = None if any(p.nargs == -1 for p in arguments) else sum(p.nargs for p in arguments)
    positionals = 0
    while words:
        word = words.pop(0)
        if word in ("-h", "--help"):
            return None
        if word.startswith("-") and not re.match(r"^-\d", word):
            name = word.split("=")[0]
            if name not in options:
                return f"no option {name}"
            param = options[name]
            if not param.is_flag and "=" not in word and words:
                words.pop(0)
            continue
        positionals += 1
    if most is not None and positionals > most:
        return f"{positionals} positionals, at most {most}"
    return None


def test_the_documents_use_the_vocabulary() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}: {command!r}: {why}"
        for path in DOCUMENTS
        if path != HISTORY
        for command in documented_commands(path.read_text(encoding="utf-8"))
        if (why := misspelt(command))
    ]
    assert not wrong, "\n".join(wrong)
