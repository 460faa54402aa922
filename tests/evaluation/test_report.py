"""``nslm report RUN``: one self-contained HTML page of a run, checked as a parsed document."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers import assert_one_line_error, run_cli
from nslm.cli import main


class Page(HTMLParser):
    """What a test reads of a page: headings, tables (rows of cell texts), image sources,
    and every external reference."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.images: list[str] = []
        self.external: list[str] = []
        self._heading: list[str] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            if value and not value.startswith(("data:", "#")):
                self.external.append(value)
        if tag in ("h2", "h3"):
            self._heading = []
        elif tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attrs.get("src", ""))
        elif tag in ("script", "link") and attrs.get("src", attrs.get("href")):
            self.external.append(attrs.get("src", attrs.get("href")))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        for buffer in (self._heading, self._cell):
            if buffer is not None:
                buffer.append(data)


def report(run: Path, out: Path) -> Page:
    assert main(["report", str(run), "-o", str(out)]) == 0
    return Page(out.read_text(encoding="utf-8"))


def test_report_of_an_nslm_run(tiny_nslm_copy: Path, tmp_path: Path) -> None:
    run = tiny_nslm_copy
    assert (
        main(["eval", str(run), "--split", "test", "--by-rarity", "--prefix-tokens", "20000"]) == 0
    )
    assert main(["micro", "plot", str(run)]) == 0
    page = report(run, tmp_path / "r.html")
    assert page.external == []  # self-contained: opens offline
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    for heading in (
        "Overview",
        "Training",
        "Tables 2 and 3 (test)",
        "Micro-models",
        "Perplexity by rarity",
        "Config",
    ):
        assert heading in page.headings
    micro = json.loads((run / "micro.json").read_text())
    for name in micro["classes"]:
        assert any(h.startswith(f"<{name}>") for h in page.headings)
    # Table 2: the run's figures with the paper's beside them, as in tables_test.json
    tables = json.loads((run / "tables_test.json").read_text())["tables"]
    numbers = next(t for t in page.tables if t[0][:3] == ["class", "metric", "PDF"])
    year = next(row for row in numbers if row[0] == "<year>")
    want = tables["numbers"]["rows"]["year"]["NNLM"]
    assert year[4].split()[0] == f"{want:,.1f}"
    assert year[-2] == "486.3" and year[-1].startswith("247.3")  # the paper's NNLM and NSLM
    # figures: training curves, one fitted PDF per class, the rarity chart
    assert len(page.images) >= 1 + len(micro["classes"]) + 1
    config = next(t for t in page.tables if t[0] == ["key", "value"])
    assert ["hidden_size", "32"] in config


def test_report_of_a_byte_lm_with_probes(
    tiny_byte_run: Path, labelled_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "probes"
    assert (
        main(["probe", "sentiment", str(tiny_byte_run), "--out-dir", str(out / "sentiment-sst2")])
        == 0
    )
    assert main(["probe", "pos", str(tiny_byte_run), "--out-dir", str(out / "pos")]) == 0
    run = tmp_path / "run"
    import shutil

    shutil.copytree(tiny_byte_run, run)
    shutil.copytree(out, run / "probes")
    page = report(run, tmp_path / "byte.html")
    assert page.external == []
    assert "Probe: sentiment-sst2" in page.headings and "Probe: pos/grouped" in page.headings
    sentiment = next(t for t in page.tables if t[0][:2] == ["features", "C"])
    assert [r[0] for r in sentiment[1:]][:4] == [
        "final_cell",
        "mean_cell",
        "mean_hidden",
        "mean_cell_hidden",
    ]
    assert "Micro-models" not in page.headings  # a byte LM has none, and no hint for them
    validation = next(t for t in page.tables if t[0][:3] == ["epoch", "step", "lr"])
    assert len(validation) >= 2


def test_a_report_of_a_run_cut_short(tiny_nslm_copy: Path, tmp_path: Path) -> None:
    """No results.json and a cut last metrics line: still a page, saying what is missing."""
    (tiny_nslm_copy / "results.json").unlink()
    for tables in tiny_nslm_copy.glob("tables_*.json"):  # as if never evaluated
        tables.unlink()
    with open(tiny_nslm_copy / "metrics.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"step": 99, "loss_nn')
    page = report(tiny_nslm_copy, tmp_path / "cut.html")
    assert "Training" in page.headings
    text = (tmp_path / "cut.html").read_text()
    assert "has not finished" in text and "nslm eval" in text


@pytest.mark.parametrize("what", ["missing", "not-a-run", "bad-config"])
def test_bad_input_is_one_line(tmp_path: Path, what: str) -> None:
    run = tmp_path / "run"
    if what != "missing":
        run.mkdir()
    if what == "bad-config":
        (run / "config.json").write_text("{not json", encoding="utf-8")
    out = tmp_path / "out.html"
    proc = run_cli("report", str(run), "-o", str(out))
    assert_one_line_error(proc)
    assert not out.exists()
