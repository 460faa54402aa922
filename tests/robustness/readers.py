"""The readers the fuzzers feed, and what each must keep true.

A target takes raw input and either returns or raises NslmError (a one-line error for the
user); any other exception is a crash. The hypothesis tests (test_fuzzed_readers.py) and the
coverage-guided fuzz run of benchmarks/house/robustness.py share these targets, and the strategies
that build inputs near the formats (a fuzzer that only ever sends noise never gets past a
header).
"""

from __future__ import annotations

import functools
import lzma
import math
import re
from pathlib import Path

from hypothesis import strategies as st

from nslm.byte_lm.labelled import parse_conllu
from nslm.config import load_config
from nslm.data.numbers import NUMBER_CLASSES, can_be, is_number, number_value
from nslm.data.places import PLACE_CLASSES, load_gazetteer, name_tokens
from nslm.data.prepare import split_lines
from nslm.data.tagging import TaggedText, tag_lines
from nslm.data.textfile import read_text
from nslm.data.vocab import EOS
from nslm.ngram.arpa import read_arpa
from nslm.word_pos.tagged import BROWN_FILE, load_tagged_corpus

# -- WikiText lines -----------------------------------------------------------------------------

# Tokens the rules look at: WikiText's split markers, units, range words, months, brackets,
# and words of place names (one, two and three tokens long, some ambiguous).
SPECIAL_TOKENS = [
    "@,@",
    "@.@",
    "@-@",
    "(",
    ")",
    ";",
    ",",
    ".",
    "km",
    "mi",
    "miles",
    "°",
    "F",
    "C",
    "kg",
    "lb",
    "ft",
    "m",
    "to",
    "–",
    "-",
    "May",
    "June",
    "in",
    "the",
    "Paris",
    "New",
    "York",
    "City",
    "Georgia",
    "Washington",
    "D.C.",
    "Port",
    "au",
    "Prince",
    "Hong",
    "Kong",
    "United",
    "States",
    "Texas",
    "<unk>",
    "=",
]
_NO_SPACE = st.characters(blacklist_categories=("Cs",)).filter(lambda c: not c.isspace())
TOKENS = st.one_of(
    st.sampled_from(SPECIAL_TOKENS),
    st.from_regex(r"[0-9]{1,5}", fullmatch=True),
    st.text(_NO_SPACE, min_size=1, max_size=6),
)
# What WikiText's tokenizer leaves: a number with a comma or point inside is always split.
_JOINED = re.compile(r"\d[,.]\d")
WIKITEXT_TOKENS = TOKENS.filter(lambda t: not _JOINED.search(t))
LINES = st.lists(WIKITEXT_TOKENS, max_size=25).map(lambda tokens: " " + " ".join(tokens) + " ")


def split_numbers(line: str) -> str:
    """The inverse of :func:`rejoin_numbers` on WikiText: ``1,000`` → ``1 @,@ 000``."""
    return re.sub(r"(?<=\d)([,.])(?=\d)", r" @\1@ ", line)


@functools.cache
def _place_names() -> frozenset[str]:
    return frozenset(place.name for place in load_gazetteer().places())


def line_tokens(tagged: TaggedText) -> list[list[str]]:
    """The tagged tokens line by line (each line ends in <eos>), each place token expanded
    back to the tokens of its name and each number split as WikiText writes it."""
    gazetteer_names = _place_names()
    lines: list[list[str]] = [[]]
    for token, cls in zip(tagged.tokens, tagged.classes, strict=True):
        if token == EOS and cls == "word":
            lines.append([])
        elif cls in PLACE_CLASSES:
            name = token.replace("_", " ")
            assert name in gazetteer_names, (token, cls)
            lines[-1].extend(name_tokens(name))
        else:
            lines[-1].extend(split_numbers(token).split())
    return lines[:-1]


def check_tagged(tagged: TaggedText) -> None:
    """What tagging keeps true of any text: parallel lists, a number class only on a number
    that may carry it (V_c) with its value, coordinates on places and nowhere else."""
    n = len(tagged.tokens)
    parallel = (tagged.classes, tagged.values, tagged.lats, tagged.lons, tagged.articles)
    assert all(len(column) == n for column in parallel)
    for token, cls, value, lat in zip(
        tagged.tokens, tagged.classes, tagged.values, tagged.lats, strict=True
    ):
        if cls in NUMBER_CLASSES:
            assert is_number(token) and can_be(cls, token), (token, cls)
            assert value == number_value(token), (token, value)
        assert math.isfinite(lat) == (cls in PLACE_CLASSES), (token, cls)


# -- the file readers, as targets ---------------------------------------------------------------


def corpus_target(data: bytes, folder: Path) -> None:
    """A corpus file as ``nslm data prepare`` reads and tags it (numbers and places)."""
    path = folder / "train.txt"
    path.write_bytes(data)
    tagged = tag_lines(split_lines(read_text(path)), "all")
    check_tagged(tagged)


def arpa_target(data: bytes, folder: Path) -> None:
    """An ARPA file; what reads must agree with its own header."""
    path = folder / "model.arpa"
    path.write_bytes(data)
    model = read_arpa(path)
    assert len(model.keys) == model.order and model.sizes()[0] == len(model.itos)


def conllu_target(data: bytes) -> None:
    lines = data.decode("utf-8", errors="replace").split("\n")
    for sentence in parse_conllu(lines, "fuzz.conllu"):
        assert sentence.tokens


def brown_target(data: bytes, folder: Path) -> None:
    """A Brown TSV (the header, then ``fileid category para sent tagged`` rows), xz-packed."""
    (folder / "brown").mkdir(exist_ok=True)
    with lzma.open(folder / "brown" / BROWN_FILE, "wb") as handle:
        handle.write(data)
    corpus = load_tagged_corpus("brown", folder)
    for split in corpus.splits.values():
        assert [len(w) for w in split.words] == [len(t) for t in split.tags]


def config_target(data: bytes, folder: Path) -> None:
    """A training config TOML file."""
    path = folder / "config.toml"
    path.write_bytes(data)
    load_config(path)


# -- inputs near the formats ------------------------------------------------------------------

BROWN_HEADER_LINE = "fileid\tcategory\tpara\tsent\ttagged\n"
BROWN_TAGS = [
    "at",
    "np-tl",
    "nn",
    "vbd",
    "in",
    "jj",
    ".",
    ",",
    "cd",
    "pps",
    "rb",
    "zz",
    "",
    "nn$",
    "fw-in+at-t",
    "*",
]
BROWN_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["ca01", "ca02", "cb05", "cr09", "x"]),
        st.lists(
            st.tuples(st.text(_NO_SPACE, min_size=0, max_size=5), st.sampled_from(BROWN_TAGS)),
            max_size=6,
        ),
    ),
    max_size=25,
).map(
    lambda rows: (
        BROWN_HEADER_LINE
        + "".join(
            f"{fileid}\tnews\t0\t{i}\t{' '.join(f'{w}/{t}' for w, t in tokens)}\n"
            for i, (fileid, tokens) in enumerate(rows)
        )
    )
)

CONLLU_LINES = st.lists(
    st.one_of(
        st.just(""),
        st.just("# text = a b"),
        st.tuples(
            st.sampled_from(["1", "2", "3", "1-2", "2.1", "x", "3-", "-1", "02", "٣"]),
            st.sampled_from(["dog", "don't", "n't", "_"]),
            st.sampled_from(["NN", "VB", "_"]),
            st.sampled_from(["_", "SpaceAfter=No"]),
            st.integers(9, 11),
        ).map(
            lambda r: "\t".join([r[0], r[1], r[1], "X", r[2], "_", "0", "dep", "_", r[3]][: r[4]])
        ),
    ),
    max_size=20,
).map("\n".join)


def _arpa_text(lines: list[tuple[float, str, float | None]], extra: list[str]) -> str:
    """An ARPA file of unigrams, broken by ``extra`` lines put in before the end marker."""
    rows = [f"{p}\t{w}" + (f"\t{b}" if b is not None else "") for p, w, b in lines]
    return (
        "\\data\\\n"
        f"ngram 1={len(rows)}\n\n\\1-grams:\n"
        + "\n".join(rows)
        + "\n"
        + "".join(e + "\n" for e in extra)
        + "\n\\end\\\n"
    )


ARPA_TEXT = st.builds(
    _arpa_text,
    st.lists(
        st.tuples(
            st.floats(allow_nan=True, allow_infinity=True, width=32),
            st.sampled_from(["<s>", "</s>", "<unk>", "a", "b", "a b", ""]),
            st.one_of(st.none(), st.floats(width=32)),
        ),
        max_size=8,
    ),
    st.lists(st.sampled_from(["\\2-grams:", "ngram 2=1", "-1\ta b", "\\end\\", "x"]), max_size=3),
)
CONFIG_KEYS = [
    "bptt",
    "lr",
    "batch_size",
    "corpus",
    "heads",
    "softmax",
    "dropout",
    "cutoffs",
    "processes",
    "class_rules",
    "keep_checkpoints_at_minutes",
    "device",
    "colour",
]
CONFIG_VALUES = st.one_of(
    st.integers(-5, 10**12),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(-3, 3), max_size=3),
    st.lists(st.text(max_size=5), max_size=2),
)
# at least a key: an empty config file is refused (read_toml), an empty table is the defaults
CONFIG_TABLES = st.dictionaries(st.sampled_from(CONFIG_KEYS), CONFIG_VALUES, min_size=1, max_size=5)
