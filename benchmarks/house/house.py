"""The house's install and distribution figures: the lock, a fresh setup from it, two
setups compared, the wheel test, and training on two "nodes" against one.

    python benchmarks/house/house.py [--out benchmarks/results/house.json] [--skip-setup]

Writes benchmarks/results/house.json:

- ``locked``: the lock file and how many packages it pins.
- ``fresh_setup_seconds``: ``make setup`` on a clean clone of the committed tree, into a
  new virtualenv, with pip's cache turned off (every package fetched as a new user would);
  ``fresh_setup_seconds_cached``: a second setup of the same clone with pip's cache. On the
  project's machines pip takes most wheels from a local index mirror and torch from the
  wheel folder, so the two come out alike; unpacking and compiling bytecode is the time.
- ``freeze_identical``: the two setups' ``pip freeze --all`` are the same, line for line.
- ``wheel_ok``: tests/test_wheel.py passes (build, install into a fresh virtualenv,
  ``--help``, ``predict``, ``serve``).
- ``multinode``: the final logged NNLM training loss of 2 torchrun nodes × 1 process and of
  1 node × 2 processes (tiny config, 60 steps), their difference (``diff``), the largest weight
  difference, and whether a run with one node SIGKILLed after a checkpoint resumes and ends
  with the same weights (tests/nodes.py does the launching, as tests/training/test_multinode.py).
- ``packages``: per top-level package of ``src/nslm``, its modules and lines;
  ``system_spread``: per system, how many top-level packages hold its own modules (by their
  path; ``system_packages`` names them; the front ends cli/ and pages/ are not counted);
- ``fmt_skip``, ``hidden_aliases`` (commands and options of the ``nslm`` tree hidden from
  ``--help``, listed in ``hidden_alias_list``), ``cli_collisions`` (option names with two
  meanings or concepts with two names, by tests/cli/test_cli_vocabulary.py's table of the CLI's
  vocabulary, listed in ``cli_collision_list``), ``run_kind_checks`` (places that read a
  run's files to decide its kind outside runs/kinds.py, which decides it once for every
  front end, listed in ``run_kind_check_places``);
- the layout, by tests/test_layout.py's reading of every import (lazy ones and those under
  ``if TYPE_CHECKING:`` too) and its table of stages: ``arrows_back_up`` (imports of a later
  stage, listed in ``arrows_back_up_list``), ``core_imports_of_systems`` (imports of another
  system's package by the NSLM core, listed in ``core_imports_of_systems_list``) and
  ``circles`` (groups of modules that import each other round about, each listed in
  ``circle_list`` as its shortest circle);
- ``benchmarks_layout``: the folders of benchmarks/ with their scripts, the scripts left
  flat, and for each file of benchmarks/results/ the scripts that write it, by
  benchmarks/README.md's table (tests/test_benchmarks_layout.py checks it);
- ``open_set_scoring_paths``: the functions of src/nslm/micro/ that mix the open
  micro-model's cache of new members into a probability (a ``logaddexp`` over a log κ
  term), listed in ``open_set_scoring_path_list``: one, ``open_log_prob``, which every
  scoring call goes through;
- ``python_api_examples``: ``{"passed", "failed"}`` of docs/python.md's examples, run by
  tests/test_python_api.py on the suite's tiny runs (needs $NSLM_DATA_DIR);
- ``duplicate_pairs_src``: the pairs of places in ``src/`` that share six or more lines, the
  same or of the same shape, as the ``duplicates`` tool of the project's tool library counts
  them (``duplicate_pairs_rows`` lists them).

``--code-only`` measures the groups from ``packages`` on alone and merges them into an
existing house.json.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the shared helpers, and the nodes' launcher shared with tests/training/test_multinode.py
sys.path[:0] = [str(ROOT / "benchmarks" / "common"), str(ROOT / "tests")]

from machine import machine_info, today
from nodes import (
    kill_one_node_and_resume,
    losses,
    prepare,
    train_one_node,
    train_two_nodes,
    weight_difference,
)
from nslm.files.atomic import write_json_atomic

LOCK = ROOT / "requirements.lock"
STEPS = 60


def locked() -> dict:
    pins = [line for line in LOCK.read_text().splitlines() if line[:1].isalnum()]
    return {"file": LOCK.name, "packages": len(pins)}


def _setup(clone: Path, venv: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["make", "-C", str(clone), "setup", f"VENV={venv}"],
        env=env,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    return round(time.perf_counter() - start, 1)


def _freeze(venv: Path) -> list[str]:
    out = subprocess.run(
        [str(venv / "bin" / "pip"), "freeze", "--all"], check=True, capture_output=True, text=True
    ).stdout
    return out.splitlines()


def setups(work: Path) -> dict:
    """Two ``make setup`` runs of a clean clone of HEAD: cold (no pip cache), then cached."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    cold = _setup(clone, clone / ".venv", {**os.environ, "PIP_NO_CACHE_DIR": "1"})
    cached = _setup(clone, work / "venv2", dict(os.environ))
    a, b = _freeze(clone / ".venv"), _freeze(work / "venv2")
    return {
        "fresh_setup_seconds": cold,
        "fresh_setup_seconds_cached": cached,
        "fresh_setup_commit": head,
        "freeze_identical": a == b,
        "freeze_lines": len(a),
        "freeze_differences": sorted(set(a) ^ set(b)),
    }


def wheel() -> dict:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_wheel.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return {
        "wheel_ok": done.returncode == 0,
        "wheel_test": summary,
        "wheel_test_seconds": round(time.perf_counter() - start, 1),
    }


def multinode(work: Path) -> dict:
    prepare(STEPS)
    one, two, killed = work / "one-node", work / "two-nodes", work / "killed"
    train_one_node(one, STEPS)
    train_two_nodes(two, STEPS)
    resume = kill_one_node_and_resume(killed, STEPS, kill_after=20)
    loss_two, loss_one = losses(two)[-1][1], losses(one)[-1][1]
    resumed_difference = weight_difference(killed, one)
    return {
        "multinode": {
            "steps": STEPS,
            "loss_two_nodes": loss_two,
            "loss_single_node": loss_one,
            "diff": abs(loss_two - loss_one),
            "weights_max_abs_difference": weight_difference(two, one),
            "resume_ok": resume["steps"] == STEPS
            and not resume["processes_left_after_kill"]
            and resumed_difference == 0.0,
            "resume": {**resume, "weights_max_abs_difference": resumed_difference},
        }
    }


# a system's own modules, by their path under src/nslm (the front ends, cli/ and pages/, hold
# one module per command and page for every system, and are not counted)
SYSTEMS = {
    "numerals": r"numeral|value_metrics",
    "byte_lm": r"byte|probe|steer|colour|intervention|labelled",
    "word_pos": r"word_pos|tagged|brown_tags|sentences",
    "ngram": r"ngram|kneser|arpa",
    "mixtures": r"mixtures/|crnn|char_rnn|best_column|mixture_weights|long_caches|/cache",
}
FRONT_ENDS = ("cli", "pages")
# what reads a run's files to decide its kind: the predicates (anywhere), and config reads in
# the front ends (cli/, pages/); runs/kinds.py decides it once (runs/load.py's guard for a
# byte LM's architecture is the loader's own)
RUN_KIND = r"\b(is_word_pos_run|is_byte_run|is_byte_lm|check_run|_is_ngram|kind_of_config)\("
FRONT_END_CONFIG = r"\b(read_config_json|config_from_json)\("
KIND_MODULES = ("runs/kinds.py", "runs/load.py")


def packages() -> dict:
    """Per top-level package of src/nslm: its modules and lines; per system, the top-level
    packages that hold its own modules (``system_spread``; the NSLM core is every other
    module, in its stage folders)."""
    package = ROOT / "src/nslm"
    modules = sorted(p.relative_to(package) for p in package.rglob("*.py"))
    per: dict[str, dict] = {}
    for rel in modules:
        top = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        lines = len((package / rel).read_text(encoding="utf-8").splitlines())
        entry = per.setdefault(top, {"modules": 0, "lines": 0})
        entry["modules"] += 1
        entry["lines"] += lines
    spread: dict[str, set] = {name: set() for name in ("nslm", *SYSTEMS)}
    for rel in modules:
        top = rel.parts[0] if len(rel.parts) > 1 else "(top level)"
        if top in FRONT_ENDS:
            continue
        owners = [s for s, pattern in SYSTEMS.items() if re.search(pattern, str(rel))]
        for owner in owners or ["nslm"]:
            spread[owner].add(top)
    return {
        "packages": per,
        "system_spread": {name: len(tops) for name, tops in spread.items()},
        "system_packages": {name: sorted(tops) for name, tops in spread.items()},
    }


def hidden_names() -> dict:
    """Commands and options of the ``nslm`` command tree hidden from ``--help``: names a user
    never reads about but that still work (old spellings kept as aliases)."""
    import click

    from nslm.cli import cli

    found = []

    def walk(command: click.Command, path: str) -> None:
        if command.hidden:
            found.append(f"{path} (command)")
        for param in command.params:
            if getattr(param, "hidden", False):
                found.append(f"{path} {'/'.join(param.opts)}")
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}")

    walk(cli, "nslm")
    return {"hidden_aliases": len(found), "hidden_alias_list": found}


def cli_collisions() -> dict:
    """Option names with two meanings and concepts with two names in the ``nslm`` command
    tree, as tests/cli/test_cli_vocabulary.py counts them (by its table of the vocabulary)."""
    sys.path.insert(0, str(ROOT / "tests" / "cli"))
    from test_cli_vocabulary import collisions

    found = collisions()
    return {"cli_collisions": len(found), "cli_collision_list": found}


def conventions() -> dict:
    """``fmt: skip`` lines, hidden CLI options, CLI names with two meanings or concepts with
    two names, and run-kind checks outside runs/kinds.py."""
    package = ROOT / "src/nslm"
    sources = {p: p.read_text(encoding="utf-8") for p in package.rglob("*.py")}

    def reads_kind(rel: str, line: str) -> bool:
        if line.lstrip().startswith("def ") or rel in KIND_MODULES:
            return False
        front = rel.startswith(("cli/", "pages/"))
        return bool(re.search(RUN_KIND, line) or (front and re.search(FRONT_END_CONFIG, line)))

    kind_checks = [
        f"{p.relative_to(package)}:{n}"
        for p, text in sources.items()
        for n, line in enumerate(text.splitlines(), 1)
        if reads_kind(p.relative_to(package).as_posix(), line)
    ]
    return {
        "fmt_skip": sum(text.count("fmt: skip") for text in sources.values()),
        **hidden_names(),
        **cli_collisions(),
        "run_kind_checks": len(kind_checks),
        "run_kind_check_places": kind_checks,
    }


def layout() -> dict:
    """The imports of a later stage, the core's imports of other systems and the circles
    of the import graph, as tests/test_layout.py finds them; benchmarks/'s layout as
    tests/test_benchmarks_layout.py reads it."""
    from test_benchmarks_layout import benchmarks_layout
    from test_layout import arrows_back_up, circles, core_imports_of_systems

    back_up, core, found = arrows_back_up(), core_imports_of_systems(), circles()
    return {
        "arrows_back_up": len(back_up),
        "arrows_back_up_list": back_up,
        "core_imports_of_systems": len(core),
        "core_imports_of_systems_list": core,
        "circles": len(found),
        "circle_list": [" → ".join(circle) for circle in found],
        "benchmarks_layout": benchmarks_layout(),
    }


def open_set_scoring() -> dict:
    """The functions of src/nslm/micro/ that mix the cache of new members into a
    probability: those that call ``logaddexp`` on a term of log κ (``log_k``), read from
    their syntax trees. One is the single scoring path of the open micro-model."""
    found = []
    for path in sorted((ROOT / "src/nslm/micro").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            mixes = any(
                isinstance(call, ast.Call)
                and ast.unparse(call.func).endswith("logaddexp")
                and "log_k" in ast.unparse(call)
                for call in ast.walk(node)
            )
            if mixes:
                found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return {"open_set_scoring_paths": len(found), "open_set_scoring_path_list": found}


def python_api_examples() -> dict:
    """Run tests/test_python_api.py's test of docs/python.md's examples (on the tiny runs of
    the suite): {"passed", "failed"}, as the test counts them."""
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "examples.json"
        env = {**os.environ, "NSLM_API_EXAMPLES_OUT": str(counts)}
        test = "tests/test_python_api.py::test_every_example_of_the_page_runs"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
        subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=1800)
        if not counts.is_file():  # the test did not get to the examples (no data, setup error)
            return {"passed": 0, "failed": None}
        return json.loads(counts.read_text())


def code() -> dict:
    """The package's layout and the duplicated places of its source."""
    result: dict = {
        **packages(),
        **conventions(),
        **layout(),
        **open_set_scoring(),
        "python_api_examples": python_api_examples(),
    }
    tool = shutil.which("duplicates")
    if tool is None:  # the tool library is the project's, not a package: say it was not run
        return result | {"duplicate_pairs_src": None}
    report = subprocess.run(
        [tool, "--repo", str(ROOT / "src"), "--most", "50"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    first = report.strip().splitlines()[0] if report.strip() else ""
    found = re.match(r"(\d+) pairs? of places", first)
    pairs = int(found.group(1)) if found else 0  # "no pairs" and the like: none found
    rows = [line for line in report.splitlines() if re.match(r"D\d+ ", line)]
    return result | {"duplicate_pairs_src": pairs, "duplicate_pairs_rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/house.json")
    parser.add_argument(
        "--skip-setup", action="store_true", help="leave out the two fresh setups (minutes)"
    )
    parser.add_argument(
        "--code-only", action="store_true", help="measure src/ alone, merged into --out"
    )
    args = parser.parse_args()
    if args.code_only:
        result = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
        result.update(code(), code_command="python " + shlex.join(sys.argv), code_date=today())
        write_json_atomic(args.out, result)
        print(args.out)
        return
    result: dict = {
        "command": "python " + shlex.join(sys.argv),
        "date": today(),
        "machine": machine_info(),
        "locked": locked(),
    }
    with tempfile.TemporaryDirectory(prefix="nslm-house-") as tmp:
        work = Path(tmp)
        result.update(multinode(work))
        result.update(wheel())
        if not args.skip_setup:
            result.update(setups(work))
    result.update(code())
    write_json_atomic(args.out, result)
    print(args.out)


if __name__ == "__main__":
    main()
