"""``nslm eval RUN --best``: the EM mixture of every model and the cache (NSLM-best).

Synthetic cases for the rules (EM's weights, the mixture a proper distribution where a
component is missing), then the session's tiny real WikiText-2 run scored on a 5k-token
prefix through the command line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import copy_run
from nslm.cli import main
from nslm.mixtures.best_column import COLUMN
from nslm.mixtures.mixture_weights import blend_log_probs, fit_weights
from nslm.perplexity import perplexity

SLICE = 5_000


def distributions(seed: int, k: int, t: int, v: int) -> np.ndarray:
    """``k`` models' full next-token distributions at ``t`` positions: (K, T, V)."""
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(v, 0.3), size=(k, t))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(1, 6),
    t=st.integers(1, 30),
    v=st.integers(2, 40),
    drop=st.floats(0.0, 0.6),
)
def test_the_mixture_sums_to_one_where_components_are_missing(seed, k, t, v, drop) -> None:
    """The full mixture, with a missing component's weight spread over the others, sums to 1
    at every position, and its entry at the target is what the column scores."""
    rng = np.random.default_rng(seed + 1)
    full = distributions(seed, k, t, v)
    weights = rng.dirichlet(np.ones(k))
    present = rng.random((k, t)) >= drop
    present[0] = True  # the first component (the NNLM) scores every scored position
    targets = rng.integers(0, v, size=t)
    target_lp = np.log(full[:, np.arange(t), targets])
    target_lp[~present] = math.nan
    got = blend_log_probs(target_lp, weights)
    for j in range(t):
        w = np.where(present[:, j], weights, 0.0)
        if w.sum() == 0:  # every present component has weight 0: nothing to mix
            continue
        mixed = (w[:, None] * full[:, j]).sum(axis=0) / w.sum()
        assert abs(mixed.sum() - 1.0) < 1e-9
        assert got[j] == pytest.approx(math.log(mixed[targets[j]]), rel=1e-9, abs=1e-12)


def test_an_unscored_position_stays_unscored() -> None:
    lp = np.log(np.array([[math.nan, 0.5], [0.25, 0.25]]))
    got = blend_log_probs(lp, np.array([0.5, 0.5]))
    assert math.isnan(got[0]) and got[1] == pytest.approx(math.log(0.375))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 5), t=st.integers(5, 200))
def test_em_weights_beat_every_component_and_the_uniform_mix(seed, k, t) -> None:
    rng = np.random.default_rng(seed)
    lp = np.log(rng.dirichlet(np.ones(8), size=(k, t))[:, :, 0] + 1e-12)
    weights = fit_weights(lp)
    assert weights.shape == (k,) and np.all(weights >= 0)
    assert weights.sum() == pytest.approx(1.0, abs=1e-12)
    best = perplexity(blend_log_probs(lp, weights))
    assert best <= min(perplexity(row) for row in lp) * (1 + 1e-6)
    assert best <= perplexity(blend_log_probs(lp, np.full(k, 1.0 / k))) * (1 + 1e-6)


def test_em_with_a_missing_component_scores_as_the_blend_does() -> None:
    """Where a cache is missing, EM reads the mixture of the others, as the column does:
    its weights are no worse than the same EM on the positions without a gap."""
    rng = np.random.default_rng(1)
    lp = np.log(rng.dirichlet(np.ones(6), size=(3, 400))[:, :, 0])
    lp[2, :50] = math.nan  # the cache's first positions: an empty window
    weights = fit_weights(lp)
    assert np.all(np.isfinite(weights)) and weights.sum() == pytest.approx(1.0)
    full = perplexity(blend_log_probs(lp, weights))
    for other in (np.array([0.5, 0.3, 0.2]), np.full(3, 1 / 3), np.array([0.9, 0.05, 0.05])):
        assert full <= perplexity(blend_log_probs(lp, other)) * (1 + 1e-4)


def test_em_finds_the_known_mixture() -> None:
    """Targets drawn from 0.7·A + 0.3·B: EM recovers the weights from the data alone."""
    rng = np.random.default_rng(0)
    v, t = 50, 40_000
    a, b = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
    targets = rng.choice(v, size=t, p=0.7 * a + 0.3 * b)
    weights = fit_weights(np.log(np.stack([a[targets], b[targets]])))
    assert weights == pytest.approx([0.7, 0.3], abs=0.03)


# -- a tiny real run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tiny_nslm_each_top: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each HNLM top level's tiny run: a shared one also gives P(class|h) buckets."""
    return copy_run(tiny_nslm_each_top, tmp_path_factory.mktemp("best") / "tiny")


@pytest.mark.realdata
def test_cli_best_column(run: Path, capsys: pytest.CaptureFixture) -> None:
    args = [
        "eval",
        str(run),
        "--split",
        "test",
        "--prefix-tokens",
        str(SLICE),
        "--best",
        "--cache-window",
        "100,400",
        "--cache-theta",
        "0.5,1",
        "--by-rarity",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"{COLUMN} = " in out and "tuned on valid (EM)" in out
    data = json.loads((run / "tables_test.json").read_text())
    for table, entry in data["tables"].items():
        assert "5-gram NSLM" in entry["models"] and entry["models"][-1] == COLUMN
        best = entry["best"]
        assert best["components"][:2] == ["NNLM", "NSLM-pure"]
        assert best["components"][-3:] == ["cache", "class cache", "unigram cache"]
        assert sum(best["weights"]) == pytest.approx(1.0, abs=1e-9)
        # buckets by each signal the run has, kept only where they beat the pooled weights,
        # then one weight vector per bucket, each on the simplex
        tried = best["valid_ppl_by_buckets"]
        shared = json.loads((run / "config.json").read_text()).get("hnlm_top") == "shared"
        assert set(tried) == {"pooled", "r(w_prev)", *(["P(class|h)"] if shared else [])}
        assert best["valid_ppl"] == min(tried.values())
        if best["bucket_by"]:
            assert tried[best["bucket_by"]] < tried["pooled"]
            assert len(best["bucket_weights"]) == len(best["bucket_edges"]) + 1
            assert all(sum(w) == pytest.approx(1.0, abs=1e-9) for w in best["bucket_weights"])
        else:
            assert best["bucket_weights"] == []
        assert best["window"] in (100, 400) and best["theta"] in (0.5, 1.0)
        assert set(best["valid_ppl_by_window"]) == {"100", "400"}
        # the optimum of a concave problem: no worse on valid than any one of its models
        assert best["valid_ppl"] <= min(best["valid_ppl_components"].values()) * (1 + 1e-6)
        agg = entry["aggregates"][0]
        assert math.isfinite(entry["rows"][agg][COLUMN]), table
    rarity = json.loads((run / "rarity_test.json").read_text())
    for buckets in rarity["tables"].values():  # the recorder, last, saw the new column
        assert all(COLUMN in bucket for bucket in buckets.values())


@pytest.mark.realdata
def test_best_with_bad_windows_is_one_line_exit_2(run: Path, capsys) -> None:
    assert main(["eval", str(run), "--split", "test", "--best", "--cache-window", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "windows must be ≥ 1" in err
