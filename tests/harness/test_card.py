"""A run's model card: YAML front matter a Hugging Face reader parses, and figures equal to
the run's own JSON."""

from __future__ import annotations

import json

import pytest

yaml = pytest.importorskip("yaml")


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    head = text.split("---\n")[1]
    return yaml.safe_load(head)


@pytest.mark.parametrize("fixture", ["tiny_nslm_run", "tiny_byte_run"])
def test_the_card_parses_and_its_figures_are_the_runs(fixture, request, tmp_path) -> None:
    from nslm.cli import main

    run = request.getfixturevalue(fixture)
    out = tmp_path / "README.md"
    assert main(["card", str(run), "-o", str(out)]) == 0
    meta = front_matter(out.read_text(encoding="utf-8"))
    assert meta["library_name"] == "nslm" and meta["datasets"]
    metrics = meta["model-index"][0]["results"][0]["metrics"]
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))
    tests = {k: v for k, v in results.items() if k.startswith("test_")}
    assert tests and {m["name"]: m["value"] for m in metrics} == tests
    assert main(["card", str(run), "-o", str(tmp_path)]) == 2  # a directory: one line
