"""The tiny world the battery runs in, built from synthetic text in seconds (no corpus needed).

Two year corpora (helpers.make_years_corpus) with different vocabularies, a tiny word run on
each with micro-models for <year>, a tiny byte LM with probe data, an n-gram model and its
ARPA file, a micro.json fitted on the corpus alone, a vector file and a class file. Every
case copies what it breaks; the world itself is only read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from helpers import (
    YEARS_EVAL,
    YEARS_TRAIN,
    make_tagged_corpus,
    make_years_corpus,
    train_tiny_byte_lm,
    write_labelled_data,
)
from robustness.inputs import toml_text
from robustness.runner import ok_problems, run_in_process

# The years corpus with other words: another vocabulary (for "a run from another corpus").
OTHER_TRAIN = YEARS_TRAIN.replace("and", "plus").replace("In", "Around").replace("From", "Since")
OTHER_EVAL = YEARS_EVAL.replace("and", "plus").replace("In", "Around")
OTHER_CORPUS_NAME = "other-years"
# A user class over the years corpus's words (docs/user-classes.md).
CLASS_FILE = 'plugins = []\n\n[classes.joiner]\nregex = "and|then"\n'
INCREMENT_CONFIG = "epochs = 2\nhidden_size = 8\nemb_size = 8\n"


def make_big_years_corpus(directory: Path, lines: int, seed: int = 0) -> Path:
    """A years corpus of ``lines`` train lines (about 12 tokens each), for work that takes
    seconds: articles of sentences on years, numbers and a few words, seeded."""
    rng = np.random.default_rng(seed)
    words = np.array(["In", "and", "then", "From", "to", "the", "war", "city", "was", "built"])
    years = rng.integers(1700, 2000, size=lines).tolist()
    fillers = rng.choice(words, size=(lines, 6)).tolist()
    counts = rng.integers(1, 99, size=lines).tolist()
    out = []
    for i, (year, filler, count) in enumerate(zip(years, fillers, counts, strict=True)):
        if i % 20 == 0:
            out.append(f" = Article {i // 20} = ")
        out.append(f" {' '.join(filler)} {year} and {year + 1} , {count} . ")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.txt").write_text("\n".join(out) + "\n", encoding="utf-8")
    for split in ("valid", "test"):
        (directory / f"{split}.txt").write_text("\n".join(out[: lines // 50]) + "\n")
    return directory


def training_values(corpus: Path, **changes: Any) -> dict[str, Any]:
    """A training config on a years corpus that trains in about a second (6 steps)."""
    values: dict[str, Any] = dict(
        corpus=str(corpus),
        classes="numbers",
        softmax="full",
        emb_size=8,
        hidden_size=8,
        num_layers=1,
        dropout=0.0,
        batch_size=2,
        bptt=5,
        epochs=1,
        max_steps=6,
        checkpoint_every=2,
        eval_batch_size=2,
        threads=1,
        progress=False,
    )
    return {**values, **changes}


@dataclass(frozen=True)
class World:
    root: Path
    corpus: Path  # the years corpus: train.txt, valid.txt, test.txt
    other_corpus: Path  # the same shape, another vocabulary
    prepared: Path  # $NSLM_CACHE_DIR of every case: the corpora are prepared once
    run: Path  # a tiny run on `corpus` with RUN/micro.json (<year>)
    other_run: Path  # the same on `other_corpus`
    byte_run: Path  # a tiny byte LM
    byte_corpus: Path  # its bytes:DIR corpus
    tagged: Path  # a tagged:DIR corpus for word+POS runs
    crnn: Path  # the CRNN of `run`'s <year> (nslm eval --crnn)
    big_corpus: Path  # a years corpus of some 2 million tokens: seconds of work to cut short
    huge_corpus: Path  # the same of 6 million: work that outlasts the imports three times over
    medium_corpus: Path  # the same of 200,000 tokens: for runs whose micro-models are fitted
    labelled: Path  # $NSLM_DATA_DIR for the probes: synthetic sst2/ and ud-english-ewt/
    ngram: Path  # a trigram model directory of `corpus`
    arpa: Path  # the same model as an ARPA file
    micro: Path  # a micro.json fitted on `corpus` alone (no run)
    vectors: Path  # GloVe-format vectors of some of `corpus`'s words
    class_file: Path  # a TOML of user classes

    @property
    def env(self) -> dict[str, str]:
        """What every case runs under: the world's prepared-corpus cache, no plots on screen."""
        return {"NSLM_CACHE_DIR": str(self.prepared), "MPLBACKEND": "Agg"}

    def config(self, **changes: Any) -> dict[str, Any]:
        """The tiny training config on ``corpus``, with ``changes`` (any key, the corpus too)."""
        return {**training_values(self.corpus), **changes}


def _nslm(world_env: dict[str, str], *argv: str) -> None:
    outcome = run_in_process([*argv], world_env)
    problems = ok_problems(outcome)
    assert not problems, f"building the world: nslm {' '.join(argv)}: {problems}\n{outcome.stderr}"


def _train_run(root: Path, corpus: Path, env: dict[str, str]) -> Path:
    config = root / f"{corpus.name}.toml"
    config.write_text(toml_text(training_values(corpus)), encoding="utf-8")
    run = root / f"run-{corpus.name}"
    _nslm(env, "train", "--config", str(config), "--run-dir", str(run))
    _nslm(env, "micro", "fit", str(run), "--fast", "--only", "year")
    return run


def build_world(root: Path) -> World:
    """Everything the battery's cases read, under ``root`` (about 15 s on 2 cores)."""
    root.mkdir(parents=True, exist_ok=True)
    corpus = make_years_corpus(root / "years")
    other = make_years_corpus(root / OTHER_CORPUS_NAME, OTHER_TRAIN, OTHER_EVAL)
    env = {"NSLM_CACHE_DIR": str(root / "prepared"), "MPLBACKEND": "Agg"}
    run, other_run = _train_run(root, corpus, env), _train_run(root, other, env)
    byte_run = train_tiny_byte_lm(root / "byte")
    crnn = root / "crnn"
    _nslm(
        env,
        "eval",
        str(run),
        "--split",
        "valid",
        "--crnn",
        "--crnn-steps",
        "1",
        "--crnn-dir",
        str(crnn),
        "-o",
        str(root / "tables.json"),
    )
    labelled = write_labelled_data(root / "labelled")
    ngram, arpa = root / "ngram", root / "model.arpa"
    _nslm(
        env,
        "ngram",
        "build",
        "--corpus",
        str(corpus),
        "--out-dir",
        str(ngram),
        "--order",
        "3",
        "--classes",
        "numbers",
        "--discount-fallback",
    )
    _nslm(env, "ngram", "export-arpa", str(ngram), "-o", str(arpa))
    micro = root / "micro.json"
    _nslm(
        env,
        "micro",
        "fit",
        "--corpus",
        str(corpus),
        "--classes",
        "numbers",
        "--only",
        "year",
        "--fast",
        "-o",
        str(micro),
    )
    vectors = root / "vectors.txt"
    words = ["In", "and", "1990", "1991", "then", "From", ","]
    vectors.write_text("".join(f"{w} {' '.join(['0.5'] * 8)}\n" for w in words))
    class_file = root / "classes.toml"
    class_file.write_text(CLASS_FILE, encoding="utf-8")
    tagged = make_tagged_corpus(root / "tagged", (40, 10, 10))
    big = make_big_years_corpus(root / "big-years", 150_000)
    huge = make_big_years_corpus(root / "huge-years", 450_000, seed=2)
    medium = make_big_years_corpus(root / "medium-years", 15_000, seed=1)
    return World(
        root,
        corpus,
        other,
        root / "prepared",
        run,
        other_run,
        byte_run,
        byte_run.parent / "corpus",
        tagged,
        crnn,
        big,
        huge,
        medium,
        labelled,
        ngram,
        arpa,
        micro,
        vectors,
        class_file,
    )
