"""ARPA export → import is lossless; malformed ARPA files give one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ngram_corpora import lines_stream, markov_stream
from nslm.errors import NslmError
from nslm.ngram.arpa import read_arpa, write_arpa
from nslm.ngram.build import build_model
from nslm.ngram.model import NgramModel

TRAIN = markov_stream(8_000, seed=3)
HELD_OUT = markov_stream(1_000, seed=4)


@pytest.mark.parametrize(("method", "order"), [("kn", 1), ("kn", 3), ("kn", 5), ("mle", 3)])
def test_round_trip_gives_identical_log_probabilities(
    tmp_path: Path, method: str, order: int
) -> None:
    model = build_model(TRAIN, order, method, discount_fallback=(0.5, 1.0, 1.5))
    path = tmp_path / "lm.arpa"
    write_arpa(model, path)
    back = read_arpa(path)
    assert back.itos == model.itos
    for k in range(order):
        np.testing.assert_array_equal(back.keys[k], model.keys[k])
        np.testing.assert_array_equal(back.log10_prob[k], model.log10_prob[k])
        if k < order - 1:
            np.testing.assert_array_equal(back.log10_backoff[k], model.log10_backoff[k])
    np.testing.assert_array_equal(back.score_ids(HELD_OUT.ids), model.score_ids(HELD_OUT.ids))
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file was renamed away


def test_arpa_layout(tmp_path: Path) -> None:
    model = build_model(lines_stream(["a b", "a c", "b a"]), 2, discounts=[[0.5, 1.0, 1.5]] * 2)
    path = tmp_path / "toy.arpa"
    write_arpa(model, path)
    text = path.read_text().split("\n")
    assert text[:3] == ["\\data\\", "ngram 1=6", "ngram 2=8"]
    assert "\\1-grams:" in text and "\\2-grams:" in text and text[-2] == "\\end\\"
    bos_line = next(line for line in text if line.split("\t")[1:2] == ["<s>"])
    assert bos_line.startswith("-99.0\t")  # P(<s>) = 0, written the ARPA way
    a_line = next(line for line in text if line.split("\t")[1:2] == ["a"])
    assert float(a_line.split("\t")[0]) == pytest.approx(np.log10(0.225))


def test_save_and_load_npz_json(tmp_path: Path) -> None:
    model = build_model(TRAIN, 3)
    model.save(tmp_path / "m")
    back = NgramModel.load(tmp_path / "m")
    np.testing.assert_array_equal(back.score_ids(HELD_OUT.ids), model.score_ids(HELD_OUT.ids))
    assert back.meta["discounts"] == model.meta["discounts"]


GOOD_HEADER = "\\data\\\nngram 1=3\n\n\\1-grams:\n-0.5\t<s>\n-0.5\t</s>\n-0.3\ta\n\n\\end\\\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ngram 1=3\n\\1-grams:\n", "no \\\\data"),
        ("\\data\\\nngram one=3\n", "broken ARPA header"),
        ("\\data\\\n\n\\1-grams:\n", "no 'ngram"),
        (GOOD_HEADER.replace("ngram 1=3", "ngram 1=4"), "header says 4"),
        (GOOD_HEADER.replace("-0.3\ta", "x\ta"), "malformed"),
        (GOOD_HEADER.replace("\\end\\", ""), "end"),
        (GOOD_HEADER.replace("<s>", "b"), "lack <s>"),
    ],
)
def test_malformed_arpa_is_a_one_line_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.arpa"
    path.write_text(text)
    with pytest.raises(NslmError, match=message) as info:
        read_arpa(path)
    assert "\n" not in str(info.value)


def test_minimal_arpa_without_unk_reads(tmp_path: Path) -> None:
    path = tmp_path / "ok.arpa"
    path.write_text(GOOD_HEADER)
    model = read_arpa(path)
    assert model.itos[-1] == "<unk>"  # added with probability 0 for OOV lookups
    assert np.isneginf(model.log10_prob[0][-1])


def test_kenlm_reads_our_arpa_and_agrees(tmp_path: Path) -> None:
    """Interoperability, where the optional ``kenlm`` module is installed (``pip install
    kenlm``; it is compiled, so it is not a dev dependency): KenLM scores every held-out
    token as we do, to KenLM's float32 precision."""
    kenlm = pytest.importorskip("kenlm")
    model = build_model(TRAIN, 4)
    path = tmp_path / "lm.arpa"
    write_arpa(model, path)
    loaded = kenlm.Model(str(path))
    eos = model.eos_id
    ends = np.flatnonzero(HELD_OUT.ids == eos)
    sentences = np.split(HELD_OUT.ids, ends + 1)[:-1]
    theirs = [
        s[0]
        for sent in sentences
        for s in loaded.full_scores(" ".join(model.itos[i] for i in sent[:-1]), eos=True)
    ]
    ours = model.score_ids(HELD_OUT.ids, first_nan=False) / np.log(10)
    np.testing.assert_allclose(theirs, ours, atol=1e-5)
