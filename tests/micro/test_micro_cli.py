"""``nslm micro`` as a user meets it: micro.json, plots, plug-ins, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import HANG_SECONDS, YEARS_TRAIN
from helpers import make_years_corpus as make_corpus

PLUGIN = '''
import numpy as np
from nslm.micro import register_metric

@register_metric("last_digit", needs=("value",))
def last_digit(cand, ctx):
    """The last digit of a number: a toy metric from outside the package."""
    return np.mod(cand.values, 10)
'''


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nslm", *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        cwd=cwd,
        timeout=HANG_SECONDS,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, text: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny year corpus and a micro.json fitted on it through the CLI."""
    root = tmp_path_factory.mktemp("micro_cli")
    corpus = make_corpus(root / "years")
    out = root / "micro.json"
    cache = str(root / "cache")
    result = run_cli(
        "micro",
        "fit",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--only",
        "year",
        "--out",
        str(out),
        "--prepared-dir",
        cache,
    )
    assert result.returncode == 0, result.stderr
    return corpus, out


def test_fit_writes_the_whole_grid_and_the_choice(tiny: tuple[Path, Path]) -> None:
    _, out = tiny
    payload = json.loads(out.read_text())
    assert payload["format"] == "nslm-micro" and len(payload["vocab_fingerprint"]) == 16
    year = payload["classes"]["year"]
    cells = {(c["metric"], c["context"], c["pdf"]) for c in year["grid"]}
    assert ("diff", "class", "mog") in cells and ("freq", "class", "unigram") in cells
    chosen = year["selected"]
    best = min(c["valid_ppl"] for c in year["grid"] if c["valid_ppl"] is not None)
    assert year["valid_ppl"] == best
    assert chosen["pdf"]["fitted"]  # fitted parameters are in the file, as JSON
    assert year["evaluation"]["test"]["tokens"] == 4


def test_eval_and_plot_read_the_micro_json(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    corpus, out = tiny
    cache = ("--prepared-dir", str(out.parent / "cache"))
    result = run_cli(
        "micro",
        "eval",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--micro-file",
        str(out),
        "--json",
        *cache,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows["year"]["valid"]["tokens"] == 4 and rows["year"]["valid"]["mm_ppl"] > 1
    result = run_cli(
        "micro",
        "plot",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--micro-file",
        str(out),
        "--out-dir",
        str(tmp_path / "plots"),
        *cache,
    )
    assert result.returncode == 0, result.stderr
    png = Path(result.stdout.strip().splitlines()[0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_micro_json_from_another_vocabulary_is_refused(tiny, tmp_path: Path) -> None:
    _, out = tiny
    other = make_corpus(tmp_path / "other", train=YEARS_TRAIN + " In 1999 . \n")
    result = run_cli(
        "micro",
        "eval",
        "--corpus",
        str(other),
        "--classes",
        "numbers",
        "--micro-file",
        str(out),
        "--prepared-dir",
        str(tmp_path / "cache"),
    )
    assert_one_line_error(result, "fitted on another vocabulary")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--metric", "distance"), "unknown metric 'distance'"),
        (("--pdf", "poisson"), "unknown PDF 'poisson'"),
        (("--only", "day"), "<day> has an empty vocabulary"),
        (("--only", "weekday"), "unknown class 'weekday'"),
        (("--plugin", "no_such_plugin.py"), "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tiny, tmp_path: Path, args, message) -> None:
    corpus, _ = tiny
    result = run_cli(
        "micro",
        "fit",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--out",
        str(tmp_path / "m.json"),
        "--prepared-dir",
        str(tmp_path / "c"),
        *args,
    )
    assert_one_line_error(result, message)
    assert not (tmp_path / "m.json").exists()  # no half-written output


def test_a_user_class_and_metric_need_no_package_edit(tiny, tmp_path: Path) -> None:
    """Paper Table 1: a regex class, a plug-in metric, a PDF — all from the user's files."""
    corpus, _ = tiny
    (tmp_path / "my_metrics.py").write_text(PLUGIN)
    (tmp_path / "classes.toml").write_text(
        "plugins = [\"my_metrics.py\"]\n\n[classes.nineties]\nregex = '19\\d\\d'\n"
        'metrics = ["last_digit", "diff"]\npdfs = ["multinomial", "gaussian"]\n'
    )
    out = tmp_path / "user.json"
    result = run_cli(
        "micro",
        "fit",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--only",
        "year",
        "--class-file",
        str(tmp_path / "classes.toml"),
        "--out",
        str(out),
        "--prepared-dir",
        str(tmp_path / "c"),
    )
    assert result.returncode == 0, result.stderr
    entry = json.loads(out.read_text())["classes"]["nineties"]
    assert entry["source"]["kind"] == "regex" and entry["vc_size"] == 5  # 1990-1994
    assert {c["metric"] for c in entry["grid"]} == {"last_digit", "diff"}
    assert {c["pdf"] for c in entry["grid"]} == {"multinomial", "gaussian"}
    # micro.json re-registers the plug-in by itself when read back
    result = run_cli(
        "micro",
        "eval",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--micro-file",
        str(out),
        "--json",
        "--prepared-dir",
        str(tmp_path / "c"),
        cwd=tmp_path.parent,
    )
    assert result.returncode == 0, result.stderr
    assert "nineties" in json.loads(result.stdout)
