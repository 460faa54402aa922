"""End to end on a synthetic corpus where a cue word sets the sign of a year difference:

    The fort was built in 1850 and after in 1871 .     (a later year)
    The fort was built in 1850 and before in 1832 .    (an earlier year)

The plain micro-model of years (``diff`` against the previous year) sees both signs alike and
can only spread its mass over both sides; the context-aware one reads the LM's state after
the cue and learns to keep one side. A tiny LM is trained on the corpus, then the same
``micro fit`` and ``micro fit --context`` a user runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nslm.config import load_config
from nslm.runs.context_micro import fit_run_context, load_run_context, write_run_context
from nslm.runs.load import load_run
from nslm.runs.micro import fit_run_micro, load_run_micro, write_run_micro
from nslm.scores.passes import use_threads
from nslm.training.loop import train

TINY = Path(__file__).parents[2] / "configs" / "tiny.toml"


def cue_corpus(directory: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    for split, n in (("train", 1500), ("valid", 200), ("test", 200)):
        lines = []
        for _ in range(n):
            first = int(rng.integers(1830, 1870))
            cue = "after" if rng.random() < 0.5 else "before"
            gap = int(rng.integers(1, 26))
            second = first + gap if cue == "after" else first - gap
            lines.append(f" = Fort = \n The fort was built in {first} and {cue} in {second} . \n")
        (directory / f"{split}.txt").write_text("".join(lines), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def cue_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cue")
    corpus = cue_corpus(root / "corpus")
    use_threads(1)
    sets = [
        f"corpus='{corpus}'",
        "train_tokens=0",
        "valid_tokens=0",
        "emb_size=24",
        "hidden_size=48",
        "epochs=4",
        "max_steps=0",
        "batch_size=16",
        "bptt=24",
        "lr=1e-2",
        "test_tokens=0",
        "checkpoint_every=0",
    ]
    train(load_config(TINY, sets), root / "run")
    loaded = load_run(root / "run")
    write_run_micro(loaded, fit_run_micro(loaded, only=["year"], metrics=["diff"], fast=True))
    return root / "run"


def test_the_context_model_learns_the_cue_and_the_plain_one_cannot(cue_run: Path) -> None:
    loaded = load_run(cue_run)
    plain = load_run_micro(loaded)
    payload, tensors = fit_run_context(loaded, plain)
    write_run_context(loaded, payload, tensors)
    assert payload["classes"]["year"]["kept"]
    context = load_run_context(loaded, plain)
    test = loaded.corpus.test
    scores = loaded.scorer().score(test, features=True)
    year = plain["year"]
    positions, index = year.cls.positions(test)
    ctx = year.cls.context(test, positions, year.context)
    second = np.isfinite(ctx.prev_value)  # the year after the cue
    later = (year.cls.candidates.values[index] > ctx.prev_value)[second]
    at = positions[second]
    values = year.cls.candidates.values
    rows_plain = np.exp(year.log_prob(ctx.rows(np.flatnonzero(second))))
    rows_context = np.exp(
        context["year"].log_prob(ctx.rows(np.flatnonzero(second)), scores.features[at])
    )
    above = values[None, :] > ctx.prev_value[second][:, None]

    def right_side(rows: np.ndarray) -> np.ndarray:
        """P(w | c) on the side of the previous year that the cue word announced."""
        mass_above = (rows * above).sum(axis=1)
        return np.where(later, mass_above, 1 - mass_above - _same(rows, values, ctx, second))

    # the plain model cannot tell the cues apart: about half its mass on the announced side
    assert 0.3 < right_side(rows_plain).mean() < 0.7
    # the context model reads the cue from the LM's state
    assert right_side(rows_context).mean() > 0.85
    gain = (np.log(rows_context) - np.log(rows_plain))[np.arange(len(at)), index[second]]
    assert gain.mean() > 0.4  # nats per year; knowing the side is worth up to log 2 = 0.69


def _same(rows: np.ndarray, values: np.ndarray, ctx, second: np.ndarray) -> np.ndarray:
    """P(w | c) on the previous year itself (neither side)."""
    return (rows * (values[None, :] == ctx.prev_value[second][:, None])).sum(axis=1)
