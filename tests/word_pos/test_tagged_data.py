"""POS-tagged corpora for the word+POS LM: Brown (universal tags), UD EWT (XPOS), tagged:DIR."""

from __future__ import annotations

import lzma
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.errors import NslmError
from nslm.word_pos.brown_tags import UNIVERSAL_TAGS, universal_tag
from nslm.word_pos.tagged import (
    TaggedCorpus,
    brown_split_of,
    load_tagged_corpus,
    parse_tagged_line,
    split_token,
)

# -- real data --------------------------------------------------------------------------------


def _corpus(data_dir: Path, folder: str, name: str) -> TaggedCorpus:
    if not (data_dir / folder).is_dir():
        pytest.skip(f"needs $NSLM_DATA_DIR with {folder}/")
    return load_tagged_corpus(name, data_dir)


@pytest.fixture(scope="module")
def brown(data_dir: Path) -> TaggedCorpus:
    return _corpus(data_dir, "brown", "brown")


@pytest.fixture(scope="module")
def ewt(data_dir: Path) -> TaggedCorpus:
    return _corpus(data_dir, "ud-english-ewt", "ewt")


def test_brown_first_sentence_of_ca01(brown: TaggedCorpus) -> None:
    # ca01 sorts first, so its first sentence (line 2, after the header) opens train
    assert brown.train.lines is not None and brown.train.lines[0] == 2
    text = (
        "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
        "election produced `` no evidence '' that any irregularities took place ."
    )
    tags = (
        "DET NOUN NOUN ADJ NOUN VERB NOUN DET NOUN ADP NOUN ADJ NOUN "
        "NOUN VERB . DET NOUN . ADP DET NOUN VERB NOUN ."
    )
    assert brown.train.words[0] == text.split(" ")
    assert brown.train.tags[0] == tags.split(" ")


def test_every_brown_tag_maps(data_dir: Path, brown: TaggedCorpus) -> None:
    with lzma.open(data_dir / "brown" / "brown.tsv.xz", "rt", encoding="utf-8") as handle:
        next(handle)
        tags = {
            token.rpartition("/")[2] for line in handle for token in line.split("\t")[4].split()
        }
    assert len(tags) == 472  # SOURCES.md
    assert {universal_tag(tag) for tag in tags} == set(UNIVERSAL_TAGS)
    assert brown.tagset == sorted(UNIVERSAL_TAGS)
    assert brown.tag_map == "universal-12"


def test_brown_split_sizes(brown: TaggedCorpus) -> None:
    sizes = {name: (len(split), split.n_tokens()) for name, split in brown.splits.items()}
    assert sizes == {
        "train": (46_175, 929_728),
        "valid": (5_523, 115_661),
        "test": (5_642, 115_803),
    }
    assert sum(n for n, _ in sizes.values()) == 57_340  # SOURCES.md
    assert sum(t for _, t in sizes.values()) == 1_161_192


def test_ewt_dont_is_two_syntactic_words(ewt: TaggedCorpus) -> None:
    words, tags = ewt.train.words[8], ewt.train.tags[8]
    j = words.index("n't")
    assert (words[j - 1 : j + 1], tags[j - 1 : j + 1]) == (["do", "n't"], ["VBP", "RB"])
    assert ewt.train.source.endswith("train.conllu.xz")
    assert ewt.valid.source.endswith("dev.conllu.xz")


def test_ewt_tags_of_valid_and_test_occur_in_train(ewt: TaggedCorpus) -> None:
    assert len(ewt.tagset) == 49  # SOURCES.md
    for split in (ewt.valid, ewt.test):
        assert {tag for sentence in split.tags for tag in sentence} <= set(ewt.tagset)
    sizes = {name: (len(split), split.n_tokens()) for name, split in ewt.splits.items()}
    assert sizes == {
        "train": (12_544, 204_577),
        "valid": (2_001, 25_147),
        "test": (2_077, 25_094),
    }
    assert ewt.tag_map == "ptb-xpos"


# -- the Brown tag map ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "universal"),
    [
        ("np$", "NOUN"),
        ("nn-tl", "NOUN"),
        ("nns$-tl-hl", "NOUN"),
        ("jj-hl", "ADJ"),
        ("ppss+md", "PRON"),
        ("to+vb", "PRT"),
        ("fw-nn", "X"),
        ("fw-in+at-t", "X"),  # a misprint of fw-in+at-tl
        ("*", "ADV"),
        ("*-hl", "ADV"),
        ("bedz*", "VERB"),
        ("do*-hl", "VERB"),
        ("nil", "X"),
        ("uh", "X"),
        ("---hl", "."),
        ("``", "."),
        ("pp$$", "PRON"),
        ("wp$", "PRON"),
        ("abl", "DET"),
        ("od", "ADJ"),
        ("cd$", "NUM"),
        ("wdt+ber+pp", "DET"),  # "whaddya", a misprint of wdt+ber+ppss
    ],
)
def test_universal_tag(tag: str, universal: str) -> None:
    assert universal_tag(tag) == universal


@pytest.mark.parametrize("tag", ["zz", "pp", "nn+", "nn+zz", "fw-", "fw-zz", "NN", "nn-xx", ""])
def test_an_unknown_brown_tag_raises(tag: str) -> None:
    with pytest.raises(NslmError, match="unknown Brown tag"):
        universal_tag(tag)


def test_brown_split_rule() -> None:
    fileids = [f"c{letter}{i:02d}" for letter in "ba" for i in range(1, 11)]
    split_of = brown_split_of(fileids)
    assert [name for name, split in split_of.items() if split != "train"] == [
        "ca09",
        "ca10",
        "cb09",
        "cb10",
    ]
    assert split_of["ca09"] == "valid" and split_of["ca10"] == "test"


def _brown_dir(tmp_path: Path, rows: list[str]) -> Path:
    (tmp_path / "brown").mkdir(parents=True)
    text = "fileid\tcategory\tpara\tsent\ttagged\n" + "".join(row + "\n" for row in rows)
    with lzma.open(tmp_path / "brown" / "brown.tsv.xz", "wt", encoding="utf-8") as handle:
        handle.write(text)
    return tmp_path


def test_brown_reader_splits_by_file_and_names_the_line_of_an_unknown_tag(
    tmp_path: Path,
) -> None:
    rows = [f"c{i:03d}\tnews\t0\t0\tThe/at end/nn ./." for i in range(10)]
    corpus = load_tagged_corpus("brown", _brown_dir(tmp_path, rows))
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (8, 1, 1)
    assert corpus.valid.lines == [10] and corpus.test.lines == [11]
    assert corpus.test.tags == [["DET", "NOUN", "."]]
    bad = _brown_dir(tmp_path / "bad", [*rows[:3], "c003\tnews\t0\t1\tThe/at end/zz"])
    with pytest.raises(NslmError, match=r"brown\.tsv\.xz:5: unknown Brown tag 'zz'"):
        load_tagged_corpus("brown", bad)


# -- tagged:DIR -------------------------------------------------------------------------------

GOOD = {
    "train.txt": "The/DT cat/NN sat/VBD ./.\n\nA dog\tDT NN\n1/2/CD cups/NNS\n",
    "valid.txt": "The/DT dog/NN ./.\n",
    "test.txt": "\n  \nA\tDT\n",
}


def _custom(tmp_path: Path, **files: str | None) -> Path:
    """A tagged:DIR of GOOD with ``files`` replaced (``train_txt="…"``; None removes it)."""
    directory = tmp_path / "corpus"
    directory.mkdir(exist_ok=True)
    for name, text in {**GOOD, **{k.replace("_", "."): v for k, v in files.items()}}.items():
        if text is not None:
            (directory / name).write_text(text, encoding="utf-8")
    return directory


def test_a_custom_corpus_in_both_forms(tmp_path: Path) -> None:
    corpus = load_tagged_corpus(f"tagged:{_custom(tmp_path)}")
    assert corpus.train.words == [["The", "cat", "sat", "."], ["A", "dog"], ["1/2", "cups"]]
    assert corpus.train.tags == [["DT", "NN", "VBD", "."], ["DT", "NN"], ["CD", "NNS"]]
    assert corpus.train.lines == [1, 3, 4]
    assert corpus.test.words == [["A"]] and corpus.test.lines == [3]
    assert corpus.tagset == [".", "CD", "DT", "NN", "NNS", "VBD"]
    assert corpus.tag_map == "as-given"
    assert list(corpus.splits) == ["train", "valid", "test"]
    assert (len(corpus.train), corpus.train.n_tokens()) == (3, 8)


@pytest.mark.parametrize(
    ("file", "text", "line", "message"),
    [
        ("train.txt", "The/DT cat/NN\n\nsat ./.\n", 3, "token 'sat' has no tag"),
        ("valid.txt", "The/DT cat/\n", 1, "token 'cat/' has an empty tag"),
        ("test.txt", "The/DT\n/NN\n", 2, "token '/NN' has an empty word"),
        ("train.txt", "a/DT\nA dog\tDT\n", 2, "2 words but 1 tags"),
        ("train.txt", "A dog\tDT NN\tX\n", 1, "expected two tab-separated columns"),
        ("valid.txt", "The/DT cat/NN\nA/DT fish/NNP\n", 2, "tag 'NNP' (word 'fish') of valid"),
        ("test.txt", "A\tDT\nA fish\tDT XX\n", 2, "tag 'XX' (word 'fish') of test"),
    ],
)
def test_a_bad_line_names_its_file_and_line(
    tmp_path: Path, file: str, text: str, line: int, message: str
) -> None:
    directory = _custom(tmp_path, **{file.replace(".", "_"): text})
    with pytest.raises(NslmError) as caught:
        load_tagged_corpus(f"tagged:{directory}")
    assert str(caught.value).startswith(f"{directory / file}:{line}: {message}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"valid_txt": None}, "missing file: {dir}/valid.txt"),
        ({"test_txt": "\n \n"}, "{dir}/test.txt: empty split: no test sentences"),
        ({"train_txt": b"a/DT\n\xff/NN\n"}, "{dir}/train.txt:2: not UTF-8 text"),
    ],
)
def test_a_missing_empty_or_undecodable_file(
    tmp_path: Path, files: dict[str, str | bytes | None], message: str
) -> None:
    binary = {k: v for k, v in files.items() if isinstance(v, bytes)}
    directory = _custom(tmp_path, **{k: v for k, v in files.items() if k not in binary})
    for key, data in binary.items():
        (directory / key.replace("_", ".")).write_bytes(data)  # type: ignore[arg-type]
    with pytest.raises(NslmError) as caught:
        load_tagged_corpus(f"tagged:{directory}")
    assert str(caught.value).startswith(message.format(dir=directory))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("penn", "unknown tagged corpus 'penn'"),
        ("tagged:", "unknown tagged corpus 'tagged:'"),
        ("tagged:/no/such/dir", "no tagged corpus: /no/such/dir is not a directory"),
    ],
)
def test_unknown_names(name: str, message: str) -> None:
    with pytest.raises(NslmError, match=message):
        load_tagged_corpus(name)


def test_an_ewt_tag_unseen_in_train_names_its_conllu_line(tmp_path: Path) -> None:
    folder = tmp_path / "ud-english-ewt"
    folder.mkdir()

    def word(i: int, form: str, xpos: str) -> str:
        return "\t".join([str(i), form, "_", "_", xpos, "_", "0", "_", "_", "_"]) + "\n"

    texts = {
        "train": "# text = Hi\n" + word(1, "Hi", "UH") + "\n",
        "dev": word(1, "Hi", "UH") + "\n",
        "test": "# sent_id = 1\n" + word(1, "Hi", "UH") + "\n# text = Yo 5\n"
        "1-2\tYo5\t_\t_\t_\t_\t_\t_\t_\t_\n" + word(1, "Yo", "UH") + word(2, "5", "CD") + "\n",
    }
    for split, text in texts.items():
        with lzma.open(folder / f"{split}.conllu.xz", "wt", encoding="utf-8") as handle:
            handle.write(text)
    with pytest.raises(NslmError, match=r"test\.conllu\.xz:7: tag 'CD' \(word '5'\) of test"):
        load_tagged_corpus("ewt", tmp_path)


# -- word/tag round trip ----------------------------------------------------------------------


def _no_space(text: str) -> bool:
    return not any(char.isspace() for char in text)


_chars = st.characters(exclude_categories=("Z", "C"))
words = st.text(st.one_of(st.just("/"), _chars), min_size=1, max_size=6).filter(_no_space)
tags = st.text(_chars.filter(lambda c: c != "/"), min_size=1, max_size=4).filter(_no_space)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(words, tags), min_size=1, max_size=6))
def test_word_tag_round_trips_for_words_with_slashes(pairs: list[tuple[str, str]]) -> None:
    line = " ".join(f"{word}/{tag}" for word, tag in pairs)
    assert parse_tagged_line(line, "f.txt", 1) == ([w for w, _ in pairs], [t for _, t in pairs])
    for word, tag in pairs:
        assert split_token(f"{word}/{tag}", "f.txt", 1) == (word, tag)
