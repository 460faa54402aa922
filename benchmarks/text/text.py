"""The text boundary (nslm.data.text) measured: round trip on WikiText-2, plain prompts
against hand-tokenized ones, UD English EWT scored as plain text, tokenizer speed, bad input.

    python benchmarks/text/text.py --run runs/wt2-cpu [--out benchmarks/results/text.json]

Writes benchmarks/results/text.json (keys in BENCHMARKS.md, "Plain text in and out").
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import json
import lzma
import math
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from nslm.data.locate import locate_corpus
from nslm.data.tagging import tag_lines
from nslm.data.text import corpus_lines, prompt_line, to_plain, to_tokens

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks" / "common"))  # shared helpers

from texts import DATA

# (plain English, the same written by hand in WikiText's tokens)
PROMPTS = [
    ("The war began in 1914, and ended in", "The war began in 1914 , and ended in"),
    (
        "The city had 8,600 inhabitants in 1990 and",
        "The city had 8 @,@ 600 inhabitants in 1990 and",
    ),
    ("The river is 3.5 km (2.2 mi) long and", "The river is 3 @.@ 5 km ( 2 @.@ 2 mi ) long and"),
    ("It was a well-known 16-mile trail near", "It was a well @-@ known 16 @-@ mile trail near"),
    (
        "The film earned $1.2 million in its first week, and",
        "The film earned $ 1 @.@ 2 million in its first week , and",
    ),
    (
        "Exciting European cities are Paris, Rome and",
        "Exciting European cities are Paris , Rome and",
    ),
    (
        "He moved from New York City to Los Angeles in",
        "He moved from New York City to Los Angeles in",
    ),
    (
        "The bridge, completed in 1932 (after 6 years), spans",
        "The bridge , completed in 1932 ( after 6 years ) , spans",
    ),
    ("She didn't return to London until", "She didn 't return to London until"),
    (
        "The album's second single was released on 4 July 2011, and",
        "The album 's second single was released on 4 July 2011 , and",
    ),
    (
        "The storm killed 1,200 people and left 45,000 homeless in",
        "The storm killed 1 @,@ 200 people and left 45 @,@ 000 homeless in",
    ),
    (
        "The peak rises to 2,145 metres (7,037 ft) above",
        "The peak rises to 2 @,@ 145 metres ( 7 @,@ 037 ft ) above",
    ),
    (
        "Between 1939 and 1945, the factory built 3,000 aircraft for",
        "Between 1939 and 1945 , the factory built 3 @,@ 000 aircraft for",
    ),
    ("The 1998–99 season was the club's first in", "The 1998 – 99 season was the club 's first in"),
    (
        "The company was founded in Tokyo, Japan, in",
        "The company was founded in Tokyo , Japan , in",
    ),
    (
        "Population: 12,480 (2010 census), down from",
        "Population : 12 @,@ 480 ( 2010 census ) , down from",
    ),
    ("The £5 million stadium opened in", "The £ 5 million stadium opened in"),
    (
        "The U.S. Army arrived in Manila on 3 February 1945, and",
        "The U.S. Army arrived in Manila on 3 February 1945 , and",
    ),
    (
        "In the 1980s, over 2.5 million people lived in",
        "In the 1980s , over 2 @.@ 5 million people lived in",
    ),
    ("The route (about 120 km) links Berlin with", "The route ( about 120 km ) links Berlin with"),
    (
        "“It’s over,” he said in 1918, before moving to",
        '" It \'s over , " he said in 1918 , before moving to',
    ),
    (
        "The museum, which has 1,500,000 visitors a year, is in",
        "The museum , which has 1 @,@ 500 @,@ 000 visitors a year , is in",
    ),
    ("The two-year-old horse won in 1973 at", "The two @-@ year @-@ old horse won in 1973 at"),
    ("Summer highs of 40 °C are common in", "Summer highs of 40 ° C are common in"),
]


def wikitext_lines(split: str) -> list[list[str]]:
    path = locate_corpus(DATA / "wikitext-2", download=False)[split]
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.split() for line in handle.read().split("\n") if line.strip()]


def difference_kind(gold: list[str], got: list[str]) -> str:
    """What a residual round-trip difference is, by the tokens it touches."""
    text = " ".join(gold + got)
    if any(q in text for q in "’‘“”"):
        return "curly quote read as straight"
    if "<unk>" in text:
        return "<unk> glued to a neighbour"
    if "No." in gold:
        return "No. before a hidden number"
    return "other"


def roundtrip(lines: list[list[str]]) -> dict:
    """Detokenize each corpus line with the module, tokenize it again, compare."""
    same = agree = 0
    kinds: Counter = Counter()
    examples: dict[str, list[str]] = {}
    for gold in lines:
        got = to_tokens(to_plain(gold))
        if got == gold:
            same += 1
            agree += len(gold)
            continue
        match = difflib.SequenceMatcher(a=gold, b=got, autojunk=False)
        agree += sum(block.size for block in match.get_matching_blocks())
        for tag, i1, i2, j1, j2 in match.get_opcodes():
            if tag != "equal":
                kind = difference_kind(gold[i1:i2], got[j1:j2])
                kinds[kind] += 1
                seen = examples.setdefault(kind, [])
                if len(seen) < 3:
                    seen.append(f"{' '.join(gold[i1:i2])!r} -> {' '.join(got[j1:j2])!r}")
    tokens = sum(map(len, lines))
    return {
        "roundtrip_lines": len(lines),
        "roundtrip_lines_identical": same / len(lines),
        "roundtrip_token_agreement": agree / tokens,
        "roundtrip_differences": dict(kinds.most_common()),
        "roundtrip_examples": examples,
    }


def tokenize_speed(lines: list[list[str]], repeats: int = 3) -> float:
    """Tokens per second of plain → tokens over WikiText-2 test, detokenized (one core:
    the tokenizer is pure Python); the best of ``repeats``."""
    plain = [to_plain(line) for line in lines]
    tokens = sum(map(len, lines))
    to_tokens("warm up")  # the Moses tables load once
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for line in plain:
            to_tokens(line)
        best = min(best, time.perf_counter() - start)
    return tokens / best


def prompts(run: Path) -> dict:
    """Each plain prompt's tokens against the hand-written ones, and predict's top-10 for
    both forms on the run (NNLM and NSLM lists)."""
    from nslm.generation.predict import predict
    from nslm.runs.open import open_run

    opened = open_run(run)
    rows, same_tokens, same_top10 = [], 0, 0
    for plain, hand in PROMPTS:
        tokens = prompt_line(plain, opened.text_form).split()
        a = predict(opened.loaded, opened.micro, plain, lam=opened.lam)
        b = predict(opened.loaded, opened.micro, hand, lam=opened.lam, input_format="tokenized")
        top = [[t["token"] for t in r["nslm"]] + [t["token"] for t in r["nnlm"]] for r in (a, b)]
        same_tokens += tokens == hand.split()
        same_top10 += top[0] == top[1]
        rows.append(
            {
                "plain": plain,
                "tokens": " ".join(tokens),
                "expected": hand,
                "top5": [t["token"] for t in a["nslm"][:5]],
            }
        )
    return {"n": len(PROMPTS), "same_tokens": same_tokens, "same_top10": same_top10, "rows": rows}


def read_conllu(path: Path) -> list[tuple[str, list[tuple[str, bool]]]]:
    """(the ``# text =`` line, [(word, space after)]) per sentence; multiword-token ranges
    and empty nodes skipped (the words carry the forms)."""
    sentences, text, words = [], None, []
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.startswith("# text = "):
                text = line[len("# text = ") :]
            elif not line:
                if text is not None and words:
                    sentences.append((text, words))
                text, words = None, []
            elif not line.startswith("#"):
                cols = line.split("\t")
                if "-" in cols[0] or "." in cols[0]:
                    continue
                words.append((cols[1], "SpaceAfter=No" not in cols[9]))
    return sentences


def wikitext_gold(words: list[tuple[str, bool]]) -> str:
    """A sentence's gold UD tokens in WikiText's conventions where UD's differ, token by token
    (UD's boundaries kept): a hyphen glued to both neighbours is ``@-@``; inside a token,
    WikiText's rules apply (a hyphenated word is split, ``8,600`` is ``8 @,@ 600``, a time
    ``14:57`` is ``14 : 57`` and ``9/11`` is ``9 / 11``: 528 and 170 such spaced groups in
    WikiText-2 train, none glued)."""
    out = []
    for i, (form, space_after) in enumerate(words):
        glued_before = i > 0 and not words[i - 1][1]
        if form == "-" and glued_before and not space_after and i + 1 < len(words):
            out.append("@-@")
        else:
            out += to_tokens(form)
    return " " + " ".join(out) + " "


def class_counts(lines: list[str], classes: str) -> Counter:
    tagged = tag_lines(lines, classes)
    return Counter(c for c in tagged.classes if c != "word")


def ewt_plain(run: Path, work: Path) -> dict:
    """UD English EWT test as plain text (its ``# text =`` lines) scored with ``nslm eval
    --text``; its class tokens against those of the gold tokens."""
    from nslm.cli import main
    from nslm.runs.open import open_run

    sentences = read_conllu(DATA / "ud-english-ewt" / "test.conllu.xz")
    text = work / "ewt-test.txt"
    text.write_text("\n".join(t for t, _ in sentences) + "\n", encoding="utf-8")
    out = work / "ewt-tables.json"
    code = main(["eval", str(run), "--text", str(text), "-o", str(out)])
    if code != 0:
        raise SystemExit(f"nslm eval --text failed with {code}")
    tables = json.loads(out.read_text(encoding="utf-8"))
    loaded = open_run(run, micro="none", threads=False).loaded
    classes = str(loaded.corpus.meta.get("classes_option", "all"))
    plain = class_counts(corpus_lines(text.read_text(encoding="utf-8"), loaded.text_form), classes)
    gold = class_counts([wikitext_gold(words) for _, words in sentences], classes)
    big = [c for c in gold if gold[c] >= 20]
    diffs = {c: abs(plain[c] - gold[c]) / gold[c] for c in big}
    per_class = {}
    for table in tables["tables"].values():
        for row, values in table["rows"].items():
            scores = {m: values[m] for m in ("NNLM", "NSLM") if m in values}
            per_class[row] = {"tokens_in_vocab": table["tokens"][row], **scores}
    figures = tables["text"]
    return {
        "sentences": len(sentences),
        "tokens": figures["tokens"],
        "oov_tokens": figures["oov_tokens"],
        "oov_rate": figures["oov_rate"],
        "bytes": figures["bytes"],
        "words": figures["words"],
        "class_tokens": dict(sorted(plain.items())),
        "class_tokens_gold": dict(sorted(gold.items())),
        "class_count_rel_diff": diffs,
        "class_count_max_rel_diff": max(diffs.values()) if diffs else math.nan,
        "per_class": per_class,
        "models": figures["models"],
        "bits_per_byte": {m: r["bits_per_byte"] for m, r in figures["models"].items()},
        "ppl_adjusted": {m: r["ppl_adjusted"] for m, r in figures["models"].items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=ROOT / "runs" / "wt2-cpu")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/text.json")
    parser.add_argument("--skip-bad-input", action="store_true")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # one core: the tokenizer's figure and the scoring's alike
    test = wikitext_lines("test")
    sys.path.insert(0, str(ROOT / "benchmarks" / "common"))
    from machine import machine_info

    result: dict = {
        "command": "python " + " ".join(sys.argv),
        "date": dt.date.today().isoformat(),
        "machine": machine_info(),
    }
    print("round trip on WikiText-2 test …", file=sys.stderr)
    result.update(roundtrip(test))
    print("tokenizer speed …", file=sys.stderr)
    result["tokenize_tokens_per_s"] = tokenize_speed(test)
    print(f"prompts on {args.run} …", file=sys.stderr)
    result["prompts"] = prompts(args.run)
    with tempfile.TemporaryDirectory() as work:
        print("UD English EWT test as plain text …", file=sys.stderr)
        result["ewt_plain"] = ewt_plain(args.run, Path(work))
    if not args.skip_bad_input:
        from text_bad_input import run as bad_input

        result["bad_input"] = bad_input(args.run)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if not isinstance(v, dict)}, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
