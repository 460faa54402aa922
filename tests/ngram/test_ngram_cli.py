"""``nslm ngram build|eval|export-arpa`` and ``nslm generate`` as a user meets them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nslm.cli import main

LINES = [
    " = Harbour = ",
    " The harbour opened in 1990 and closed in 2001 . ",
    " The town has 2,500 people and a small harbour . ",
    " In 1990 the town built a new school . ",
    " The school opened in 1995 . ",
    " ",
    " = School = ",
    " The new school has 300 pupils . ",
    " The harbour and the school are in the town . ",
]


def make_corpus(directory: Path, train_lines: list[str] | None = None) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    train = train_lines if train_lines is not None else LINES * 6
    (directory / "train.txt").write_text("".join(line + "\n" for line in train))
    for split in ("valid", "test"):
        (directory / f"{split}.txt").write_text("".join(line + "\n" for line in LINES[:5]))
    return directory


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, err: str, needle: str) -> None:
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


@pytest.mark.parametrize("order", ["0", "10"])
def test_bad_order_exits_2(tmp_path: Path, capsys, order: str) -> None:
    corpus = make_corpus(tmp_path / "c")
    code, _, err = run(
        capsys,
        "ngram",
        "build",
        "--order",
        order,
        "--corpus",
        str(corpus),
        "--out-dir",
        str(tmp_path / "m"),
    )
    assert_one_line_error(code, err, "between 1 and 9")
    assert not (tmp_path / "m").exists()


def test_empty_corpus_exits_2(tmp_path: Path, capsys) -> None:
    corpus = make_corpus(tmp_path / "c", train_lines=[])
    for extra in ([], ["--raw"]):
        code, _, err = run(
            capsys,
            "ngram",
            "build",
            *extra,
            "--prepared-dir",
            str(tmp_path / "cache"),
            "--corpus",
            str(corpus),
            "--out-dir",
            str(tmp_path / "m"),
        )
        assert_one_line_error(code, err, "empty")
    assert not (tmp_path / "m").exists()


def test_broken_arpa_exits_2(tmp_path: Path, capsys) -> None:
    arpa = tmp_path / "broken.arpa"
    arpa.write_text("\\data\\\nngram 1=x\n")
    code, _, err = run(capsys, "ngram", "eval", str(arpa))
    assert_one_line_error(code, err, "broken ARPA header")
    code, _, err = run(capsys, "generate", str(arpa), "a")
    assert_one_line_error(code, err, "broken ARPA header")


def test_kn_failure_leaves_no_model(tmp_path: Path, capsys) -> None:
    corpus = make_corpus(tmp_path / "c")
    out = tmp_path / "m"
    code, _, err = run(
        capsys,
        "ngram",
        "build",
        "--raw",
        "--order",
        "5",
        "--corpus",
        str(corpus),
        "--out-dir",
        str(out),
    )
    assert_one_line_error(code, err, "discount")
    assert not out.exists() and not list(tmp_path.glob(".m*"))


def test_build_eval_export_generate(tmp_path: Path, capsys) -> None:
    corpus = make_corpus(tmp_path / "c")
    model_dir = tmp_path / "model"
    cache = ["--prepared-dir", str(tmp_path / "cache")]
    code, _, err = run(
        capsys,
        "ngram",
        "build",
        "--order",
        "3",
        "--discount-fallback",
        *cache,
        "--corpus",
        str(corpus),
        "--out-dir",
        str(model_dir),
    )
    assert code == 0, err
    assert (model_dir / "model.json").is_file() and (model_dir / "model.npz").is_file()

    code, out, err = run(capsys, "ngram", "eval", str(model_dir), "--json", *cache)
    assert code == 0, err
    result = json.loads(out)
    rows = result["rows"]
    # every test token but the first is scored: the evaluator's contract
    n_test = sum(len(line.split()) + 1 for line in LINES[:5])
    assert rows["Global"]["tokens"] == n_test - 1
    assert np.isfinite(rows["Global"]["ppl"]) and rows["Global"]["ppl"] > 1
    assert "year" in rows and rows["year"]["tokens"] > 0

    arpa = tmp_path / "model.arpa"
    code, _, err = run(capsys, "ngram", "export-arpa", str(model_dir), "-o", str(arpa))
    assert code == 0, err
    code, out, err = run(
        capsys, "ngram", "eval", str(arpa), "--json", "--corpus", str(corpus), *cache
    )
    assert code == 0, err
    assert json.loads(out)["rows"]["Global"] == rows["Global"]

    # a plain text file: the API's own score of it, as bits per byte (lm-eval's other door)
    text = tmp_path / "text.txt"
    text.write_text("The school closed in 2001 .\nIt opened again .\n", encoding="utf-8")
    code, out, err = run(capsys, "ngram", "eval", str(model_dir), "--text", str(text), "--json")
    assert code == 0, err
    import nslm

    scored = nslm.load(model_dir).score(text.read_text(encoding="utf-8"))
    got = json.loads(out)
    assert got["bits_per_byte"] == scored.bits_per_byte and got["tokens"] == 12  # and </s>
    assert run(capsys, "ngram", "eval", str(model_dir), "--text", str(text), "--raw")[0] == 2
    assert run(capsys, "ngram", "eval", str(model_dir), "--text", str(tmp_path / "none"))[0] == 2

    args = ["generate", str(model_dir), "The", "--max-tokens", "12", "--seed", "5"]
    first = run(capsys, *args)
    second = run(capsys, *args)
    assert first[0] == 0 and first == second
    assert first[1].startswith("The ")
    assert len(first[1].split()) >= 2


def test_mle_eval_reports_infinite_perplexity(tmp_path: Path, capsys) -> None:
    corpus = make_corpus(tmp_path / "c")
    (corpus / "test.txt").write_text(" The school closed in 2001 and opened a harbour . \n")
    model_dir = tmp_path / "mle"
    code, _, err = run(
        capsys,
        "ngram",
        "build",
        "--raw",
        "--order",
        "3",
        "--method",
        "mle",
        "--corpus",
        str(corpus),
        "--out-dir",
        str(model_dir),
    )
    assert code == 0, err
    code, out, _ = run(capsys, "ngram", "eval", str(model_dir), "--json")
    result = json.loads(out)
    # JSON has no infinity: an infinite perplexity is null, explained by the zero count
    assert result["rows"]["Global"]["ppl"] is None and result["zero_probability_tokens"] > 0
    assert result["zero_probability_tokens"] > 0
    code, out, _ = run(capsys, "ngram", "eval", str(model_dir))
    assert "inf" in out and "probability 0" in out


def test_one_spelling_for_the_corpus_and_the_outputs(tmp_path: Path, capsys) -> None:
    corpus = make_corpus(tmp_path / "c")
    cache = ["--prepared-dir", str(tmp_path / "cache")]
    model = tmp_path / "model"
    build = ["ngram", "build", "--order", "2", "--method", "mle", *cache]
    code, _, err = run(capsys, *build, "--corpus", str(corpus), "--out-dir", str(model))
    assert code == 0, err
    assert json.loads((model / "model.json").read_text())["meta"]["corpus"] == str(corpus)
    # no positional corpus or folder, no -o for a folder
    for spelling in (
        [str(corpus), str(tmp_path / "positional")],
        ["--corpus", str(corpus), "-o", str(tmp_path / "o")],
    ):
        code, _, err = run(capsys, *build, *spelling)
        assert code == 2 and "error: " in err
    assert not (tmp_path / "positional").exists() and not (tmp_path / "o").exists()
    code, _, err = run(capsys, "ngram", "build", *cache)
    assert_one_line_error(code, err, "--out-dir DIR")
    for out_flag in ("-o", "--out"):
        target = tmp_path / f"eval{out_flag}.json"
        code, _, err = run(capsys, "ngram", "eval", str(model), *cache, out_flag, str(target))
        assert code == 0 and target.is_file(), err
    code, _, err = run(capsys, "ngram", "eval", str(model), *cache, "--output", "x.json")
    assert code == 2 and "--output" in err
    # --split is a list, as on nslm eval: one table per split, the JSON keyed by split
    code, out, err = run(
        capsys, "ngram", "eval", str(model), *cache, "--split", "valid,test", "--json"
    )
    assert code == 0, err
    both = json.loads(out)
    assert list(both) == ["valid", "test"]
    code, out, _ = run(capsys, "ngram", "eval", str(model), *cache, "--split", "test", "--json")
    assert json.loads(out)["rows"] == both["test"]["rows"]
    code, out, _ = run(capsys, "ngram", "eval", str(model), *cache, "--split", "valid,test")
    assert code == 0 and out.count("Global") == 2  # a table each
