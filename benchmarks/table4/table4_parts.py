"""Pieces of benchmarks/table4/table4.py: the runs of benchmarks/table4/table4_train.py and
which are finished, the texts every row is scored on, a run's per-position scores and their
cache, and the figures made from them (perplexities, value metrics, the seeds' noise and the
tie rule)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from nslm.batches.streams import make_streams
from nslm.data.fixed_vocab import TextSplit, prepare_text_file
from nslm.data.locate import locate_corpus
from nslm.data.numbers import number_positions, number_value
from nslm.numerals.value_metrics import value_metrics
from nslm.perplexity import perplexity
from nslm.runs.load import kept_weights
from nslm.runs.open import open_run
from nslm.scores.mixture import ensemble_log_probs, tune_lambda
from nslm.scores.passes import head_of
from table4_train import BUDGETS, SEEDED_ROWS, SEEDS, jobs

TEXTS = ("valid", "test")
CONVENTIONS = ("proper", "adjusted")
# the config names of benchmarks/table4/table4_train.py → the paper's Table 4 names
PAPER_NAMES = {
    "softmax": "softmax",
    "softmax-rnn": "softmax+RNN",
    "h-softmax": "h-softmax",
    "h-softmax-rnn": "h-softmax+RNN",
    "d-rnn": "d-RNN",
    "mog": "MoG",
    "combination": "combination",
}
NUMERAL_ROWS = tuple(PAPER_NAMES.values())
# the rows the NNLM/HNLM run gives (NSLM-context only with RUN/context.json)
NSLM_ROWS = ("NNLM", "NSLM", "NSLM-context", "NSLM-open", "NSLM-pure")
# Bump when a change of the scoring changes the cached per-position figures.
CACHE_VERSION = 1


# -- the runs ---------------------------------------------------------------------------


def run_state(run: Path) -> str:
    """finished (results.json), training (started: a checkpoint or its log), or not started."""
    if (run / "results.json").is_file():
        return "finished"
    if (run / "metrics.jsonl").is_file() or (run / "latest.json").is_file():
        return "training"
    return "not started"


def find_runs(runs: Path) -> tuple[dict[str, dict[str, dict[int, Path]]], list[dict]]:
    """({budget: {row: {seed: run}}} of the finished runs, [every other planned run])."""
    finished: dict[str, dict[str, dict[int, Path]]] = {}
    missing = []
    for job in jobs(list(BUDGETS)):
        run = job.run_dir(runs)
        state = run_state(run)
        if state == "finished":
            finished.setdefault(job.budget, {}).setdefault(job.row, {})[job.seed] = run
        else:
            missing.append({"budget": job.budget, "row": job.row, "seed": job.seed, "state": state})
    return finished, missing


def planned_seeds(budget: str, row: str) -> tuple[int, ...]:
    """The seeds benchmarks/table4/table4_train.py trains for a row at a budget."""
    return SEEDS if budget == "small" and row in SEEDED_ROWS else (1,)


def trained(run: Path) -> dict:
    """What the run's training spent (results.json)."""
    res = json.loads((run / "results.json").read_text())
    return {"steps": res["steps"], "train_tokens": res["train_tokens"]}


def open_table4_run(run: Path, itos: Sequence[str]):
    """The run loaded for scoring on one thread (the machine's cores are shared with the
    training; docs/numerals.md), no micro-models, its vocabulary checked against the
    others'."""
    loaded = open_run(run, micro="none", threads=1).loaded
    if list(loaded.corpus.vocab.itos) != list(itos):
        raise SystemExit(f"{run}: another vocabulary than the other Table 4 runs")
    return loaded


def stream_targets(corpus, steps: int, batch_size: int = 80, bptt: int = 35, world: int = 2):
    """What ``steps`` optimizer steps of the Table 4 configs train on, counted from the
    streams as the trainer builds them (``nslm.batches.streams``): ``grid`` = steps ×
    batch_size × bptt; ``targets``, the real target positions among them (each epoch is
    every training position but the first, and the streams, cut at article starts, are
    padded to the longest, the padding masked); ``recorded``, what results.json's
    ``train_tokens`` holds: rank 0's targets × ``world`` (the trainer takes the ranks'
    shares as equal)."""
    train = corpus.train
    streams = make_streams(train.token_ids, train.class_ids, train.article_ids, batch_size)
    per_rank = batch_size // world
    n = streams.n_batches(bptt)

    def counted(s) -> int:
        per_window = [int((s.batch(i, bptt)[3] >= 0).sum()) for i in range(n)]
        epochs, rest = divmod(steps, n)
        return epochs * sum(per_window) + sum(per_window[:rest])

    return {
        "steps": steps,
        "windows_per_epoch": n,
        "grid": steps * batch_size * bptt,
        "targets": counted(streams),
        "recorded": counted(streams.take(0, per_rank)) * world,
    }


# -- the texts ------------------------------------------------------------------------------


@dataclass
class Texts:
    """WikiText-2 valid and test prepared once with the runs' shared vocabulary (cut to
    ``max_tokens`` in a dry run) and the positions every row is scored at: the tokens of
    the number classes, by rule (Table 4's "Numbers")."""

    texts: dict[str, TextSplit]
    positions: dict[str, np.ndarray]
    itos: list[str]
    max_tokens: int

    def strings_at(self, text: str) -> list[str]:
        strings = self.texts[text].strings
        return [strings[i] for i in self.positions[text].tolist()]

    def fingerprint(self) -> str:
        """What a cached score depends on of the texts: their sizes and positions."""
        digest = hashlib.sha1()
        for name in TEXTS:
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(self.positions[name]).tobytes())
            digest.update(str(len(self.texts[name].split)).encode())
        return digest.hexdigest()[:16]


def prepare_texts(corpus, max_tokens: int = 0) -> Texts:
    """Valid and test of the corpus's files, read as its tokens (WikiText is tokenized)."""
    paths = locate_corpus("wikitext-2", download=False)
    texts = {}
    for name in TEXTS:
        text = prepare_text_file(corpus, paths[name], name, "tokenized")
        if 0 < max_tokens < len(text.split):
            split = head_of(text.split, max_tokens)
            text = replace(text, split=split, strings=text.strings[:max_tokens])
        texts[name] = text
    names = corpus.class_names
    positions = {n: number_positions(t.split, names) for n, t in texts.items()}
    return Texts(texts, positions, list(corpus.vocab.itos), max_tokens)


# -- a run's scores -----------------------------------------------------------------------


@dataclass
class RunScores:
    """One run's per-position log-probabilities at ``Texts.positions``: ``log_probs[text]
    [convention][column]``; ``in_vocab[text]``; ``modes[column]``, the index of each test
    position's mode in the candidate list; ``lambdas`` of the run's own mixtures (NSLM
    rows); ``info``: counts and notes (JSON)."""

    log_probs: dict[str, dict[str, dict[str, np.ndarray]]]
    in_vocab: dict[str, np.ndarray]
    modes: dict[str, np.ndarray]
    lambdas: dict[str, float] = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(self.log_probs["test"]["proper"])

    def to_arrays(self) -> dict[str, np.ndarray]:
        out = {f"in_vocab/{t}": a for t, a in self.in_vocab.items()}
        for t, per in self.log_probs.items():
            for conv, cols in per.items():
                out.update({f"lp/{t}/{conv}/{c}": a for c, a in cols.items()})
        out.update({f"mode/{c}": a for c, a in self.modes.items()})
        meta = {"lambdas": self.lambdas, "info": self.info}
        out["meta"] = np.array(json.dumps(meta))
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> RunScores:
        log_probs: dict = {}
        in_vocab, modes = {}, {}
        for key, a in arrays.items():
            kind, _, rest = key.partition("/")
            if kind == "lp":
                t, conv, c = rest.split("/", 2)
                log_probs.setdefault(t, {}).setdefault(conv, {})[c] = a
            elif kind == "in_vocab":
                in_vocab[rest] = a
            elif kind == "mode":
                modes[rest] = a
        meta = json.loads(str(arrays["meta"]))
        return cls(log_probs, in_vocab, modes, meta["lambdas"], meta["info"])


def candidates_digest(candidates: Sequence[str]) -> str:
    """A short digest of the candidate list (cached modes are indices into it)."""
    return hashlib.sha1("\n".join(candidates).encode()).hexdigest()[:16]


def file_stamp(path: Path) -> list:
    """A file's name, size and modification time: a cached score is stale when it changes."""
    if not path.is_file():
        return [path.name, None]
    st = path.stat()
    return [path.name, st.st_size, st.st_mtime_ns]


def cached(
    path: Path | None, key: dict, compute: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """``compute()``'s arrays, read from ``path`` when it was written under the same
    ``key`` (None: no cache, as in a dry run). Written atomically beside the run."""
    stamp = json.dumps({"version": CACHE_VERSION, **key}, sort_keys=True)
    if path is not None and path.is_file():
        try:
            with np.load(path) as z:
                if str(z["__key__"]) == stamp:
                    return {k: z[k] for k in z.files if k != "__key__"}
        except (OSError, ValueError, KeyError):
            pass  # unreadable or from another version: recomputed below
    out = compute()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp.npz")
        np.savez(tmp, __key__=np.array(stamp), **out)
        os.replace(tmp, path)
    return out


def kept_curve(
    run: Path,
    key: dict,
    texts: Texts,
    use_cache: bool,
    score: Callable[[Path], dict[str, np.ndarray]],
) -> dict[int, dict[str, float]]:
    """{step: {column: figure}} of every weights file the run kept (``RUN/kept/``), each
    step's ``score(weights)`` cached in RUN/table4-eval/curve-STEM.npz under ``key`` plus
    the weights' stamp and the texts' fingerprint."""
    out: dict[int, dict[str, float]] = {}
    for step, weights in kept_weights(run).items():
        full = {**key, "weights": file_stamp(weights), "texts": texts.fingerprint()}
        path = run / "table4-eval" / f"curve-{weights.stem}.npz" if use_cache else None
        arrays = cached(path, full, lambda weights=weights: score(weights))
        out[step] = {c: float(v) for c, v in arrays.items()}
    return out


# -- figures ---------------------------------------------------------------------------------


def ppl_figures(scores: RunScores, column: str, text: str = "test") -> dict:
    """Numbers perplexity of a column: proper, Ueberla's adjusted, in-vocabulary (proper)."""
    per = scores.log_probs[text]
    proper = per["proper"][column]
    return {
        "num_ppl_proper": perplexity(proper),
        "num_ppl_adjusted": perplexity(per["adjusted"][column]),
        "num_ppl_in_vocab": perplexity(proper[scores.in_vocab[text]]),
    }


def with_nnlm(scores: RunScores, column: str, nnlm: RunScores) -> dict:
    """λ·P_NNLM + (1 − λ)·P_model at the numerals: the NSLM paper's ensemble ("Model
    Implementations": λ·P_NNLM + (1 − λ)·P_NSLM; :mod:`nslm.scores.mixture`) given to a
    numeral model, so that every row has the same tuning. λ is the grid point of
    :func:`~nslm.scores.mixture.tune_lambda` with the lowest valid Numbers perplexity
    (proper); test under both conventions, each model charged by its own convention."""
    lam, valid = tune_lambda(
        nnlm.log_probs["valid"]["proper"]["NNLM"], scores.log_probs["valid"]["proper"][column]
    )
    out = {"lambda": lam, "valid_num_ppl_proper": valid}
    for conv in CONVENTIONS:
        mixed = ensemble_log_probs(
            nnlm.log_probs["test"][conv]["NNLM"], scores.log_probs["test"][conv][column], lam
        )
        out[f"num_ppl_{conv}"] = perplexity(mixed)
    out["adjusted_note"] = ADJUSTED_MIXTURE_NOTE
    return out


ADJUSTED_MIXTURE_NOTE = (
    "λ·(P_NNLM(<unk>)/|U_NNLM|) + (1 − λ)·(P_model(<unk_num>)/|U_num|) at the numerals: the two "
    "|U| count different sets (the test's types outside the NNLM's vocabulary, the test's "
    "numeral types outside the model's K), so this is a mixture of two conventions, shown "
    "for reference; the proper figure is the comparison"
)


def value_figures(
    gold_strings: Sequence[str],
    candidates: Sequence[str],
    modes: np.ndarray,
    positions: np.ndarray,
    worst: int = 10,
) -> tuple[dict, np.ndarray]:
    """MdAPE, MdAE and MAPE of the modes (Spithourakis & Riedel 2018, Sec. 5), and the
    ``worst`` largest absolute-percentage errors with their test positions; also the
    predicted values."""
    gold = np.array([number_value(s) for s in gold_strings])
    values = np.array([number_value(c) for c in candidates])[modes]
    metrics = value_metrics(gold, values)
    with np.errstate(divide="ignore", invalid="ignore"):
        ape = np.where(gold != 0, 100.0 * np.abs(values - gold) / np.abs(gold), np.nan)
    order = np.argsort(np.where(np.isnan(ape), -np.inf, ape))[::-1][:worst]
    worst_ape = [
        {
            "position": int(positions[i]),
            "gold": gold_strings[i],
            "predicted": candidates[modes[i]],
            "ape": float(ape[i]),
        }
        for i in order
        if not np.isnan(ape[i])
    ]
    out = {
        "mdape": metrics["mdape"],
        "mdae": metrics["mdae"],
        "mape": metrics["mape"],
        "n_zero_gold": metrics["n_zero"],
        "worst_ape": worst_ape,
    }
    return out, values


def spread(values: Sequence[float]) -> dict:
    """Mean and sample standard deviation (n − 1 in the denominator) over the seeds."""
    x = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(x.mean()),
        "std": float(x.std(ddof=1)) if len(x) > 1 else math.nan,
        "n": len(x),
    }


TIE_RULE = (
    "two rows' num_ppl_proper (each the mean over its seeds where it has several) differ "
    "by Δ; a tie when |Δ| < 2·√(σa² + σb²), σ the sample standard deviation over a row's "
    "seeds; a row with one seed takes the largest σ of the seeded rows (borrowed)"
)


def tie_threshold(sigma_a: float, sigma_b: float) -> float:
    """2·√(σa² + σb²): a difference of two rows below it is a tie."""
    return 2.0 * math.sqrt(sigma_a**2 + sigma_b**2)


def is_tie(a: float, sigma_a: float, b: float, sigma_b: float) -> bool:
    """|a − b| < 2·√(σa² + σb²) (:data:`TIE_RULE`)."""
    return abs(a - b) < tie_threshold(sigma_a, sigma_b)


def borrowed_sigma(seeded: dict[str, dict], budget: str) -> dict | None:
    """The σ a single-seed row borrows: the largest σ over ``seeded`` ({row: spread()} of
    the rows of ``budget`` with two or more seeds) and the row it comes from; None without
    one."""
    if not seeded:
        return None
    row = max(seeded, key=lambda r: seeded[r]["std"])
    sigma, mean = seeded[row]["std"], seeded[row]["mean"]
    return {"sigma": sigma, "relative": sigma / mean, "from_row": row, "budget": budget}


def noise_of(values: Sequence[float], borrowed: dict | None, budget: str) -> dict:
    """A row's noise at ``budget``: ``value``, its mean over its seeds (its one figure with
    one seed), and ``sigma``, the seeds' sample standard deviation; a single-seed row
    borrows (:func:`borrowed_sigma`): the largest σ of its own budget's seeded rows, or, at
    a budget without any, that budget's largest relative σ × this row's value (perplexities
    of another budget are on another scale). ``sigma`` is None with nothing to borrow."""
    s = spread(values)
    out = {"value": s["mean"], "n_seeds": s["n"]}
    if s["n"] > 1:
        return {**out, "sigma": s["std"], "sigma_from": f"own {s['n']} seeds"}
    if borrowed is None:
        return {**out, "sigma": None, "sigma_from": "no seeded row to borrow from"}
    if borrowed["budget"] == budget:
        how = f"borrowed: the largest σ of the seeded rows ({borrowed['from_row']})"
        return {**out, "sigma": borrowed["sigma"], "sigma_from": how, "borrowed": True}
    how = (
        f"borrowed: the largest relative σ of budget {borrowed['budget']}'s seeded rows "
        f"({borrowed['from_row']}, {borrowed['relative']:.2%}) × this row's figure"
    )
    sigma = borrowed["relative"] * s["mean"]
    return {**out, "sigma": sigma, "sigma_from": how, "borrowed": True}
