"""Documents: where one text ends and another starts (docs/text.md, "Documents").

A form feed in plain or tokenized text, a ``# newdoc`` in CoNLL-U and a WikiText heading
each start a new article; caches and previous values never look across one."""

from __future__ import annotations

import lzma
from pathlib import Path

import numpy as np
import pytest

from nslm.data.conllu import conllu_documents, conllu_text
from nslm.data.tagging import tag_lines
from nslm.data.text import DOCUMENT_BREAK, corpus_lines, prompt_line
from nslm.errors import NslmError
from nslm.micro.history import previous_index


def articles_of(text: str, input_format: str = "plain") -> tuple[list[str], list[int]]:
    tagged = tag_lines(corpus_lines(text, "wikitext", input_format), "all")
    return tagged.tokens, tagged.articles


def test_a_form_feed_starts_a_new_article_and_adds_no_token() -> None:
    tokens, articles = articles_of("Born in 1931.\n\fDied in 2004.\n")
    assert "\f" not in "".join(tokens)
    assert tokens == ["Born", "in", "1931", ".", "<eos>", "Died", "in", "2004", ".", "<eos>"]
    assert articles == [0] * 5 + [1] * 5


@pytest.mark.parametrize("text", ["\fone\n", "one\n\f", "one\n\f\f\ftwo\n", "one\f two\n"])
def test_empty_documents_add_no_article(text: str) -> None:
    _, articles = articles_of(text)
    n_documents = sum(bool(part.strip()) for part in text.split("\f"))
    assert len(set(articles)) == n_documents
    assert articles[0] == 0 and sorted(set(articles)) == list(range(n_documents))


def test_tokenized_input_honours_the_form_feed_too() -> None:
    _, articles = articles_of(" in 1914 \n\f in 1918 \n", "tokenized")
    assert articles == [0, 0, 0, 1, 1, 1]


def test_a_heading_after_a_form_feed_starts_one_article_not_two() -> None:
    _, articles = articles_of("text\n\f= Title =\nmore\n")
    assert sorted(set(articles)) == [0, 1]


def test_the_previous_year_is_never_read_across_a_document() -> None:
    tagged = tag_lines(corpus_lines("in 1931 .\fin 2004 and 2005 .", "wikitext"), "all")
    is_year = np.array([c == "year" for c in tagged.classes])
    prev = previous_index(is_year, np.array(tagged.articles))
    years = np.flatnonzero(is_year)
    assert [tagged.tokens[i] for i in years] == ["1931", "2004", "2005"]
    assert prev[years[1]] == -1  # 2004 opens its document: 1931 is another document's
    assert prev[years[2]] == years[1]


def test_a_prompt_reads_from_its_last_document() -> None:
    assert prompt_line("in 1931 .\fdied in", "wikitext") == " died in "
    assert DOCUMENT_BREAK == "\f"


CONLLU = """# newdoc id = a
# sent_id = a-1
# text = Born in 1931.
1\tBorn\tbear\tVERB\tVBN\t_\t0\troot\t_\t_
2\tin\tin\tADP\tIN\t_\t3\tcase\t_\t_
3\t1931\t1931\tNUM\tCD\t_\t1\tobl\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t1\tpunct\t_\t_

# sent_id = a-2
# text = Still here.
1\tStill\tstill\tADV\tRB\t_\t2\tadvmod\t_\t_
2\there\there\tADV\tRB\t_\t0\troot\t_\tSpaceAfter=No
3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

# newdoc id = b
# sent_id = b-1
# text = Died in 2004.
1\tDied\tdie\tVERB\tVBD\t_\t0\troot\t_\t_
2\tin\tin\tADP\tIN\t_\t3\tcase\t_\t_
3\t2004\t2004\tNUM\tCD\t_\t1\tobl\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t1\tpunct\t_\t_

"""


def test_conllu_documents_follow_newdoc() -> None:
    assert conllu_documents(CONLLU) == [["Born in 1931.", "Still here."], ["Died in 2004."]]
    assert conllu_text(CONLLU) == "Born in 1931.\nStill here.\n\fDied in 2004.\n"


def test_a_conllu_sentence_without_its_text_is_a_one_line_error() -> None:
    broken = CONLLU.replace("# text = Still here.\n", "")
    with pytest.raises(NslmError, match="no '# text =' line"):
        conllu_documents(broken, "x.conllu")
    with pytest.raises(NslmError, match="no sentences"):
        conllu_documents("# just a comment\n", "x.conllu")


@pytest.mark.realdata
def test_ewt_test_reads_as_its_316_documents(data_dir: Path) -> None:
    path = data_dir / "ud-english-ewt" / "test.conllu.xz"
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        raw = handle.read()
    documents = conllu_documents(raw, str(path))
    assert len(documents) == raw.count("# newdoc") == 316
    assert sum(map(len, documents)) == raw.count("# text =") == 2077
    _, articles = articles_of(conllu_text(raw))
    assert len(set(articles)) == 316
