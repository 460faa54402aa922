"""Fuzzed readers (hypothesis): the WikiText number re-joiner and class rules, the CoNLL-U,
Brown and ARPA readers, and the TOML config. Each is total (a result or one NslmError line,
never another exception), deterministic, and round-trips to what it read where the format
allows. benchmarks/house/robustness.py runs the same targets for longer, coverage-guided.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.byte_lm.labelled import parse_conllu
from nslm.config import build_config, load_config
from nslm.data.numbers import rejoin_numbers
from nslm.data.tagging import TaggedText, tag_lines
from nslm.errors import NslmError
from nslm.word_pos.brown_tags import universal_tag
from robustness.inputs import toml_text
from robustness.readers import (
    ARPA_TEXT,
    BROWN_HEADER_LINE,
    BROWN_ROWS,
    CONFIG_TABLES,
    CONLLU_LINES,
    LINES,
    TOKENS,
    arpa_target,
    brown_target,
    config_target,
    conllu_target,
    corpus_target,
    line_tokens,
    split_numbers,
)

FUZZ = settings(max_examples=150, deadline=None)


def total(target: Callable[..., None], *args: object) -> None:
    """``target`` returns or says what is wrong in one NslmError line; nothing else."""
    try:
        target(*args)
    except NslmError as exc:
        assert "\n" not in str(exc) and str(exc)


def in_a_folder(target: Callable[[bytes, Path], None]) -> Callable[[bytes], None]:
    """``target`` with a fresh folder for its file (hypothesis runs many inputs per test)."""

    def run(data: bytes) -> None:
        with tempfile.TemporaryDirectory() as folder:
            total(target, data, Path(folder))

    return run


# -- WikiText numbers and class rules ------------------------------------------------------------


@FUZZ
@given(st.text())
def test_the_rejoiner_is_total_and_deterministic(line: str) -> None:
    assert rejoin_numbers(line) == rejoin_numbers(line)


@FUZZ
@given(LINES)
def test_rejoined_numbers_split_back_to_the_wikitext_line(line: str) -> None:
    assert split_numbers(rejoin_numbers(line)) == line


@FUZZ
@given(st.lists(LINES, min_size=1, max_size=4), st.sampled_from(["numbers", "places", "all"]))
def test_tagging_is_deterministic_and_gives_back_the_text(lines: list[str], classes: str) -> None:
    tagged = tag_lines(lines, classes)
    assert _same_with_nan(tag_lines(lines, classes), tagged)
    assert line_tokens(tagged) == [line.split() for line in lines]


def _same_with_nan(a: TaggedText, b: TaggedText) -> bool:
    """Equal field by field, NaN equal to NaN (values and coordinates are NaN off class)."""

    def same(u: object, v: object) -> bool:
        return u == v or (
            isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v)
        )

    for x, y in zip(vars(a).values(), vars(b).values(), strict=True):
        pairs = zip(x, y, strict=True) if isinstance(x, list) else [(x, y)]
        if not all(same(u, v) for u, v in pairs):
            return False
    return True


@FUZZ
@given(st.lists(TOKENS, max_size=30).map(" ".join))
def test_a_corpus_file_of_any_tokens_reads_and_tags_or_fails_in_one_line(text: str) -> None:
    in_a_folder(corpus_target)(text.encode("utf-8"))


@FUZZ
@given(st.binary(max_size=300))
def test_a_corpus_file_of_any_bytes_reads_or_fails_in_one_line(data: bytes) -> None:
    in_a_folder(corpus_target)(data)


# -- CoNLL-U and Brown -----------------------------------------------------------------------------


@FUZZ
@given(CONLLU_LINES)
def test_conllu_is_total(text: str) -> None:
    total(conllu_target, text.encode("utf-8"))


WORDS = st.text(st.characters(blacklist_categories=("Cs", "Zs", "Cc")), min_size=1, max_size=6)


@FUZZ
@given(
    st.lists(
        st.lists(st.tuples(WORDS, st.sampled_from(["NN", "VB", "."])), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    )
)
def test_conllu_round_trips(sentences: list[list[tuple[str, str]]]) -> None:
    text = "\n\n".join(
        "\n".join(f"{i}\t{w}\t{w}\tX\t{t}\t_\t0\tdep\t_\t_" for i, (w, t) in enumerate(s, 1))
        for s in sentences
    )
    parsed = parse_conllu(text.split("\n"))
    assert [[word for token in s.tokens for word in token.words] for s in parsed] == sentences


@FUZZ
@given(BROWN_ROWS)
def test_the_brown_reader_is_total(text: str) -> None:
    in_a_folder(brown_target)(text.encode("utf-8"))


BROWN_WORDS = st.text(
    st.characters(
        blacklist_categories=("Cs", "Zs", "Cc"),
        blacklist_characters="\t\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029",
    ),
    min_size=1,
    max_size=6,
)


@FUZZ
@given(
    st.lists(
        st.lists(
            st.tuples(BROWN_WORDS, st.sampled_from(["at", "np-tl", "nn", "vbd", "."])),
            min_size=1,
            max_size=5,
        ),
        min_size=10,
        max_size=12,
    )
)
def test_brown_round_trips(sentences: list[list[tuple[str, str]]]) -> None:
    """Ten files, one sentence each: the 9th goes to valid, the 10th to test, the rest to
    train (word_pos/tagged.py's split rule); words come back, tags as their universal tags."""
    rows = "".join(
        f"c{'abcdefghijklm'[i]}01\tnews\t0\t0\t{' '.join(f'{w}/{t}' for w, t in s)}\n"
        for i, s in enumerate(sentences)
    )
    with tempfile.TemporaryDirectory() as folder:
        try:
            brown_target((BROWN_HEADER_LINE + rows).encode("utf-8"), Path(folder))
        except NslmError as exc:  # a tag of valid or test that train lacks: the reader says so
            assert "does not occur in train" in str(exc)
            return
        from nslm.word_pos.tagged import load_tagged_corpus

        corpus = load_tagged_corpus("brown", folder)
    read = [*corpus.train.words, *corpus.valid.words, *corpus.test.words]
    tags = [*corpus.train.tags, *corpus.valid.tags, *corpus.test.tags]
    order = [i for i in range(len(sentences)) if i % 10 not in (8, 9)] + [8, 9]
    assert read == [[w for w, _ in sentences[i]] for i in order]
    assert tags == [[universal_tag(t) for _, t in sentences[i]] for i in order]


# -- ARPA and the TOML config --------------------------------------------------------------------


@FUZZ
@given(ARPA_TEXT)
def test_the_arpa_reader_is_total(text: str) -> None:
    in_a_folder(arpa_target)(text.encode("utf-8"))


@FUZZ
@given(st.binary(max_size=200))
def test_an_arpa_file_of_any_bytes_fails_in_one_line(data: bytes) -> None:
    in_a_folder(arpa_target)(b"\\data\\\n" + data)


@FUZZ
@given(CONFIG_TABLES)
def test_a_config_file_reads_as_its_table_builds(values: dict) -> None:
    """A TOML config means what its table means: the same config, or the same one error."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.toml"
        path.write_text(toml_text(values), encoding="utf-8")
        try:
            expected = build_config(values)
        except NslmError as exc:
            with pytest.raises(NslmError) as info:
                load_config(path)
            assert str(info.value) == str(exc)
            return
        cfg = load_config(path)
    assert cfg == expected and build_config(cfg.to_json()) == cfg


@FUZZ
@given(st.binary(max_size=200))
def test_a_config_file_of_any_bytes_reads_or_fails_in_one_line(data: bytes) -> None:
    in_a_folder(config_target)(data)
