"""lm-eval tasks that run offline, built from ``$NSLM_DATA_DIR`` (docs/lm-eval.md, "Tasks").

lm-eval's own ``wikitext`` task downloads its data from a hub; these read local JSON lines
(``dataset_path: json``), written by :func:`build_tasks` (``nslm data lm-eval-tasks --out-dir DIR``)
beside a YAML file per task, so ``--include_path DIR`` finds them:

- ``nslm_wikitext2``: WikiText-2 test, one document an article, plain text as nslm reads it
  (``nslm.data.text.to_plain``); ``loglikelihood_rolling``: word perplexity, byte
  perplexity and bits per byte as lm-eval defines them;
- ``nslm_ewt``: UD English EWT test, one document per ``# newdoc``, its ``# text =`` lines;
- ``nslm_number_cloze``: at numbers of WikiText-2 test, the article's text before the number
  (at most :data:`CONTEXT_WORDS` words) and four candidates: the number written there and
  three others of its class and digit count from elsewhere in test (seeded); accuracy and
  length-normalised accuracy;
- ``nslm_conversion``: the same after a quantity, its unit and ``(``, where the text then
  converts it (``<convert>``): the written conversion against three other conversions of
  test.
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

CONTEXT_WORDS = 120  # corpus tokens of the article before a cloze item
CHOICES = 4
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
        "nslm_ewt": ("rolling", ewt_pages(data_dir)),
        "nslm_number_cloze": ("choice", cloze_items(articles, classes, numbers, rng)),
        "nslm_conversion": ("choice", cloze_items(articles, classes, ["convert"], rng)),
    }
    for name, (kind, rows) in tasks.items():
        write_task(out, name, kind, rows)
    return {name: len(rows) for name, (_, rows) in tasks.items()}
