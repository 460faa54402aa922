"""User-defined classes: a name and a token regex, added without editing the package."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import assert_one_line_error, make_corpus, run_cli
from nslm.data import PreparedCorpus, prepare_corpus
from nslm.data.custom import ClassRule, parse_class_rule
from nslm.errors import NslmError

RECIPE = (
    " \n = Bread = \n"
    " First measure the flour , then mix it with water . \n"
    " Knead the dough , then bake it and cool it . \n"
    " = Cake = \n"
    " Measure the sugar , mix , bake for 30 minutes and cool . \n"
)
VERB = ClassRule("verb", r"(?i)(measure|mix|knead|bake|cool)(ed|ing|s)?")


def test_recipe_verbs_become_a_class(tmp_path: Path) -> None:
    corpus_dir = make_corpus(tmp_path / "recipes", RECIPE)
    corpus = prepare_corpus(corpus_dir, "numbers", cache_root=tmp_path / "c", class_rules=[VERB])
    assert corpus.class_names[-1] == "verb"
    verb = corpus.class_id("verb")
    train = corpus.train
    tagged = [corpus.vocab.itos[i] for i in train.token_ids[train.rule_class_ids == verb]]
    assert tagged == [
        "measure",
        "mix",
        "Knead",
        "bake",
        "cool",
        "Measure",
        "mix",
        "bake",
        "cool",
    ]
    v_c = {corpus.vocab.itos[i] for i in corpus.class_vocab("verb")}
    assert v_c == {"measure", "Measure", "mix", "Knead", "bake", "cool"}
    # "30" is a number: the built-in <round> class keeps it
    assert (
        corpus.class_names[train.rule_class_ids[train.token_ids == corpus.vocab.stoi["30"]][0]]
        == "round"
    )
    # the rules survive the cache
    reloaded = prepare_corpus(corpus_dir, "numbers", cache_root=tmp_path / "c", class_rules=[VERB])
    assert reloaded.class_rules == {"verb": VERB}


def test_numeric_user_class_keeps_values(tmp_path: Path) -> None:
    corpus_dir = make_corpus(tmp_path / "pairs", " 41 42 \n 7 8 \n 99 100 \n")
    corpus = prepare_corpus(
        corpus_dir, "none", cache_root=tmp_path / "c", class_rules=[ClassRule("num", r"\d+")]
    )
    assert corpus.class_names == ("word", "num")
    train = corpus.train
    is_num = train.rule_class_ids == 1
    np.testing.assert_array_equal(train.values[is_num], [41, 42, 7, 8, 99, 100])
    assert len(corpus.class_vocab("num")) == 6


def test_user_class_on_real_wikitext(wt2_numbers: PreparedCorpus, prepared_cache: Path) -> None:
    ordinal = ClassRule("ordinal", r"\d+(st|nd|rd|th)")
    corpus = prepare_corpus(
        "wikitext-2", "numbers", cache_root=prepared_cache, class_rules=[ordinal]
    )
    cid = corpus.class_id("ordinal")
    counts = np.bincount(corpus.train.rule_class_ids, minlength=len(corpus.class_names))
    assert counts[cid] > 1_000
    # the built-in classes are untouched by the extra rule
    base = np.bincount(wt2_numbers.train.rule_class_ids)
    np.testing.assert_array_equal(counts[: len(base)][1:], base[1:])
    names = {corpus.vocab.itos[i] for i in corpus.class_vocab("ordinal")}
    assert {"1st", "19th", "2nd", "3rd"} <= names


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("year=\\d+", "built in"),
        ("Bad Name=x", "lower case"),
        ("x=(", "regular expression"),
        ("x", "NAME=REGEX"),
    ],
)
def test_bad_rules_are_user_errors(text: str, needle: str) -> None:
    with pytest.raises(NslmError, match=needle):
        parse_class_rule(text)


def test_bad_rule_on_the_command_line_exits_2(tmp_path: Path) -> None:
    corpus_dir = make_corpus(tmp_path / "c")
    result = run_cli("data", "prepare", "--corpus", str(corpus_dir), "--class-rule", "x=(unclosed")
    assert_one_line_error(result, "regular expression")
