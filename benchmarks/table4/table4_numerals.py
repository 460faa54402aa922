"""Paper Table 4's numeral models (Spithourakis & Riedel 2018) for benchmarks/table4/table4.py: one
run of ``configs/table4-<model>.toml`` scored at the numerals of WikiText-2 valid and test,
and its learning curve from the weights it kept.

Each model is charged by :func:`nslm.numerals.scoring.score_numerals`: the proper
convention (a closed model's <unk_num> spread by a spelling model of the training numerals
outside its numeral vocabulary K: :func:`~nslm.numerals.scoring.unk_num_spelling`),
Ueberla's adjusted one beside it, and the mode over the one candidate set of every row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nslm.data.numbers import is_number
from nslm.numerals.scoring import score_numerals, unk_num_spelling
from nslm.perplexity import perplexity
from nslm.runs.files import load_model_tensors
from table4_parts import (
    TEXTS,
    RunScores,
    Texts,
    cached,
    candidates_digest,
    file_stamp,
    kept_curve,
    open_table4_run,
)


def final_key(run: Path, texts: Texts, candidates: list[str]) -> dict:
    """What the cached final scores of a numeral run depend on: its weights, the texts and
    the candidate set (the modes are indices into it)."""
    return {
        "what": "numeral-final",
        "weights": file_stamp(run / "model.safetensors"),
        "texts": texts.fingerprint(),
        "candidates": candidates_digest(candidates),
    }


def evaluate_numeral_run(
    run: Path, row: str, texts: Texts, candidates: list[str], use_cache: bool
) -> RunScores:
    """The run's final weights at valid and test (``row`` names its column)."""
    path = run / "table4-eval" / "final.npz" if use_cache else None

    def compute() -> dict[str, np.ndarray]:
        loaded = open_table4_run(run, texts.itos)
        spec = loaded.model.heads["numeral"].spec
        spelling = unk_num_spelling(spec)
        log_probs: dict = {}
        in_vocab, modes, info = {}, {}, {}
        for name in TEXTS:
            text = texts.texts[name]
            scores = score_numerals(
                loaded,
                text.split,
                strings=text.strings,
                spelling=spelling,
                candidates=candidates,
                predict=name == "test",
            )
            if not np.array_equal(scores.positions, texts.positions[name]):
                raise SystemExit(f"{run}: its numeral positions differ from the NNLM's")
            log_probs[name] = {
                "proper": {row: scores.log_prob},
                "adjusted": {row: scores.log_prob_adjusted},
            }
            in_vocab[name] = scores.in_vocab
            summary = scores.summary()
            info[name] = {k: summary[k] for k in ("n_tokens", "n_unk_num", "unk_num_types")}
            if scores.predicted_index is not None:
                modes[row] = scores.predicted_index
        info["numeral_vocabulary"] = len(spec.numerals)
        info["numeral_model"] = loaded.cfg.numeral_model
        known = set(spec.numerals)
        info["unk_num_spelling_types"] = sum(is_number(t) and t not in known for t in spec.itos)
        return RunScores(log_probs, in_vocab, modes, {}, info).to_arrays()

    return RunScores.from_arrays(cached(path, final_key(run, texts, candidates), compute))


def numeral_curve(run: Path, row: str, texts: Texts, use_cache: bool) -> dict[int, float]:
    """{step: valid Numbers perplexity (proper)} of every weights file the run kept."""
    loaded = spelling = None

    def score(weights: Path) -> dict[str, np.ndarray]:
        nonlocal loaded, spelling
        if loaded is None:
            loaded = open_table4_run(run, texts.itos)
            spelling = unk_num_spelling(loaded.model.heads["numeral"].spec)
        load_model_tensors(loaded.model, weights)
        loaded.model.eval()
        text = texts.texts["valid"]
        scores = score_numerals(
            loaded, text.split, strings=text.strings, spelling=spelling, predict=False
        )
        return {row: np.array(perplexity(scores.log_prob))}

    curve = kept_curve(run, {"what": "numeral-curve"}, texts, use_cache, score)
    return {step: figures[row] for step, figures in curve.items()}
