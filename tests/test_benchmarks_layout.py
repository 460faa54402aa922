"""benchmarks/ is grouped in folders by the system or question a script answers, and every
file of benchmarks/results/ has the script that writes it.

benchmarks/README.md's table maps each script to the result files it writes and to its
section of BENCHMARKS.md; this test holds the table to the folders, to results/ and to
BENCHMARKS.md's headings, and every path to a script under ``benchmarks/`` that the documentation,
the scripts, the package and the tests name to a script that exists. House.py reports the
same map (``benchmarks/house/house.py``: ``benchmarks_layout``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"
MAX_FLAT = 3  # scripts left at the top of benchmarks/, outside any folder
RESULT_FILE = re.compile(r"`([\w.-]+\.(?:json|jsonl|png))`")
SECTION = re.compile(r"\(\.\./BENCHMARKS\.md#([\w-]+)\)")
# where a path to a script may be written down
MENTIONS = ("BENCHMARKS.md", "README.md", "docs", "benchmarks", "src", "tests", "configs")
SCRIPT_PATH = re.compile(r"benchmarks/[\w/]+\.py\b")


def scripts() -> list[str]:
    """Every script under benchmarks/, as its path there (``table4/table4.py``)."""
    return sorted(p.relative_to(BENCHMARKS).as_posix() for p in BENCHMARKS.rglob("*.py"))


def table() -> dict[str, tuple[list[str], list[str]]]:
    """benchmarks/README.md's table: script → (the result files it writes, the anchors of
    its sections in BENCHMARKS.md)."""
    rows = {}
    for line in (BENCHMARKS / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].endswith(".py`"):
            rows[cells[0].strip("`")] = (RESULT_FILE.findall(cells[1]), SECTION.findall(cells[2]))
    return rows


def benchmarks_layout() -> dict:
    """The folders of benchmarks/ with their scripts, the scripts left flat, and for each
    file of benchmarks/results/ the scripts that write it (by benchmarks/README.md)."""
    folders: dict[str, list[str]] = {}
    for script in scripts():
        folder, _, name = script.rpartition("/")
        if folder:
            folders.setdefault(folder, []).append(name)
    writers: dict[str, list[str]] = {p.name: [] for p in sorted(RESULTS.iterdir())}
    for script, (files, _) in table().items():
        for name in files:
            writers.setdefault(name, []).append(script)
    return {
        "folders": folders,
        "scripts_flat": [s for s in scripts() if "/" not in s],
        "result_writers": writers,
    }


def slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it: lower case, punctuation dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_at_most_three_scripts_are_left_flat() -> None:
    flat = benchmarks_layout()["scripts_flat"]
    assert len(flat) <= MAX_FLAT, f"put {flat} in the folder of what they answer"


def test_the_table_lists_every_script_and_only_those() -> None:
    assert sorted(table()) == scripts()


def test_every_result_file_has_a_script_that_writes_it() -> None:
    writers = benchmarks_layout()["result_writers"]
    orphans = [name for name, by in writers.items() if not by]
    assert not orphans, f"benchmarks/README.md names no script that writes {orphans}"
    unknown = [name for name in writers if not (RESULTS / name).is_file()]
    assert not unknown, f"benchmarks/README.md names result files not in results/: {unknown}"


def test_every_section_named_is_a_heading_of_benchmarks_md() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    anchors = {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    named = {a for _, sections in table().values() for a in sections}
    assert named <= anchors, f"no such heading in BENCHMARKS.md: {sorted(named - anchors)}"


def test_every_path_to_a_script_names_one_that_exists() -> None:
    files = []
    for place in MENTIONS:
        where = ROOT / place
        found = where.rglob("*") if where.is_dir() else [where]
        files += [
            p for p in found if p.suffix in (".md", ".py", ".toml") and RESULTS not in p.parents
        ]
    stale = sorted(
        {
            f"{p.relative_to(ROOT)}: {path}"
            for p in files
            for path in SCRIPT_PATH.findall(p.read_text(encoding="utf-8"))
            if not (ROOT / path).is_file()
        }
    )
    assert not stale, "paths to no script: " + "; ".join(stale)
