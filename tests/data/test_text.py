"""The text boundary, ``nslm.data.text``: plain text ↔ a run's tokens.

Hand-written cases for WikiText's layer over Moses, the round trip on WikiText-2 itself, and
properties: any text tokenizes without error into whitespace-free tokens, and the tokens of a
plain text are a fixed point of detokenize-then-tokenize.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.data.tagging import tag_lines
from nslm.data.text import (
    corpus_lines,
    prompt_line,
    text_form_of,
    to_plain,
    to_tokens,
)
from nslm.errors import NslmError


@pytest.mark.parametrize(
    ("plain", "tokens"),
    [
        ("The war began in 1914, and ended in", "The war began in 1914 , and ended in"),
        ("It cost $8,600.50 in 2015.", "It cost $ 8 @,@ 600 @.@ 50 in 2015 ."),
        ("a well-known 16-km road", "a well @-@ known 16 @-@ km road"),
        ("his 1,000th game", "his 1,000th game"),  # the corpus keeps it whole
        ("She said “it’s fine” and didn’t go.", "She said \" it 's fine \" and didn 't go ."),
        ("== Career ==", "= = Career = ="),
        ("= Valkyria Chronicles III =", "= Valkyria Chronicles III ="),
        ("( 16 km ) and 3.5 mi", "( 16 km ) and 3 @.@ 5 mi"),
        ("a <unk> of 1,<unk>", "a <unk> of 1 @,@ <unk>"),
        ("the 1998–99 season", "the 1998 – 99 season"),
        ("tab\tand  spaces\r", "tab and spaces"),
    ],
)
def test_plain_text_reads_as_wikitext_tokens(plain: str, tokens: str) -> None:
    assert to_tokens(plain) == tokens.split()


@pytest.mark.parametrize(
    ("tokens", "plain"),
    [
        ("The war began in 1914 , and ended in", "The war began in 1914, and ended in"),
        ("a well @-@ known road of 8 @,@ 600 m", "a well-known road of 8,600 m"),
        ("= = Career = =", "== Career =="),
        ("He didn 't go to New_York_City .", "He didn't go to New York City."),
        ("a <unk> ( 3 @.@ 5 km ) <eos> next line", "a <unk> (3.5 km)\nnext line"),
        ('" quoted " words', '"quoted" words'),
    ],
)
def test_tokens_read_back_as_plain_text(tokens: str, plain: str) -> None:
    assert to_plain(tokens.split()) == plain


def test_a_whitespace_corpus_splits_and_joins_on_spaces() -> None:
    assert to_tokens("in 1914, and", "whitespace") == ["in", "1914,", "and"]
    assert to_plain(["in", "1914,", "<eos>", "and"], "whitespace") == "in 1914,\nand"


def test_the_input_format_is_said_not_guessed() -> None:
    tokenized = " The album 's 1 @,@ 000 copies \n"
    assert corpus_lines(tokenized, "wikitext", "tokenized") == [tokenized.rstrip("\n")]
    # read as plain, the same line would split WikiText's own tokens again
    assert corpus_lines(tokenized, "wikitext", "plain") != [tokenized.rstrip("\n")]
    assert corpus_lines("a\n\nb\n", "wikitext") == [" a ", " ", " b "]
    assert prompt_line("in 1914,\nand", "wikitext") == " in 1914 , <eos> and "
    assert prompt_line("in 1914 ,", "wikitext", "tokenized") == " in 1914 , "
    with pytest.raises(NslmError, match="input format"):
        corpus_lines("x", "wikitext", "raw")
    with pytest.raises(NslmError, match="text form"):
        to_tokens("x", "moses")


def test_a_runs_text_form_is_recorded_or_read_from_its_vocabulary() -> None:
    assert text_form_of({"text_form": "whitespace"}, ["@-@"]) == "whitespace"
    assert text_form_of({}, ["<unk>", "@-@", "the"]) == "wikitext"
    assert text_form_of({}, ["<unk>", "the"]) == "whitespace"


def test_the_class_rules_see_the_same_numbers_in_plain_text() -> None:
    plain = tag_lines(
        corpus_lines("In 1914, 8,600 men (3.5 km away) left Paris.\n", "wikitext"), "all"
    )
    tokenized = tag_lines([" In 1914 , 8 @,@ 600 men ( 3 @.@ 5 km away ) left Paris . "], "all")
    assert plain.tokens == tokenized.tokens
    assert plain.classes == tokenized.classes
    assert {"year", "round", "decimal", "city"} <= set(plain.classes)


@pytest.mark.realdata
def test_wikitext_2_valid_comes_back_line_for_line(data_dir: Path) -> None:
    lines = (data_dir / "wikitext-2" / "valid.txt").read_text(encoding="utf-8").split("\n")
    gold = [line.split() for line in lines if line.strip()]
    same = sum(to_tokens(to_plain(tokens)) == tokens for tokens in gold)
    assert same / len(gold) >= 0.97


# Sentences a person writes: words, numbers with separators, hyphenated words, brackets and
# possessives, each followed by at most one punctuation mark. (Not capital initials or runs of
# punctuation: Moses reads "A ." written as "A." as an abbreviation, and ". ." as "..".)
_word = st.from_regex(r"[a-z][a-z]{1,7}", fullmatch=True)
_number = st.from_regex(r"[1-9][0-9]{0,3}([,.][0-9]{3})?", fullmatch=True)
_piece = st.one_of(
    _word,
    _number,
    st.tuples(_word, _word).map("-".join),
    _word.map(lambda w: f"({w})"),
    _word.map(lambda w: f"{w}'s"),
    _number.map(lambda n: f"${n}"),
)
plain_texts = st.lists(
    st.tuples(_piece, st.sampled_from(["", ",", ";", ":", "."])).map("".join),
    min_size=1,
    max_size=12,
).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_tokenizes_into_whitespace_free_tokens(text: str) -> None:
    for line in text.split("\n"):
        tokens = to_tokens(line)
        assert all(token and not any(c.isspace() for c in token) for token in tokens)
        to_plain(tokens)  # and reads back without error


@settings(max_examples=200, deadline=None)
@given(plain_texts)
def test_tokens_are_a_fixed_point_of_the_round_trip(text: str) -> None:
    tokens = to_tokens(text)
    assert to_tokens(to_plain(tokens)) == tokens


def test_a_line_of_thousands_of_protected_spans_keeps_them_all() -> None:
    """sacremoses numbers its placeholders with three digits: past 1,000 spans a line is cut."""
    line = " ".join(["<unk> 1,500"] * 1500)
    assert to_tokens(line) == ["<unk>", "1", "@,@", "500"] * 1500
    assert to_tokens("<unk>" * 2000) == ["<unk>"] * 2000
