"""``nslm eval RUN --cache --crnn --by-rarity``: the cache grid, the CRNN column, rarity, CLI.

Unit tests on small synthetic cases (the vectorised grid against the one-position reference,
λ = 0, tuning), then a private copy of the session's tiny real WikiText-2 run (conftest.py:
``configs/tiny.toml``, 40 steps, fast micro-models for <year>, <convert> and <city>) scored on
5k-token prefixes: the columns against independent computations at chosen positions, and the
CLI end to end with bad input.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import copy_run
from nslm.cli import main
from nslm.evaluation.report import EvalOptions, evaluate_run
from nslm.mixtures.cache import (
    CacheParams,
    cache_distribution,
    cache_probs_grid,
    cache_target_probs,
    mix_target_log_probs,
)
from nslm.mixtures.cache_column import CacheGrid, CacheSource, tune
from nslm.mixtures.char_rnn import END, SEP, CharRNNConfig
from nslm.mixtures.crnn_column import CRNNSource
from nslm.runs.micro import load_run_micro
from nslm.scores.passes import feature_batches, head_of

ROOT = Path(__file__).resolve().parents[2]
SLICE = 5_000
SMALL_CRNN = CharRNNConfig(epochs=1, batch_size=64, min_steps=15)


def case(seed: int, n: int, vocab: int = 9, d: int = 5):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=gen), torch.randint(0, vocab, (n,), generator=gen)


# -- the vectorised cache -------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 70), block=st.integers(1, 9))
def test_one_product_serves_the_whole_grid(seed: int, n: int, block: int) -> None:
    hidden, tokens = case(seed, n)
    windows, thetas = (1, 4, 11), (0.2, 1.3)
    grid = cache_probs_grid(hidden, tokens, windows, thetas, block=block)
    rng = np.random.default_rng(seed)
    sparse = np.unique(rng.integers(1, n, size=max(1, n // 3)))
    picked = cache_probs_grid(hidden, tokens, windows, thetas, positions=sparse, block=block)
    for w in windows:
        for th in thetas:
            alone = cache_target_probs(hidden, tokens, w, th)[1:]
            torch.testing.assert_close(grid[(w, th)], alone, rtol=1e-12, atol=0, equal_nan=True)
            torch.testing.assert_close(
                picked[(w, th)], alone[sparse - 1], rtol=1e-12, atol=0, equal_nan=True
            )


def test_float32_products_agree_with_the_float64_reference() -> None:
    hidden, tokens = case(3, 400, d=16)
    ref = cache_probs_grid(hidden, tokens, [50], [0.75])[(50, 0.75)]
    fast = cache_probs_grid(hidden, tokens, [50], [0.75], dtype=torch.float32)[(50, 0.75)]
    torch.testing.assert_close(fast, ref, rtol=1e-4, atol=1e-7, equal_nan=True)


def test_mixture_sums_to_one_and_lambda_zero_is_exact() -> None:
    hidden, tokens = case(5, 40)
    logits = torch.randn(40, 9, generator=torch.Generator().manual_seed(1))
    probs = torch.softmax(logits.double(), 1)
    for lam in (0.0, 0.25, 1.0):
        params = CacheParams(window=7, lam=lam, theta=0.5)
        full = cache_distribution(probs[39], hidden[38], hidden[:38], tokens[1:39], params)
        assert abs(float(full.sum()) - 1.0) < 1e-12
    model_lp = torch.log(probs[torch.arange(40), tokens])
    cache = cache_target_probs(hidden, tokens, 7, 0.5)
    assert torch.equal(mix_target_log_probs(model_lp, cache, 0.0), model_lp)


def test_tuning_picks_the_best_cell_of_the_grid() -> None:
    hidden, tokens = case(11, 300)
    model_lp = torch.full((300,), -math.log(9.0), dtype=torch.float64)
    grid = CacheGrid(windows=(5, 50), thetas=(0.1, 2.0), lambdas=(0.1, 0.5))
    positions = np.arange(1, 300)
    probs = cache_probs_grid(hidden, tokens, grid.windows, grid.thetas, positions=positions)
    choice = tune(model_lp.numpy()[positions], probs, grid)
    assert (choice.window, choice.theta, choice.lam) in {
        (w, t, lam) for w in grid.windows for t in grid.thetas for lam in grid.lambdas
    }
    brute = min(
        math.exp(-float(mix_target_log_probs(model_lp[positions], probs[(w, t)], lam).mean()))
        for w in grid.windows
        for t in grid.thetas
        for lam in grid.lambdas
    )
    assert choice.valid_ppl == pytest.approx(brute, rel=1e-12)
    assert choice.valid_ppl_model == pytest.approx(9.0)


# -- a tiny real run ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tiny_nslm_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the session's tiny run: the CRNNs, tables and plots go into it."""
    return copy_run(tiny_nslm_run, tmp_path_factory.mktemp("extras") / "tiny")


def features_at(loaded, split, positions: np.ndarray) -> torch.Tensor:
    """Backbone states predicting ``positions`` (sorted), from a pass of their own."""
    cfg = loaded.cfg
    out = torch.zeros(len(positions), loaded.model.backbone.out_dim)
    for hv, _, _, where in feature_batches(
        loaded.model, split, batch_size=cfg.eval_batch_size, bptt=cfg.bptt
    ):
        hit = np.isin(where, positions)
        out[torch.from_numpy(np.searchsorted(positions, where[hit]))] = hv[torch.from_numpy(hit)]
    return out


@pytest.mark.realdata
def test_one_pass_with_features_gives_the_runs_own_scores(loaded) -> None:
    """Keeping the hidden states (for the cache) changes no score, and the full pass is
    memoised: the extras read the same arrays as the run's own columns."""
    micro = load_run_micro(loaded)
    split = head_of(loaded.corpus.test, SLICE)
    ref = loaded.scorer().nslm(split, micro)
    scorer = loaded.scorer(keep_features=True)
    got = scorer.nslm(split, micro)
    for part in ("nnlm", "hnlm", "top", "pure"):
        np.testing.assert_array_equal(getattr(got, part), getattr(ref, part))
    assert got.features is not None and got.features.shape[0] == len(split)
    assert scorer.score(split) is scorer.score(split)


@pytest.mark.realdata
def test_cache_column_agrees_with_the_full_distribution(loaded) -> None:
    split = head_of(loaded.corpus.test, SLICE)
    window, theta, lam = 30, 0.5, 0.3
    scorer = loaded.scorer(keep_features=True)
    choice = {"NNLM": tune_choice(window, theta, lam)}
    source = CacheSource(scorer, choices={"numbers": choice})
    nnlm = scorer.score(split).nnlm
    column = source.score("test", split, {"NNLM": nnlm}, "numbers")["NNLM+cache"]
    assert np.isnan(column[0]) and np.isfinite(column[1:]).all()
    positions = np.array([1, 2, 17, 400, 2_345, SLICE - 1])
    h = features_at(loaded, split, np.arange(1, SLICE))  # row t - 1 predicts token t
    tokens = torch.from_numpy(split.token_ids.astype(np.int64))
    params = CacheParams(window=window, lam=lam, theta=theta)
    with torch.no_grad():
        dist = torch.exp(loaded.model.heads["nnlm"].log_dist(h[positions - 1]).double())
    for row, t in enumerate(positions):
        keys = h[max(0, t - 1 - window) : t - 1]
        full = cache_distribution(dist[row], h[t - 1], keys, tokens[t - keys.shape[0] : t], params)
        assert abs(float(full.sum()) - 1.0) < 1e-5
        assert column[t] == pytest.approx(math.log(float(full[tokens[t]])), rel=1e-4)
    # a token repeated within the window gains probability; one absent from it loses some
    # (position 1 has an empty cache and keeps the model's probability)
    assert column[1] == nnlm[1]
    seen = np.array(
        [split.token_ids[t] in split.token_ids[max(1, t - window) : t] for t in range(2, SLICE)]
    )
    gain = column[2:] - nnlm[2:]
    assert (gain[~seen] < 0).all()
    assert np.median(gain[seen]) > 0


def tune_choice(window: int, theta: float, lam: float):
    from nslm.mixtures.cache_column import CacheChoice

    return CacheChoice(window, theta, lam, math.nan, math.nan)


@pytest.mark.realdata
def test_crnn_column_agrees_with_an_independent_computation(loaded, tmp_path: Path) -> None:
    corpus = loaded.corpus
    split = head_of(corpus.test, SLICE)
    scorer = loaded.scorer()
    source = CRNNSource(scorer, corpus, tmp_path / "crnn", SMALL_CRNN)
    hnlm = scorer.score(split).hnlm
    column = source.score("test", split, {"HNLM": hnlm})["CRNN"]
    models = source.models()
    # every class's CRNN is a distribution over V_c
    for model in models.values():
        np.testing.assert_allclose(np.exp(model.log_prob_matrix([""])).sum(), 1.0, atol=1e-9)
    head = loaded.model.heads["hnlm"]
    state = corpus.class_id("state")
    words = np.flatnonzero(split.class_ids == 0)[1:4]
    states = np.flatnonzero(split.class_ids == state)[:3]
    positions = np.sort(np.concatenate([words, states]))
    with torch.no_grad():
        top = head.top.log_prob(features_at(loaded, split, positions)).double().numpy()
    crnn = models["state"]
    log_char = np.array([char_chain(crnn, w) for w in crnn._strings])
    log_char -= np.logaddexp.reduce(log_char)  # normalised over V_<state>
    for row, t in enumerate(positions):
        w = int(split.token_ids[t])
        if split.class_ids[t] == 0:  # a word: the top level's own probability (= the HNLM's)
            want = top[row, head.layout.top_of_word[w]]
            assert column[t] == pytest.approx(hnlm[t], abs=1e-9)
        else:
            k = int(np.searchsorted(crnn.candidates, w))
            want = top[row, head.layout.top_of_tag[state]] + log_char[k]
        assert column[t] == pytest.approx(want, abs=1e-4)
    assert source.loaded_from_disk == []
    again = CRNNSource(loaded.scorer(), corpus, tmp_path / "crnn", SMALL_CRNN)
    np.testing.assert_array_equal(again.score("test", split, {})["CRNN"], column)
    assert sorted(again.loaded_from_disk) == sorted(models)  # reused, not retrained


def char_chain(model, word: str) -> float:
    """log P_char(word ⊣) by one plain forward pass over [SEP, c1, …, cn]."""
    ids = [model._char_index.get(ch, model._char_index["\x00unk"]) for ch in word]
    with torch.no_grad():
        log_probs, _ = model._net(torch.tensor([[SEP, *ids]]))
    targets = [*ids, END]
    return float(sum(log_probs[0, i, c] for i, c in enumerate(targets)))


# -- the command line -----------------------------------------------------------------------

EXTRAS = [
    "--cache",
    "--cache-window",
    "50,200",
    "--cache-theta",
    "0.3,0.75",
    "--crnn",
    "--crnn-steps",
    "15",
    "--by-rarity",
]


@pytest.mark.realdata
def test_cli_end_to_end(run: Path, loaded, capsys: pytest.CaptureFixture) -> None:
    args = ["eval", str(run), "--split", "test", "--prefix-tokens", str(SLICE)]
    assert main([*args, *EXTRAS]) == 0
    captured = capsys.readouterr()
    assert "training the CRNN of <year>" in captured.err
    assert "Num Cache" in captured.out and "Geo Cache" in captured.out
    assert "Locations tokens by training count" in captured.out
    data = json.loads((run / "tables_test.json").read_text())
    bases = ("NNLM", "HNLM", "CRNN", "NSLM")
    for entry in data["tables"].values():
        assert entry["models"][-5:] == [
            "CRNN",
            *(f"{b}+cache" for b in ("NNLM", "HNLM", "CRNN", "NSLM")),
        ]
        for base in bases:
            params = entry["cache"][base]
            assert params["window"] in (50, 200) and params["theta"] in (0.3, 0.75)
            assert params["lam"] in CacheGrid().lambdas
            assert params["valid_ppl"] <= params["valid_ppl_model"]
    rarity = json.loads((run / "rarity_test.json").read_text())
    for table, buckets in rarity["tables"].items():
        entry = data["tables"][table]
        agg = entry["aggregates"][0]
        for model in entry["models"]:
            assert sum(b[model]["tokens"] for b in buckets.values()) == entry["tokens"][agg]
    assert (run / "rarity_test.png").stat().st_size > 5_000
    assert (
        len(list((run / "crnn").glob("crnn-*.safetensors"))) == len(loaded.corpus.class_names) - 1
    )
    # the extras leave the run's own columns as a plain eval computes them
    plain = evaluate_run(
        loaded, load_run_micro(loaded), split="test", options=EvalOptions(max_tokens=SLICE)
    )
    for table, entry in plain["tables"].items():
        for row, values in entry["rows"].items():
            for model, ppl in values.items():
                got = data["tables"][table]["rows"][row][model]  # null: no token of the class
                assert got == pytest.approx(ppl, rel=1e-12) if math.isfinite(ppl) else got is None
    # a second eval reuses the CRNN weights
    assert main([*args, "--crnn", "--crnn-steps", "15"]) == 0
    captured = capsys.readouterr()
    assert "training the CRNN" not in captured.err
    again = json.loads((run / "tables_test.json").read_text())
    assert again["tables"]["numbers"]["rows"]["Numbers"]["CRNN"] == pytest.approx(
        data["tables"]["numbers"]["rows"]["Numbers"]["CRNN"], rel=1e-12
    )


@pytest.mark.realdata
@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--cache", "--cache-window", "0"], "windows must be ≥ 1"),
        (["--cache", "--cache-lambda", "0.2,1.5"], "λ must lie in (0, 1]"),
        (["--cache", "--cache-theta", "warm"], "comma-separated numbers"),
        (["--cache-window", "100"], "--cache-window needs --cache"),
        (["--crnn", "--crnn-steps", "0"], "--crnn-steps"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(run: Path, capsys, extra, needle) -> None:
    before = (
        (run / "tables_test.json").stat().st_mtime_ns
        if (run / "tables_test.json").exists()
        else None
    )
    assert main(["eval", str(run), "--split", "test", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    after = (
        (run / "tables_test.json").stat().st_mtime_ns
        if (run / "tables_test.json").exists()
        else None
    )
    assert before == after  # nothing written


@pytest.mark.realdata
def test_extras_need_micro_json(run: Path, tmp_path: Path, capsys) -> None:
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(run, bare, ignore=shutil.ignore_patterns("micro.json", "crnn", "tables_*"))
    assert main(["eval", str(bare), "--split", "test", "--by-rarity"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "need RUN/micro.json" in err
    assert not (bare / "eval.json").exists()
