"""The logic of benchmarks/table4/table4.py on small synthetic numbers: the λ of ``with_nnlm`` reads
valid only, the noise band's tie rule, and the per-run score cache's invalidation."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

TABLE4 = Path(__file__).resolve().parents[2] / "benchmarks" / "table4"
sys.path[:0] = [str(TABLE4), str(TABLE4.parent / "common")]  # as the script runs

from table4_parts import (  # noqa: E402
    RunScores,
    Texts,
    borrowed_sigma,
    cached,
    is_tie,
    noise_of,
    spread,
    tie_threshold,
    with_nnlm,
)


def scores(column: str, valid: np.ndarray, test: np.ndarray) -> RunScores:
    """A run's per-position log-probabilities, the adjusted ones a constant below."""
    log_probs = {
        text: {"proper": {column: lp}, "adjusted": {column: lp - 0.5}}
        for text, lp in (("valid", valid), ("test", test))
    }
    return RunScores(log_probs, {}, {})


def test_the_lambda_of_with_nnlm_reads_valid_only() -> None:
    rng = np.random.default_rng(0)
    valid_nnlm, valid_model = rng.normal(-6, 1, 200), rng.normal(-5, 1, 200)
    test = rng.normal(-6, 1, (4, 150))
    first = with_nnlm(scores("m", valid_model, test[0]), "m", scores("NNLM", valid_nnlm, test[1]))
    other = with_nnlm(scores("m", valid_model, test[2]), "m", scores("NNLM", valid_nnlm, test[3]))
    assert 0.0 < first["lambda"] < 1.0
    assert other["lambda"] == first["lambda"]  # other test scores: the same λ
    assert other["num_ppl_proper"] != first["num_ppl_proper"]
    # the test figure is the mixture at that λ, each convention mixed by itself
    lam = first["lambda"]
    mixed = np.logaddexp(math.log(lam) + test[1], math.log1p(-lam) + test[0])
    assert first["num_ppl_proper"] == pytest.approx(math.exp(-mixed.mean()), rel=1e-9)
    mixed = np.logaddexp(math.log(lam) + test[1] - 0.5, math.log1p(-lam) + test[0] - 0.5)
    assert first["num_ppl_adjusted"] == pytest.approx(math.exp(-mixed.mean()), rel=1e-9)
    assert "|U|" in first["adjusted_note"]
    # valid decides λ: a model far worse than the NNLM on valid gets (almost) none of it
    worse = with_nnlm(
        scores("m", valid_model - 8, test[0]), "m", scores("NNLM", valid_nnlm, test[1])
    )
    assert worse["lambda"] > first["lambda"]


def test_spread_is_the_sample_standard_deviation() -> None:
    got = spread([90.0, 100.0, 110.0])
    assert got["mean"] == 100.0 and got["std"] == pytest.approx(10.0) and got["n"] == 3
    assert math.isnan(spread([5.0])["std"])


def test_a_difference_inside_two_combined_sigmas_is_a_tie() -> None:
    # σ 3 and 4: 2·√(9 + 16) = 10
    assert tie_threshold(3.0, 4.0) == pytest.approx(10.0)
    assert is_tie(100.0, 3.0, 109.9, 4.0) and is_tie(109.9, 4.0, 100.0, 3.0)
    assert not is_tie(100.0, 3.0, 110.1, 4.0)
    assert not is_tie(100.0, 0.0, 100.5, 0.0) and is_tie(100.0, 0.0, 100.0, 1e-9)


def test_a_single_seed_row_borrows_the_largest_sigma() -> None:
    seeded = {"softmax": spread([90.0, 100.0, 110.0]), "d-RNN": spread([50.0, 51.0, 52.0])}
    borrowed = borrowed_sigma(seeded, "small")
    assert borrowed["from_row"] == "softmax" and borrowed["sigma"] == pytest.approx(10.0)
    assert borrowed["relative"] == pytest.approx(0.1)
    assert borrowed_sigma({}, "small") is None
    own = noise_of([50.0, 51.0, 52.0], borrowed, "small")
    assert own["value"] == 51.0 and own["sigma"] == pytest.approx(1.0)
    assert own["n_seeds"] == 3 and "borrowed" not in own
    single = noise_of([70.0], borrowed, "small")
    assert single["sigma"] == pytest.approx(10.0) and single["borrowed"]
    assert "softmax" in single["sigma_from"]
    # at another budget the borrowed σ is relative: 10% of this row's figure
    other = noise_of([40.0], borrowed, "large")
    assert other["sigma"] == pytest.approx(4.0) and "relative" in other["sigma_from"]
    assert noise_of([70.0], None, "small")["sigma"] is None


def test_add_noise_compares_seed_means_and_flags_ties() -> None:
    """The table's rule on a synthetic budget: softmax's seed mean is the base; a row
    within 2·√(σa² + σb²) of it is a tie, one farther is not; the outcome names the rows
    with one seed and compares NSLM-open with the best numeral option."""
    from table4 import add_noise

    def row(values: list[float], mixed: list[float] | None = None) -> dict:
        figs = [
            {"num_ppl_proper": v, "num_ppl_adjusted": v, "mdape": 90.0, "mdae": 25.0}
            for v in values
        ]
        if mixed is not None:
            for fig, m in zip(figs, mixed, strict=True):
                fig["with_nnlm"] = {"num_ppl_proper": m}
        out = dict(figs[0])
        if len(values) > 1:
            out["seeds"] = {str(i + 1): f for i, f in enumerate(figs)}
        return out

    table = {
        "softmax": row([1900.0, 2000.0, 2100.0], [1800.0, 1900.0, 2000.0]),  # σ 100
        "d-RNN": row([1820.0, 1830.0, 1840.0], [1800.0, 1810.0, 1820.0]),  # σ 10
        "MoG": row([2250.0], [2100.0]),  # one seed: borrows σ 100
        "NNLM": row([3000.0, 3100.0, 3200.0]),
        "NSLM-open": row([1000.0]),
    }
    entry = {"name": "small", "table4": table}
    add_noise(entry, borrowed_sigma({"softmax": spread([1900.0, 2000.0, 2100.0])}, "small"))
    assert table["softmax"]["num_ppl_proper_mean"] == 2000.0
    assert table["softmax"]["num_ppl_proper_std"] == pytest.approx(100.0)
    assert "standard deviation" in table["softmax"]["spread"]
    assert table["softmax"]["change_vs_softmax"] == 0.0
    assert table["softmax"]["tie_vs_softmax"] is None  # not compared with itself
    # d-RNN: 1,830 against 2,000, threshold 2·√(100² + 10²) ≈ 201: a tie
    assert table["d-RNN"]["change_vs_softmax"] == pytest.approx(1830 / 2000 - 1)
    assert table["d-RNN"]["tie_vs_softmax"] is True
    # MoG, one seed at 2,250 (σ borrowed 100): threshold 2·√(2)·100 ≈ 283 > 250: a tie
    assert table["MoG"]["noise"]["borrowed"] and table["MoG"]["tie_vs_softmax"] is True
    assert table["NNLM"]["tie_vs_softmax"] is False  # 1,100 above
    out = entry["outcome"]
    assert out["best_numeral_model"] == "d-RNN+NNLM"  # mean 1,810
    assert out["best_numeral_num_ppl_proper"] == pytest.approx(1810.0)
    assert "MoG" in out["single_seed_rows"] and "NSLM-open" in out["single_seed_rows"]
    assert "softmax" not in out["single_seed_rows"]
    assert out["outside_noise_band"] is True  # 810 below, threshold 2·√(100² + 10²)
    assert out["tie_threshold"] == pytest.approx(2 * math.sqrt(100**2 + 10**2))
    # d-RNN alone, 20 above with σ 10 each (threshold ≈ 28): a tie; MoG, 440 above, is not
    assert "d-RNN" in out["tied_with_best"] and "MoG" not in out["tied_with_best"]
    assert entry["noise_band"]["single_seed_rows"] == ["MoG", "NSLM-open"]


# -- the per-run score cache -------------------------------------------------------------


def tiny_texts(test_positions: list[int]) -> Texts:
    texts = {"valid": SimpleNamespace(split=[0] * 5), "test": SimpleNamespace(split=[0] * 9)}
    positions = {"valid": np.array([1, 3]), "test": np.array(test_positions)}
    return Texts(texts, positions, [], 0)


def test_a_changed_weights_file_or_candidate_set_rescores(tmp_path: Path) -> None:
    from table4_numerals import final_key

    run = tmp_path / "run"
    run.mkdir()
    weights = run / "model.safetensors"
    weights.write_bytes(b"w" * 10)
    path = run / "table4-eval" / "final.npz"
    calls = []

    def compute() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"lp": np.array([float(len(calls))])}

    def score(positions=(2, 4), candidates=("1", "2")) -> float:
        key = final_key(run, tiny_texts(list(positions)), list(candidates))
        return float(cached(path, key, compute)["lp"][0])

    assert score() == 1.0 and score() == 1.0  # the second read from the cache
    weights.write_bytes(b"w" * 11)  # new weights: another size
    assert score() == 2.0 and score() == 2.0
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same size, rewritten
    assert score() == 3.0
    assert score(candidates=("1", "3")) == 4.0  # another candidate set
    assert score(candidates=("1", "3")) == 4.0
    assert score(positions=(2, 5), candidates=("1", "3")) == 5.0  # other positions
    assert cached(None, {}, compute)["lp"][0] == 6.0  # no cache path: always computed
    path.write_bytes(b"not an npz")  # unreadable: computed again, not an error
    assert score(positions=(2, 5), candidates=("1", "3")) == 7.0


def test_an_nslm_run_rescores_when_its_micro_model_files_change(tmp_path: Path) -> None:
    from table4_nslm import final_key

    run = tmp_path / "nnlm-seed2"
    run.mkdir()
    (run / "model.safetensors").write_bytes(b"w")
    texts = tiny_texts([2, 4])
    before = final_key(run, run, texts, ["1"])
    assert final_key(run, run, texts, ["1"]) == before
    (run / "open.json").write_text("{}")
    after_open = final_key(run, run, texts, ["1"])
    assert after_open != before
    (run / "micro_context.json").write_text("{}")
    assert final_key(run, run, texts, ["1"]) != after_open
    assert final_key(run, run, texts, ["2"]) != final_key(run, run, texts, ["1"])


def test_runs_that_are_not_a_directory_exit_2_with_one_line(tmp_path: Path) -> None:
    import subprocess

    script = TABLE4 / "table4.py"
    missing = tmp_path / "nowhere"
    done = subprocess.run(
        [sys.executable, str(script), "--runs", str(missing)],
        capture_output=True,
        text=True,
        cwd=TABLE4.parents[1],
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"table4.py: --runs {missing}: not a directory"]


def test_a_fit_is_timed_logged_and_then_skipped(tmp_path: Path, monkeypatch) -> None:
    """benchmarks/table4/table4_train.py's fits: one runs while its output is missing or older
    than the weights, appends its output to the run's log and records its wall time and
    what it wrote in RUN/fit_times.json; a fresh output is not fitted again."""
    import json

    import table4_train

    run = tmp_path / "small" / "nnlm-seed2"
    run.mkdir(parents=True)
    weights = run / "model.safetensors"
    weights.write_bytes(b"w")
    (tmp_path / "small" / "nnlm-seed2.log").write_text("training\n")
    fit = table4_train.Fit("micro", ("--fast",), "open.json", "the micro-models")
    script = (
        "import pathlib, sys; run = pathlib.Path(sys.argv[1]); "
        "(run / 'open.json').write_text('{}'); "
        "print(f'wrote {run / \"micro.json\"} (3 s)'); print(f'wrote {run / \"open.json\"} (9 s)')"
    )
    ran = []

    def fake_command(run: Path, fit) -> list[str]:
        ran.append(run)
        return [sys.executable, "-c", script, str(run)]

    monkeypatch.setattr(table4_train, "fit_command", fake_command)
    monkeypatch.setattr(table4_train, "FITS", (fit,))
    st = weights.stat()
    assert table4_train.fit_needed(run, fit)
    table4_train.fit_all(run, dry_run=False)
    times = json.loads((run / "fit_times.json").read_text())
    assert isinstance(times["micro"]["seconds"], float) and times["micro"]["seconds"] >= 0
    assert times["micro"]["wrote_at_seconds"] == {"micro.json": 3, "open.json": 9}
    log = (tmp_path / "small" / "nnlm-seed2.log").read_text()
    assert log.startswith("training\n") and "(9 s)" in log
    assert not table4_train.fit_needed(run, fit)
    calls = len(ran)
    table4_train.fit_all(run, dry_run=False)
    assert len(ran) == calls  # fitted: skipped
    # new weights after the fit: fitted again
    os.utime(weights, ns=(st.st_atime_ns, (run / "open.json").stat().st_mtime_ns + 10**9))
    assert table4_train.fit_needed(run, fit)


def test_a_tuning_choice_at_a_grid_edge_widens_the_grid_to_the_ranges_end() -> None:
    from table4_train import widened

    assert widened((0.1, 0.25, 0.4), 0.25, "dropout") is None  # inside: no widening
    assert widened((0.1, 0.25, 0.4), 0.1, "dropout") == (0.0, 0.1, 0.25, 0.4)  # down to 0
    assert widened((0.0, 0.1, 0.25), 0.0, "dropout") is None  # the range's own end
    assert widened((0.25, 0.4, 0.55), 0.55, "dropout") == (0.25, 0.4, 0.55, 0.7)
    assert widened((0.002, 0.004, 0.008), 0.008, "lr") == (0.002, 0.004, 0.008, 0.016)
    assert widened((16, 32), 16, "digit_size") == (8, 16, 32)
