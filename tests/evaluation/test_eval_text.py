"""Scoring any text with a run's vocabulary: ``nslm.data.fixed_vocab`` and the saved λ.

The synthetic tests prepare a three-line corpus in a temporary directory; the real-data
test checks that a slice of WikiText-2 test prepared as a text file is, token for token,
the prepared corpus's test split.
"""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from nslm.config import TrainConfig
from nslm.data import PreparedCorpus, prepare_corpus
from nslm.data.fixed_vocab import prepare_corpus_dir, prepare_text, prepare_text_file
from nslm.data.text import to_plain
from nslm.errors import NslmError
from nslm.runs.assets import read_run_assets, write_run_assets
from nslm.runs.lambdas import saved_lambdas

# WikiText's shape: a space before and after every line
TRAIN = "".join(
    f" {line} \n"
    for line in (
        "= Alpha =",
        "The town was founded in 1850 and grew in 1900 . It lies near London .",
        "In 1950 the town had 3 @,@ 000 people and a road 5 miles ( 8 km ) long .",
    )
)
OTHER = " The road was built in 1900 near London . \n"


def _corpus_dir(root: Path, train: str = TRAIN, other: str = OTHER) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.txt").write_text(train, encoding="utf-8")
    (root / "valid.txt").write_text(other, encoding="utf-8")
    (root / "test.txt").write_text(other, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> PreparedCorpus:
    root = tmp_path_factory.mktemp("small")
    return prepare_corpus(_corpus_dir(root / "corpus"), "all", cache_root=root / "cache")


def _same_split(got, want) -> None:
    np.testing.assert_array_equal(got.token_ids, want.token_ids)
    np.testing.assert_array_equal(got.rule_class_ids, want.rule_class_ids)
    np.testing.assert_array_equal(got.class_ids, want.class_ids)
    np.testing.assert_array_equal(got.article_ids, want.article_ids)
    np.testing.assert_array_equal(got.values, want.values)  # NaN where NaN
    np.testing.assert_array_equal(got.coords, want.coords)
    np.testing.assert_array_equal(got.convert_targets, want.convert_targets)


def test_a_text_is_prepared_as_the_corpus_was(small: PreparedCorpus, tmp_path: Path) -> None:
    path = tmp_path / "valid_copy.txt"
    path.write_text(OTHER, encoding="utf-8")
    got = prepare_text_file(small, path, name="mine")
    assert got.split.name == "mine"
    _same_split(got.split, small.valid)
    assert (got.oov_tokens, got.oov_class_tokens) == (1, 0)  # "built" is not in train
    # the train split's <convert> got its targets from the unit map: so does the text's
    again = prepare_text(small, TRAIN)
    _same_split(again.split, small.train)
    assert np.isfinite(again.split.convert_targets).any()


def test_out_of_vocabulary_tokens_become_unk_and_are_counted(small: PreparedCorpus) -> None:
    got = prepare_text(small, " The zorblatt was founded in 1777 near London . <unk> \n")
    unk = small.vocab.unk_id
    tokens = [small.vocab.itos[i] for i in got.split.token_ids]
    assert tokens.count("<unk>") == 3  # zorblatt, 1777, and the literal <unk>
    assert (got.oov_tokens, got.oov_types, got.oov_class_tokens) == (2, 2, 1)
    year = small.class_id("year")
    at = int(np.flatnonzero(got.split.oov_class_mask)[0])
    assert got.split.token_ids[at] == unk and got.split.rule_class_ids[at] == year
    assert got.split.class_ids[at] == 0  # modelled as a plain <unk>, as the corpus does
    assert got.split.values[at] == 1777.0
    assert "2 outside the vocabulary" in got.describe()
    assert len(small.vocab) == len(small.vocab.itos)  # the vocabulary did not grow


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "file is empty"),
        (b"  \n \n", "file is empty"),
        (b"\x00\x01\x02binary", "binary file"),
        (b"caf\xe9 au lait\n", "not UTF-8"),
    ],
)
def test_bad_text_files_are_one_line_errors(
    small: PreparedCorpus, tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    with pytest.raises(NslmError, match=message) as info:
        prepare_text_file(small, path)
    assert "\n" not in str(info.value)


def test_missing_file_and_directory_are_one_line_errors(
    small: PreparedCorpus, tmp_path: Path
) -> None:
    with pytest.raises(NslmError, match="not found"):
        prepare_text_file(small, tmp_path / "nope.txt")
    with pytest.raises(NslmError, match="is a directory"):
        prepare_text_file(small, tmp_path)
    with pytest.raises(NslmError, match="no text"):
        prepare_text(small, " \n ")


def test_another_corpus_is_prepared_with_the_runs_vocabulary(
    small: PreparedCorpus, tmp_path: Path
) -> None:
    other = _corpus_dir(tmp_path / "other", train=" A wholly new text in 1900 . \n")
    got = prepare_corpus_dir(small, other)
    assert list(got) == ["train", "valid", "test"]
    assert got["train"].oov_tokens == 4  # A wholly new text: not in the run's vocabulary
    _same_split(got["valid"].split, small.valid)
    with pytest.raises(NslmError, match=r"expected train\.txt"):
        prepare_corpus_dir(small, tmp_path / "other" / "..")


def test_text_from_a_runs_assets_equals_text_from_the_corpus(
    small: PreparedCorpus, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "vocab.json").write_text(json.dumps({"itos": small.vocab.itos}))
    write_run_assets(run, TrainConfig(corpus=small.meta["source"]), small)
    assets = read_run_assets(run)
    _same_split(prepare_text(assets, TRAIN).split, prepare_text(small, TRAIN).split)


def test_a_runs_splits_load_lazily_and_fail_in_one_line(
    small: PreparedCorpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "vocab.json").write_text(json.dumps({"itos": small.vocab.itos}))
    source = small.meta["source"]
    write_run_assets(run, TrainConfig(corpus=source), small)
    monkeypatch.setenv("NSLM_CACHE_DIR", str(tmp_path / "fresh-cache"))
    _same_split(read_run_assets(run).splits["valid"], small.valid)  # prepared again
    moved = Path(source).rename(tmp_path / "moved")
    try:
        assets = read_run_assets(run)
        np.testing.assert_array_equal(assets.class_vocab("year"), small.class_vocab("year"))
        # the cache entry the run was trained on serves the splits without the raw text
        _same_split(assets.valid, small.valid)
        monkeypatch.setenv("NSLM_CACHE_DIR", str(tmp_path / "empty-cache"))
        with pytest.raises(NslmError, match=r"^scoring a split needs the corpus .*corpus: no such"):
            read_run_assets(run).test  # noqa: B018 (the property loads the split)
    finally:
        moved.rename(source)


def test_saved_lambdas(tmp_path: Path) -> None:
    assert saved_lambdas(tmp_path) is None

    def tables(name: str, lam: float, max_tokens: int) -> None:
        data = {
            "lambda_objective": "table",
            "lambda_global": lam,
            "max_tokens": max_tokens,
            "tables": {"numbers": {"lambda": lam}, "places": {"lambda": lam / 2}},
        }
        (tmp_path / name).write_text(json.dumps(data))

    tables("tables_valid.json", 0.4, 0)
    tables("tables_test.json", 0.2, 500)
    got = saved_lambdas(tmp_path)
    assert got is not None and got.path.name == "tables_valid.json"  # a full evaluation first
    assert got.tables == {"numbers": 0.4, "places": 0.2} and got.lambda_global == 0.4
    (tmp_path / "tables_valid.json").write_text("{not json")
    got = saved_lambdas(tmp_path)
    assert got is not None and got.max_tokens == 500 and got.tables["numbers"] == 0.2


@pytest.mark.realdata
def test_a_wikitext_test_slice_as_a_text_file_is_the_test_split(
    wt2_all: PreparedCorpus, data_dir: Path, tmp_path: Path
) -> None:
    lines = (data_dir / "wikitext-2" / "test.txt").read_text(encoding="utf-8").split("\n")
    path = tmp_path / "slice.txt"
    path.write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
    got = prepare_text_file(wt2_all, path, input_format="tokenized")
    n = len(got.split)
    assert n > 10_000
    want = wt2_all.test
    np.testing.assert_array_equal(got.split.token_ids, want.token_ids[:n])
    np.testing.assert_array_equal(got.split.class_ids, want.class_ids[:n])
    np.testing.assert_array_equal(got.split.rule_class_ids, want.rule_class_ids[:n])
    np.testing.assert_array_equal(got.split.values, want.values[:n])
    np.testing.assert_array_equal(got.split.article_ids, want.article_ids[:n])
    np.testing.assert_array_equal(got.split.convert_targets, want.convert_targets[:n])
    literal_unk = sum(line.split().count("<unk>") for line in lines[:300])
    unk_positions = int((got.split.token_ids == wt2_all.vocab.unk_id).sum())
    assert got.oov_tokens == unk_positions - literal_unk > 0
    assert got.oov_class_tokens == int(want.oov_class_mask[:n].sum()) > 0
    # the same lines as plain text: tokenized again by the module, they read (almost) the same
    plain = tmp_path / "plain.txt"
    plain.write_text("\n".join(to_plain(line.split()) for line in lines[:300]) + "\n")
    again = prepare_text_file(wt2_all, plain)
    match = difflib.SequenceMatcher(
        a=again.split.token_ids.tolist(), b=want.token_ids[:n].tolist(), autojunk=False
    )
    assert sum(b.size for b in match.get_matching_blocks()) / n > 0.995
    assert np.array_equal(np.bincount(again.split.class_ids), np.bincount(got.split.class_ids))
    assert again.plain_bytes == len(plain.read_bytes()) and again.plain_words > n // 2


def test_eval_cli_scores_a_text_file_and_another_corpus(
    tiny_nslm_copy: Path, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``nslm eval RUN --text FILE``: per-class tables of any text with the run's vocabulary
    and rules, OOV tokens counted; λ from the run's last eval. ``--corpus DIR``: another
    train/valid/test directory, λ tuned on its valid."""
    from nslm.cli import main
    from nslm.data.textfile import read_text

    run = tiny_nslm_copy
    assert main(["eval", str(run), "--split", "test", "--prefix-tokens", "3000"]) == 0
    saved = json.loads((run / "tables_test.json").read_text())
    lines = read_text(data_dir / "wikitext-2" / "test.txt").splitlines()[:200]
    text = tmp_path / "slice.txt"
    text.write_text("\n".join([*lines, " Zyxwvut 1066 was a year . "]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["eval", str(run), "--text", str(text), "--input-format", "tokenized"]) == 0
    out, err = capsys.readouterr()
    assert "Table 2" in out and "outside the vocabulary" in err and "Zyxwvut" not in out
    assert "bits/byte" in out
    got = json.loads((run / "tables_text.json").read_text())
    figures = got["text"]
    assert figures["oov_tokens"] >= 1 and figures["oov_types"] >= 1 and figures["bytes"] > 0
    for row in figures["models"].values():  # an OOV costs more once adjusted, never less
        assert row["ppl_adjusted"] >= row["ppl"] > 1 and 0 < row["bits_per_byte"] < 10
        # proper: P(<unk>|h) spread over the unseen strings, so each OOV costs more still
        assert row["ppl_proper"] > row["ppl"]
        bits = math.log2(row["ppl_proper"]) * (figures["tokens"] - 1) / figures["bytes"]
        assert row["bits_per_byte"] == pytest.approx(bits, rel=1e-6)
    assert got["split"] == "text" and got["lambda_global"] == saved["lambda_global"]
    numbers = got["tables"]["numbers"]
    assert numbers["lambda"] == saved["tables"]["numbers"]["lambda"]
    assert numbers["rows"]["Global"]["NSLM"] > 1 and numbers["tokens"]["year"] > 0
    # another corpus directory with the same files: λ tuned on its own valid
    other = tmp_path / "other"
    other.mkdir()
    for name in ("train", "valid", "test"):
        (other / f"{name}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out_json = tmp_path / "other.json"
    assert (
        main(["eval", str(run), "--corpus", str(other), "--split", "test", "-o", str(out_json)])
        == 0
    )
    other_tables = json.loads(out_json.read_text())
    assert other_tables["tables"]["numbers"]["rows"]["Global"]["NNLM"] > 1
    # both at once is a one-line error
    assert main(["eval", str(run), "--text", str(text), "--corpus", str(other)]) == 2


def test_a_conllu_file_is_scored_document_by_document(
    small: PreparedCorpus, tmp_path: Path
) -> None:
    sentence = (
        "# text = The road was built in {year} near London.\n1\tThe\t_\t_\t_\t_\t_\t_\t_\t_\n\n"
    )
    conllu = "".join(f"# newdoc id = d{i}\n" + sentence.format(year=1900 + i) for i in range(3))
    path = tmp_path / "three.conllu"
    path.write_text(conllu, encoding="utf-8")
    got = prepare_text_file(small, path)
    assert sorted(set(got.split.article_ids.tolist())) == [0, 1, 2]
    lines = "".join(f"The road was built in {1900 + i} near London.\n" for i in range(3))
    plain = prepare_text(small, lines)
    assert set(plain.split.article_ids.tolist()) == {0}  # no break said: one document
    np.testing.assert_array_equal(got.split.token_ids, plain.split.token_ids)
    with pytest.raises(NslmError, match="CoNLL-U file is read as plain text"):
        prepare_text_file(small, path, input_format="tokenized")
