"""Readers of labelled text: SST-2, IMDB, UD EWT (CoNLL-U), and the byte tags of a sentence."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.byte_lm.labelled import (
    SPACE,
    TaggedSentence,
    Token,
    byte_tags,
    detokenise_ptb,
    parse_conllu,
    read_ewt,
    read_imdb,
    read_sst2,
)
from nslm.errors import NslmError


def _shared() -> Path | None:
    env = os.environ.get("NSLM_DATA_DIR")
    return Path(env) if env and (Path(env) / "sst2").is_dir() else None


needs_labelled = pytest.mark.skipif(_shared() is None, reason="needs $NSLM_DATA_DIR with sst2/")

# A sentence of EWT test (CC BY-SA 4.0) as the file has it, plus an empty node (8.1) as in
# train: a multiword token whose second word starts with a 2-byte character (´, U+00B4).
CONLLU = """\
# text = Hi I´m from Brazil and I want to know of book 06.
1	Hi	hi	INTJ	UH	_	5	discourse	5:discourse	_
2-3	I´m	_	_	_	_	_	_	_	_
2	I	I	PRON	PRP	_	5	nsubj	5:nsubj	_
3	´m	be	AUX	VBP	_	5	cop	5:cop	CorrectForm='m
4	from	from	ADP	IN	_	5	case	5:case	_
5	Brazil	Brazil	PROPN	NNP	Number=Sing	0	root	0:root	_
5.1	wants	want	VERB	VBZ	_	_	_	5:conj	CopyOf=8
6	and	and	CCONJ	CC	_	8	cc	8:cc	_
7	I	I	PRON	PRP	_	8	nsubj	8:nsubj	_
8	want	want	VERB	VBP	_	5	conj	5:conj:and	_
9	to	to	PART	TO	_	10	mark	10:mark	_
10	know	know	VERB	VB	VerbForm=Inf	8	xcomp	8:xcomp	_
11	of	of	ADP	IN	_	12	case	12:case	_
12	book	book	NOUN	NN	Number=Sing	10	obl	10:obl:of	_
13	06	06	NUM	CD	NumType=Card	12	flat	12:flat	SpaceAfter=No
14	.	.	PUNCT	.	_	5	punct	5:punct	SpaceAfter=No

"""


def test_byte_tags_of_a_sentence_with_a_multiword_token_and_utf8() -> None:
    (sentence,) = parse_conllu(CONLLU.splitlines(keepends=True))
    data, tags = byte_tags(sentence)
    assert data.decode("utf-8") == sentence.text  # the empty node adds nothing
    assert len(tags) == len(data)
    # "I´m": I is PRP; all three bytes of "´m" (´ is two bytes) are VBP
    start = data.index("I´m".encode())
    assert tags[start : start + 4] == ["PRP", "VBP", "VBP", "VBP"]
    assert tags[:3] == ["UH", "UH", SPACE]
    # "06." — no separator between 06 and the full stop, and none after the last token
    assert tags[-3:] == ["CD", "CD", "."]
    assert tags.count(SPACE) == data.count(b" ") == 11


@needs_labelled
def test_byte_tags_on_the_real_ewt_test_file() -> None:
    sentences = read_ewt("test", _shared())
    (sentence,) = [s for s in sentences if s.text and s.text.startswith("Hi I´m from Brazil")]
    data, tags = byte_tags(sentence)
    assert data.decode("utf-8") == sentence.text
    assert tags[data.index("´".encode()) : data.index(b"m from")] == ["VBP", "VBP"]
    assert len(sentences) == 2077


def test_conllu_edge_lines() -> None:
    text = "1-2\tcannot\t_\t_\t_\t_\t_\t_\t_\tSpaceAfter=No\n" + "\n".join(
        [
            "1\tcan\tcan\tAUX\tMD\t_\t0\troot\t_\t_",
            "2\tnot\tnot\tPART\tRB\t_\t1\tadvmod\t_\t_",
            "2.1\tgo\tgo\tVERB\tVB\t_\t_\t_\t1:conj\t_",
            "3\t!\t!\tPUNCT\t.\t_\t1\tpunct\t_\t_",
        ]
    )
    (sentence,) = parse_conllu(text.splitlines())  # no blank line at the end: still one
    assert [t.text for t in sentence.tokens] == ["cannot", "!"]
    data, tags = byte_tags(sentence)
    assert data == b"cannot!"
    assert tags == ["MD"] * 3 + ["RB"] * 3 + ["."]


def test_a_bad_conllu_line_is_an_error() -> None:
    with pytest.raises(NslmError, match="CoNLL-U"):
        parse_conllu(["1\tword\tonly three"])


words = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=6)


@given(st.lists(st.tuples(words, st.sampled_from(["NN", "VB", "."]), st.booleans()), min_size=1))
@settings(max_examples=60, deadline=None)
def test_every_byte_gets_its_words_tag(tokens) -> None:
    sentence = TaggedSentence([Token(w, [(w, tag)], space) for w, tag, space in tokens])
    data, tags = byte_tags(sentence)
    assert len(data) == len(tags)
    expected = []
    for i, (w, tag, space) in enumerate(tokens):
        expected += [tag] * len(w.encode("utf-8"))
        if space and i < len(tokens) - 1:
            expected.append(SPACE)
    assert tags == expected


# -- sentiment readers ---------------------------------------------------------------------------


@needs_labelled
@pytest.mark.parametrize(
    ("split", "neg", "pos"), [("train", 3310, 3610), ("dev", 428, 444), ("test", 912, 909)]
)
def test_sst2_counts_match_sources(split: str, neg: int, pos: int) -> None:
    data = read_sst2(split, _shared())
    assert np.bincount(data.labels).tolist() == [neg, pos]
    assert len(data.texts) == neg + pos and all(data.texts)


@needs_labelled
def test_imdb_shuffle_is_seeded_and_balanced() -> None:
    first = read_imdb("test", _shared())
    again = read_imdb("test", _shared())
    assert first.texts[:50] == again.texts[:50]
    assert np.bincount(first.labels).tolist() == [12500, 12500]
    # the file is sorted by label; the shuffled head is not
    assert 0.45 < first.labels[:2000].mean() < 0.55
    other = read_imdb("test", _shared(), seed=1)
    assert other.texts[:50] != first.texts[:50]


def _imdb_dir(tmp_path: Path, lines: list[str]) -> Path:
    (tmp_path / "imdb").mkdir()
    with lzma.open(tmp_path / "imdb" / "train.tsv.xz", "wt", encoding="utf-8") as handle:
        handle.write("".join(lines))
    return tmp_path


def test_imdb_reader_on_a_small_file(tmp_path: Path) -> None:
    lines = [f"{i // 5}\treview {i}\n" for i in range(10)]
    data = read_imdb("train", _imdb_dir(tmp_path, lines))
    assert sorted(data.texts) == sorted(line.split("\t")[1].strip() for line in lines)
    assert all(int(t.split()[1]) // 5 == y for t, y in zip(data.texts, data.labels, strict=True))


def test_bad_input_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(NslmError, match="no sst2 data"):
        read_sst2("train", tmp_path)
    (tmp_path / "sst2").mkdir()
    with pytest.raises(NslmError, match="missing file"):
        read_sst2("train", tmp_path)
    (tmp_path / "sst2" / "dev.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(NslmError, match=r"dev\.txt: file is empty"):
        read_sst2("dev", tmp_path)
    (tmp_path / "sst2" / "test.txt").write_text("2 not a label\n", encoding="utf-8")
    with pytest.raises(NslmError, match="not 0 or 1"):
        read_sst2("test", tmp_path)
    with pytest.raises(NslmError, match="expected label<TAB>text"):
        read_imdb("train", _imdb_dir(tmp_path, ["1 no tab\n"]))


@pytest.mark.parametrize(
    ("tokens", "plain"),
    [
        ("it 's a film , wo n't -lrb- really -rrb- .", "It's a film, won't (really)."),
        ("`` great '' ; ca n't stop !", '"great"; can\'t stop!'),
        ("10 % of $ 5 is n't much ?", "10% of $5 isn't much?"),
        ("", ""),
    ],
)
def test_detokenise_ptb(tokens: str, plain: str) -> None:
    assert detokenise_ptb(tokens) == plain


@needs_labelled
def test_detokenised_sst2_keeps_every_word() -> None:
    """Detokenising moves spaces, brackets and quotes only: the letters of each sentence stay."""
    brackets = {"-lrb-", "-rrb-", "-lsb-", "-rsb-"}
    for text in read_sst2("dev", _shared()).texts:
        words = " ".join(w for w in text.split() if w not in brackets)
        plain = detokenise_ptb(text)
        assert [c for c in plain.lower() if c.isalnum()] == [c for c in words if c.isalnum()]
        assert " ," not in plain and " n't" not in plain and "-lrb-" not in plain
