"""Table 7: can an NNLM learn the increment function f(n) = n + 1? (paper, "Numbers and the
Softmax Bottleneck").

The corpus has one pair of consecutive integers per line, ``n , n+1`` for n = 1 … N; about a
tenth of the pairs are held out as the test split. The real pipeline runs on it: prepare
(``classes = "none"`` and the user class ``num=\\d+``) → train the paper's 100-dimensional
LSTM with NNLM and HNLM heads → micro fit with the ``diff`` metric → score. Only the second
number of each pair is scored, the one f(n) = n + 1 decides: the first is drawn at random (no
model beats ≈ N on it) and the separators are certain, so both would only pull every model
toward the same constant (docs/experiments.md).

* NNLM (Eq. 2) memorises the training pairs (train perplexity ≈ 1) but has nothing to go on
  for an unseen pair (test perplexity ≥ N);
* NSLM (Eq. 4) = P(<num> | h) · P_MM(w | <num>; w_prev): the diff is always 1, so an unseen
  pair is predicted as well as a seen one (≈ 1.0).

The corpus and why it looks as it does: :mod:`nslm.experiments.increment_data`.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from nslm.config import read_toml
from nslm.errors import NslmError
from nslm.experiments.increment_data import check_sizes, second_numbers, write_corpus

CLASS_RULE = r"num=\d+"
CLASS_NAME = "num"


@dataclass
class IncrementConfig:
    """The experiment's settings. The paper gives only the LSTM's size (100 dimensions); the
    rest was tuned so that N = 100 and 1,000 memorise within half a minute on one core."""

    test_fraction: float = 0.1  # share of the N pairs held out as the test split
    separator: str = ","  # between the two numbers; "" for the bare "n n+1"
    epoch_pairs: int = 1000  # train.txt repeats the training pairs up to at least this many
    epochs: int = 60  # passes over train.txt (cosine schedule, no early stopping)
    max_minutes: float = 0.0  # training time limit per N; 0 = none
    emb_size: int = 100
    hidden_size: int = 100
    num_layers: int = 1
    dropout: float = 0.0  # memorising is the point
    lr: float = 0.02
    batch_size: int = 8
    bptt: int = 35
    seed: int = 1
    threads: int = 1  # one thread is fastest for a model this small

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def build(cls, values: dict[str, Any]) -> IncrementConfig:
        """A validated config from a flat mapping; unknown keys and wrong types are errors."""
        want = {f.name: type(getattr(cls(), f.name)) for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in want:
                raise NslmError(f"unknown key {key!r}; valid keys: {', '.join(want)}")
            if want[key] is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(value, want[key]) or isinstance(value, bool):
                raise NslmError(f"key {key!r} wants a {want[key].__name__}, got {value!r}")
            kwargs[key] = value
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    @classmethod
    def from_toml(cls, path: Path, **overrides: Any) -> IncrementConfig:
        """Read a ``configs/increment.toml``-style file; ``overrides`` (CLI options) win."""
        return cls.build({**read_toml(path), **overrides})

    def validate(self) -> None:
        if not 0.0 < self.test_fraction < 0.5:
            raise NslmError("test_fraction must be in (0, 0.5)")
        sep = self.separator.strip()
        if sep and (len(sep.split()) != 1 or sep.isdigit()):
            raise NslmError("separator must be one token that is not a number, or empty")
        sizes = ("epoch_pairs", "epochs", "emb_size", "hidden_size", "num_layers", "batch_size")
        for key in (*sizes, "bptt"):
            if getattr(self, key) <= 0:
                raise NslmError(f"{key} must be positive")
        if not 0.0 <= self.dropout < 1.0:
            raise NslmError("dropout must be in [0, 1)")
        if self.lr <= 0 or self.max_minutes < 0 or self.threads < 0:
            raise NslmError("lr must be positive, max_minutes and threads ≥ 0")


# -- the pipeline -----------------------------------------------------------------------------


def train_config(cfg: IncrementConfig, corpus_dir: Path, progress: bool = False):
    """The :class:`~nslm.config.TrainConfig` of one run: NNLM and HNLM heads, ``<num>``."""
    from nslm.config import build_config

    return build_config(
        {
            "corpus": str(corpus_dir),
            "classes": "none",
            "class_rules": [CLASS_RULE],
            "model": "lstm",
            "emb_size": cfg.emb_size,
            "hidden_size": cfg.hidden_size,
            "num_layers": cfg.num_layers,
            "dropout": cfg.dropout,
            "heads": ["nnlm", "hnlm"],
            "softmax": "full",
            "optimizer": "adam",
            "lr": cfg.lr,
            "lr_schedule": "cosine",
            "clip": 1.0,
            "batch_size": cfg.batch_size,
            "bptt": cfg.bptt,
            "epochs": cfg.epochs,
            "patience": cfg.epochs,  # the cosine schedule sets the length
            "max_minutes": cfg.max_minutes,
            "eval_batch_size": cfg.batch_size,
            "checkpoint_every": 0,
            "seed": cfg.seed,
            "threads": cfg.threads,
            "progress": progress,
        }
    )


def run_one(
    n: int, cfg: IncrementConfig, work: Path, say: Callable[[str], None], progress: bool = False
) -> dict[str, Any]:
    """One corpus size: write the corpus → prepare → train → micro fit (diff) → score."""
    from nslm.data import prepare_corpus
    from nslm.data.custom import parse_class_rule
    from nslm.perplexity import perplexity
    from nslm.runs.load import load_run
    from nslm.runs.micro import fit_run_micro, load_run_micro, write_run_micro
    from nslm.scores.passes import Scorer
    from nslm.training.loop import train

    start = time.perf_counter()
    sizes = write_corpus(
        work / "corpus",
        n,
        test_fraction=cfg.test_fraction,
        separator=cfg.separator,
        epoch_pairs=cfg.epoch_pairs,
        seed=cfg.seed,
    )
    tcfg = train_config(cfg, work / "corpus", progress)
    corpus = prepare_corpus(tcfg.corpus, tcfg.classes, class_rules=[parse_class_rule(CLASS_RULE)])
    sizes.update(vocab=len(corpus.vocab), train_tokens=len(corpus.train))
    say(
        f"N={n}: training on {sizes['train_pairs']} pairs (×{sizes['repeats']} per epoch, "
        f"{cfg.epochs} epochs); {sizes['test_pairs']} test pairs"
    )
    t0 = time.perf_counter()
    trained = train(tcfg, work / "run")
    t_train = time.perf_counter() - t0

    say(f"N={n}: micro fit (diff) and score")
    t0 = time.perf_counter()
    loaded = load_run(work / "run", corpus=corpus)
    # The paper's micro-model for this task is the difference metric; its PDF is chosen on
    # validation like every class's (Table 1, step 4), without the slow MoG (as --fast).
    payload = fit_run_micro(loaded, metrics=["diff"], fast=True)
    write_run_micro(loaded, payload)
    micro = load_run_micro(loaded)
    t_micro = time.perf_counter() - t0

    t0 = time.perf_counter()
    row: dict[str, Any] = {}
    scorer = Scorer(loaded.model, loaded.classes, batch_size=cfg.batch_size, bptt=cfg.bptt)
    for split in ("train", "test"):
        data = corpus.splits[split]
        scores = scorer.nslm(data, micro, ("nnlm", "top"))
        where = second_numbers(data)
        row[f"nnlm_{split}"] = perplexity(scores.nnlm[where])
        row[f"nslm_{split}"] = perplexity(scores.pure[where])  # Eq. 4
    t_score = time.perf_counter() - t0

    chosen = payload["classes"][CLASS_NAME]["selected"]
    chosen_pdf = chosen["pdf"]["name"]
    seconds = {"train": t_train, "micro": t_micro, "score": t_score}
    seconds["total"] = time.perf_counter() - start
    row.update(
        sizes=sizes,
        epochs=trained.get("epochs"),
        steps=trained.get("steps"),
        micro_model={"metric": chosen["metric"], "pdf": chosen_pdf, "epsilon": chosen["epsilon"]},
        seconds={k: round(v, 1) for k, v in seconds.items()},
    )
    return row


@contextmanager
def _prepared_cache(path: Path) -> Iterator[None]:
    """``$NSLM_CACHE_DIR`` → ``path`` for the block: the trainer prepares the corpus again
    from its config, and synthetic corpora have no place in the user's cache."""
    saved = os.environ.get("NSLM_CACHE_DIR")
    os.environ["NSLM_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("NSLM_CACHE_DIR", None)
        else:
            os.environ["NSLM_CACHE_DIR"] = saved


def run_increment(
    ns: list[int] | tuple[int, ...],
    cfg: IncrementConfig | None = None,
    *,
    work_dir: Path | None = None,
    say: Callable[[str], None] = lambda text: None,
    done: Callable[[dict[str, Any]], None] = lambda result: None,
    progress: bool = False,
) -> dict[str, Any]:
    """Table 7 for every N in ``ns``: ``{"config", "scored", "results": {N: row}, …}``.

    A row holds ``nnlm_train``, ``nnlm_test``, ``nslm_train``, ``nslm_test`` (perplexity of
    the pairs' second numbers), the sizes, the selected micro-model and the seconds taken.
    ``done`` gets the result so far after each N. Corpora, runs and prepared corpora go to
    ``work_dir`` (default: a temporary directory, removed at the end).
    """
    cfg = cfg or IncrementConfig()
    cfg.validate()
    ns = check_sizes(ns)
    result: dict[str, Any] = {
        "experiment": "increment",
        "paper": "Table 7",
        "scored": "the second number of every pair (n+1, read after n)",
        "config": cfg.to_json(),
        "results": {},
    }
    with tempfile.TemporaryDirectory(prefix="nslm-increment-") as tmp:
        root = Path(work_dir) if work_dir is not None else Path(tmp)
        for n in ns:
            if (root / f"n{n}" / "run").exists():
                raise NslmError(f"{root / f'n{n}' / 'run'} already exists; use another work dir")
        with _prepared_cache(root / "prepared"):
            for n in ns:
                row = run_one(n, cfg, root / f"n{n}", say, progress)
                result["results"][str(n)] = row
                say(f"N={n}: {format_row(n, row)}  ({row['seconds']['total']:.0f} s)")
                done(result)
    return result


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return str(value)  # inf (a zero probability) or nan
    return f"{value:.2f}" if value < 10 else f"{value:,.1f}"


def format_row(n: int, row: dict[str, Any]) -> str:
    return (
        f"NNLM train {_fmt(row['nnlm_train'])} test {_fmt(row['nnlm_test'])}; "
        f"NSLM train {_fmt(row['nslm_train'])} test {_fmt(row['nslm_test'])}"
    )


def format_table(result: dict[str, Any]) -> str:
    """Table 7's columns: N, NNLM training and test, NSLM test (and NSLM training)."""
    head = f"{'N':>8}  {'NNLM train':>10}  {'NNLM test':>14}  {'NSLM train':>10}  {'NSLM test':>9}"
    lines = [head]
    for n, row in result["results"].items():
        lines.append(
            f"{int(n):>8,}  {_fmt(row['nnlm_train']):>10}  {_fmt(row['nnlm_test']):>14}  "
            f"{_fmt(row['nslm_train']):>10}  {_fmt(row['nslm_test']):>9}"
        )
    return "\n".join(lines)
