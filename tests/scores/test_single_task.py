"""The single-task NSLM (paper Table 8) on a tiny real NNLM-only AWD run.

P(c | h) is the NNLM's probability summed over V_c (each type weighted by its share π(c | w)
of the class; π = 1 for a type of one class), there is no class head, and ``micro fit`` and
``eval`` work on such a run. Scoring uses the first 4k tokens of test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from nslm.cli import main
from nslm.config import load_config
from nslm.errors import NslmError
from nslm.evaluation.report import EvalOptions, evaluate_run
from nslm.runs.micro import load_run_micro
from nslm.scores.classes import RoleShares, SingleTaskFactor
from nslm.scores.passes import Scorer, feature_batches, use_threads
from nslm.training.loop import train

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
SLICE = 4_000
MICRO_CLASSES = "year,convert,city"
pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    use_threads(1)
    run_dir = tmp_path_factory.mktemp("single") / "awd"
    sets = [
        "heads=['nnlm']",
        "model='awd'",
        "weight_drop=0.2",
        "max_steps=30",
        "test_tokens=1000",
        "valid_tokens=3000",
    ]
    train(load_config(TINY, sets), run_dir)
    assert not (run_dir / "layout.json").exists()  # no class head, no HNLM layout
    assert main(["micro", "fit", str(run_dir), "--fast", "--only", MICRO_CLASSES]) == 0
    return run_dir


@pytest.fixture(scope="module")
def scorer(loaded) -> Scorer:
    assert isinstance(loaded.classes, SingleTaskFactor)  # no HNLM head: the Table 8 strategy
    return Scorer(loaded.model, loaded.classes, batch_size=8, bptt=20)


@pytest.fixture(scope="module")
def scores(scorer, loaded, test_slice):
    return scorer.nslm(test_slice, load_run_micro(loaded))


def _positions(loaded, split, classes: tuple[str, ...], k: int = 5) -> np.ndarray:
    rng = np.random.default_rng(1)
    cids = split.class_ids
    picks = [np.flatnonzero(cids == loaded.corpus.class_id(c) if c else cids == 0) for c in classes]
    chosen = np.concatenate([rng.choice(p, min(k, len(p)), replace=False) for p in picks])
    return np.unique(chosen[chosen > 0])


def _nnlm_at(loaded, split, positions: np.ndarray) -> np.ndarray:
    """The NNLM's full distribution (probabilities, float64) at ``positions``: (N, V)."""
    feats = torch.zeros(len(positions), loaded.model.backbone.out_dim)
    for hv, _, _, where in feature_batches(loaded.model, split, batch_size=8, bptt=20):
        hit = np.isin(where, positions)
        if hit.any():
            feats[torch.from_numpy(np.searchsorted(positions, where[hit]))] = hv[
                torch.from_numpy(hit)
            ]
    with torch.no_grad():
        return loaded.model.heads["nnlm"].log_dist(feats).double().exp().numpy()


def test_class_probability_is_the_nnlm_mass_of_the_class(loaded, test_slice, scores) -> None:
    corpus = loaded.corpus
    table = loaded.classes.shares
    positions = _positions(loaded, test_slice, ("year", "city", "round", "convert", "country"))
    probs = _nnlm_at(loaded, test_slice, positions)
    cids = test_slice.class_ids[positions]
    for row, c in enumerate(cids.tolist()):
        members = corpus.class_vocab(c)
        expected = float((probs[row, members] * table.roles[members, c]).sum())
        assert abs(math.exp(scores.top[positions[row]]) - expected) < 1e-6
    # A place type belongs to one class only: P(c | h) is the plain sum over V_c (Table 8).
    for name in ("city", "country"):
        c = corpus.class_id(name)
        members = corpus.class_vocab(c)
        assert np.all(table.roles[members, c] == 1.0)
        rows = np.flatnonzero(cids == c)
        got = np.exp(scores.top[positions[rows]])
        assert np.all(np.abs(got - probs[rows][:, members].sum(axis=1)) < 1e-6)


def test_full_distribution_sums_to_one_and_agrees(loaded, scorer, test_slice, scores) -> None:
    corpus = loaded.corpus
    micro = load_run_micro(loaded)
    positions = _positions(loaded, test_slice, ("", "year", "city", "other", "round"))
    full = scorer.distribution_at(test_slice, positions, micro, corpus.class_names)
    marginal = np.exp(full.marginal())
    assert np.all(np.abs(marginal.sum(axis=1) - 1.0) < 1e-5)
    # The tags hold P(c | h) for every class, matching the per-position scores.
    cids = test_slice.class_ids[positions]
    at_class = cids > 0
    np.testing.assert_allclose(
        full.tag[np.flatnonzero(at_class), cids[at_class]],
        scores.top[positions[at_class]],
        atol=1e-9,
    )
    # Micro-models where fitted, the NNLM's own share of its mass elsewhere.
    assert full.source[corpus.class_id("year")] != "neural"
    assert full.source[corpus.class_id("other")] == "neural"
    # Every per-position NSLM score is its (class, word) entry of the distribution.
    targets = test_slice.token_ids[positions].astype(np.int64)
    for row, (c, w) in enumerate(zip(cids.tolist(), targets.tolist(), strict=True)):
        if c == 0:
            want = full.word[row, w]
        else:
            ids, logp = full.within[c]
            want = full.tag[row, c] + logp[row, int(np.searchsorted(ids, w))]
        assert scores.pure[positions[row]] == pytest.approx(want, abs=1e-6)


def test_word_and_uncovered_positions_keep_the_nnlm(loaded, test_slice, scores) -> None:
    cids = test_slice.class_ids
    words = (cids == 0) & ~np.isnan(scores.nnlm)
    # No class type ever occurs as a plain word in WikiText-2, so π(word | w) = 1 there.
    np.testing.assert_allclose(scores.pure[words], scores.nnlm[words], atol=1e-12)
    other = (cids == loaded.corpus.class_id("other")) & ~np.isnan(scores.nnlm)
    assert other.any() and np.all(scores.pure[other] <= scores.nnlm[other] + 1e-12)
    assert np.isfinite(scores.pure[~np.isnan(scores.nnlm)]).all()


def test_roles_are_shares_within_the_class_vocabularies(wt2_all) -> None:
    table = RoleShares.from_corpus(wt2_all)
    np.testing.assert_allclose(table.roles.sum(axis=1), 1.0)
    year, rng = wt2_all.class_id("year"), wt2_all.class_id("range")
    i = wt2_all.vocab.stoi["1990"]
    assert table.roles[i, year] > 0.9 and 0 < table.roles[i, rng] < 0.1
    assert table.roles[i, 0] == 0.0  # never a plain word in training
    assert table.roles[wt2_all.vocab.stoi["the"], 0] == 1.0
    for c, members in enumerate(table.members[1:], start=1):
        outside = np.setdiff1d(np.arange(len(wt2_all.vocab)), members)
        assert np.all(table.roles[outside, c] == 0.0)


def test_eval_cli_tables_without_hnlm(run: Path, loaded, capsys) -> None:
    assert main(["eval", str(run), "--split", "test", "--prefix-tokens", str(SLICE)]) == 0
    tables = json.loads((run / "tables_test.json").read_text())["tables"]
    rows = tables["numbers"]["rows"]
    assert "HNLM" not in rows["Global"] and rows["Global"]["NSLM"] > 1
    assert "NSLM-pure" in rows["year"]
    # The evaluation API gives the same tables.
    result = evaluate_run(
        loaded, load_run_micro(loaded), split="test", options=EvalOptions(max_tokens=SLICE)
    )
    assert result["tables"]["numbers"]["rows"]["Global"]["NNLM"] == pytest.approx(
        rows["Global"]["NNLM"]
    )


def test_score_parts_top_of_a_single_task_run(scorer, test_slice, scores) -> None:
    """The NSLM's neural factor alone (what the eval-cost benchmark times)."""
    got = scorer.score(test_slice, ("nnlm", "top"))
    np.testing.assert_array_equal(got.top, scores.top)
    np.testing.assert_array_equal(got.nnlm, scores.nnlm)
    with pytest.raises(NslmError, match="cannot score hnlm"):
        scorer.score(test_slice, ("hnlm", "top"))
