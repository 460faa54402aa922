"""lm-eval tasks that run offline, built from ``$NSLM_DATA_DIR`` (docs/lm-eval.md, "Tasks").

lm-eval's own ``wikitext`` task downloads its data from a hub; these read local JSON lines
(``dataset_path: json``), written by :func:`build_tasks` (``nslm data lm-eval-tasks --out-dir DIR``)
beside a YAML file per task, so ``--include_path DIR`` finds them:

- ``nslm_wikitext2``: WikiText-2 test, one document an article, plain text as nslm reads it
  (``nslm.data.text.to_plain``); ``loglikelihood_rolling``: word perplexity, byte
  perplexity and bits per byte as lm-eval defines them;
- ``nslm_wikitext2_text``: WikiText-2 test as one document, the plain text ``nslm eval RUN
  --text`` reads from the same file (the two doors agree on it to rounding);
- ``nslm_ewt``: UD English EWT test, one document per ``# newdoc``, its ``# text =`` lines;
- ``nslm_number_cloze``: at numbers of WikiText-2 test (:data:`CLOZE_ITEMS` of them, drawn
  with a fixed seed), the article's text before the number (at most :data:`CONTEXT_WORDS`
  corpus tokens) and four candidates: the number written there and three others of its
  class and digit count from elsewhere in test; accuracy and length-normalised accuracy;
- ``nslm_conversion``: the same after a quantity, its unit and ``(``, where the text then
  converts it (``<convert>``): the written conversion against three other conversions of
  test (every one of them);
- ``nslm_year_order``: at a year written at most :data:`YEAR_GAP` years after the year
  before it in the article (within :data:`YEAR_WINDOW` tokens), that year against the year
  as far *before* the earlier one: whether a model reads that a text moving on in time
  names a later year.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from nslm.data.conllu import conllu_text
from nslm.data.locate import locate_corpus
from nslm.data.numbers import NUMBER_CLASSES, is_number
from nslm.data.prepare import split_lines
from nslm.data.tagging import tag_lines
from nslm.data.text import to_plain
from nslm.data.textfile import read_text
from nslm.errors import NslmError
from nslm.files.atomic import write_bytes_atomic

CONTEXT_WORDS = 60  # corpus tokens of the article before an item: two or three sentences
CHOICES = 4
CLOZE_ITEMS = 1200  # a seeded draw from test's 6,174 numbers: every model scores the same
YEAR_GAP = 30  # the year-order task: a year at most this many years after the one before it
YEAR_WINDOW = 40  # … which stands at most this many tokens before it
SEED = 0


def wikitext_articles() -> tuple[list[list[str]], list[list[str]]]:
    """WikiText-2 test's articles as corpus tokens, and each token's class."""
    tagged = tag_lines(
        split_lines(read_text(locate_corpus("wikitext-2", download=False)["test"])), "all"
    )
    tokens: list[list[str]] = []
    classes: list[list[str]] = []
    last = None
    for token, cls, article in zip(tagged.tokens, tagged.classes, tagged.articles, strict=True):
        if article != last:
            tokens.append([])
            classes.append([])
            last = article
        tokens[-1].append(token)
        classes[-1].append(cls)
    return tokens, classes


def pages(articles: Sequence[Sequence[str]]) -> list[dict[str, str]]:
    return [{"page": to_plain(list(a), "wikitext")} for a in articles if len(a) > 1]


def whole_test() -> str:
    """WikiText-2 test as one plain text: the text a Transformer run scores as ``test``
    (:func:`nslm.transformer.commands.corpus_plain`), so its pass is read, not recomputed."""
    from nslm.transformer.commands import corpus_plain

    return corpus_plain("wikitext-2", "test")


def ewt_pages(data_dir: Path) -> list[dict[str, str]]:
    path = data_dir / "ud-english-ewt" / "test.conllu.xz"
    text = conllu_text(read_text(path), str(path))
    return [{"page": doc.strip("\n") + "\n"} for doc in text.split("\f") if doc.strip()]


def cloze_items(
    articles: Sequence[Sequence[str]],
    classes: Sequence[Sequence[str]],
    wanted: Sequence[str],
    rng: random.Random,
) -> list[dict]:
    """One item per number of the ``wanted`` classes with context before it: the text
    before it, the written number and three others of its class and digit count."""
    pool: dict[tuple[str, int], list[str]] = defaultdict(list)
    for tokens, labels in zip(articles, classes, strict=True):
        for token, label in zip(tokens, labels, strict=True):
            if label in wanted and is_number(token):
                pool[(label, _digits(token))].append(token)
    items = []
    for tokens, labels in zip(articles, classes, strict=True):
        for i, (token, label) in enumerate(zip(tokens, labels, strict=True)):
            if label not in wanted or not is_number(token) or i < 10:
                continue
            others = sorted(set(pool[(label, _digits(token))]) - {token})
            if len(others) < CHOICES - 1:
                continue
            choices = [token, *rng.sample(others, CHOICES - 1)]
            rng.shuffle(choices)
            context = to_plain(list(tokens[max(0, i - CONTEXT_WORDS) : i]), "wikitext")
            items.append(
                {
                    "context": context.rstrip(" "),
                    "choices": [
                        " " + c if not context.endswith(("(", "\n")) else c for c in choices
                    ],
                    "label": choices.index(token),
                    "class": label,
                }
            )
    return items


def year_order_items(articles: Sequence[Sequence[str]], classes: Sequence[Sequence[str]]):
    """One item per year Y written after a year Y0 of the same article (the nearest before
    it, within :data:`YEAR_WINDOW` tokens) with Y0 < Y ≤ Y0 + :data:`YEAR_GAP`: the choices Y
    and Y0 − (Y − Y0), the year as far before Y0, in a fixed order (the later first)."""
    items = []
    for tokens, labels in zip(articles, classes, strict=True):
        last: tuple[int, int] | None = None  # (position, year) of the latest year
        for i, (token, label) in enumerate(zip(tokens, labels, strict=True)):
            if label != "year" or not token.isdigit():
                continue
            year = int(token)
            if last is not None and i - last[0] <= YEAR_WINDOW and 0 < year - last[1] <= YEAR_GAP:
                before = last[1] - (year - last[1])
                context = to_plain(list(tokens[max(0, i - CONTEXT_WORDS) : i]), "wikitext")
                space = "" if context.endswith(("(", "\n")) else " "
                items.append(
                    {
                        "context": context.rstrip(" "),
                        "choices": [f"{space}{year}", f"{space}{before}"],
                        "label": 0,
                        "gap": year - last[1],
                    }
                )
            last = (i, year)
    return items


def _digits(token: str) -> int:
    return sum(ch.isdigit() for ch in token)


TASK_YAML = {
    "rolling": (
        "output_type: loglikelihood_rolling\n"
        'doc_to_text: ""\n'
        'doc_to_target: "{{page}}"\n'
        "metric_list:\n"
        "  - metric: word_perplexity\n"
        "  - metric: byte_perplexity\n"
        "  - metric: bits_per_byte\n"
    ),
    "choice": (
        "output_type: multiple_choice\n"
        'doc_to_text: "{{context}}"\n'
        'doc_to_choice: "{{choices}}"\n'
        'doc_to_target: "{{label}}"\n'
        'target_delimiter: ""\n'
        "metric_list:\n"
        "  - metric: acc\n"
        "  - metric: acc_norm\n"
    ),
}


def _draw(items: list[dict], rng: random.Random) -> list[dict]:
    """:data:`CLOZE_ITEMS` of ``items``, drawn with ``rng``, kept in the text's order."""
    if len(items) <= CLOZE_ITEMS:
        return items
    keep = sorted(rng.sample(range(len(items)), CLOZE_ITEMS))
    return [items[i] for i in keep]


def write_task(out: Path, name: str, kind: str, rows: list[dict]) -> None:
    data = out / f"{name}.jsonl"
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    write_bytes_atomic(data, lines.encode("utf-8"))
    yaml = (
        f"task: {name}\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data.resolve()}\n"
        "test_split: test\n" + TASK_YAML[kind] + "metadata:\n  version: 1.0\n"
    )
    write_bytes_atomic(out / f"{name}.yaml", yaml.encode("utf-8"))


def build_tasks(out: Path) -> dict[str, int]:
    """Every task's data and YAML into ``out``; returns each task's item count. The data
    folder is the one WikiText-2 is found in (``$NSLM_DATA_DIR``); EWT lies beside it."""
    data_dir = locate_corpus("wikitext-2", download=False)["test"].parent.parent
    if not (data_dir / "ud-english-ewt" / "test.conllu.xz").is_file():
        raise NslmError(f"{data_dir}: no ud-english-ewt/test.conllu.xz beside wikitext-2")
    out.mkdir(parents=True, exist_ok=True)
    articles, classes = wikitext_articles()
    rng = random.Random(SEED)
    numbers = [c for c in NUMBER_CLASSES if c != "convert"]
    tasks = {
        "nslm_wikitext2": ("rolling", pages(articles)),
        "nslm_wikitext2_text": ("rolling", [{"page": whole_test()}]),
        "nslm_ewt": ("rolling", ewt_pages(data_dir)),
        "nslm_number_cloze": ("choice", _draw(cloze_items(articles, classes, numbers, rng), rng)),
        "nslm_conversion": ("choice", cloze_items(articles, classes, ["convert"], rng)),
        "nslm_year_order": ("choice", year_order_items(articles, classes)),
    }
    for name, (kind, rows) in tasks.items():
        write_task(out, name, kind, rows)
    return {name: len(rows) for name, (_, rows) in tasks.items()}
