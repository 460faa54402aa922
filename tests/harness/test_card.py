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


def test_an_ngram_models_card_carries_its_last_evaluation(tmp_path) -> None:
    """An n-gram model's card: its perplexities from ``nslm ngram eval MODEL -o
    MODEL/eval.json``, each equal to the file's; none before it is evaluated."""
    from nslm.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    lines = [" The harbour opened in 1990 and closed in 2001 . ", " In 1990 the town grew . "]
    for split, times in (("train", 8), ("valid", 1), ("test", 1)):
        (corpus / f"{split}.txt").write_text("".join(x + "\n" for x in lines * times))
    model = tmp_path / "kn3"
    build = ["ngram", "build", "--raw", "--order", "3", "--discount-fallback"]
    assert main([*build, "--corpus", str(corpus), "--out-dir", str(model)]) == 0
    out = tmp_path / "README.md"
    assert main(["card", str(model), "-o", str(out)]) == 0
    before = front_matter(out.read_text(encoding="utf-8"))["model-index"][0]["results"][0]
    assert not before["metrics"]  # nothing measured yet
    assert main(["ngram", "eval", str(model), "-o", str(model / "eval.json")]) == 0
    assert main(["card", str(model), "-o", str(out)]) == 0
    meta = front_matter(out.read_text(encoding="utf-8"))
    assert meta["tags"] == ["nslm", "ngram"]
    metrics = meta["model-index"][0]["results"][0]["metrics"]
    rows = json.loads((model / "eval.json").read_text(encoding="utf-8"))["rows"]
    assert {m["name"]: m["value"] for m in metrics} == {
        f"ngram_eval test perplexity ({name})": row["ppl"]
        for name, row in rows.items()
        if isinstance(row, dict)  # "oov_tokens" is a count
    }
