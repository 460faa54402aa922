"""A run's context-aware micro-models end to end on the tiny WikiText-2 run: micro fit
--context writes JSON + safetensors; eval adds NSLM-context; predict shows the gate; the
scoring pass and the full distribution agree; stale or missing files are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from helpers import assert_one_line_error, copy_run, run_cli
from nslm.runs.context_micro import CONTEXT_FILE, CONTEXT_TENSORS, run_micro_models
from nslm.runs.load import load_run
from nslm.scores.passes import head_of

PROMPT = "William the Conqueror won the Battle of Hastings in 1066 , and died in"


@pytest.fixture(scope="module")
def context_run(tiny_nslm_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny run with its context micro-models fitted by the CLI (once; read only)."""
    run = copy_run(tiny_nslm_run, tmp_path_factory.mktemp("context") / "tiny")
    done = run_cli("micro", "fit", str(run), "--context", "--components", "2")
    assert done.returncode == 0, done.stderr
    assert "mixture" in done.stdout and "shifted" in done.stdout
    return run


def test_fit_writes_both_files_with_every_class(context_run: Path) -> None:
    payload = json.loads((context_run / CONTEXT_FILE).read_text())
    assert set(payload["classes"]) == {"year", "convert", "city"}
    tensors = load_file(str(context_run / CONTEXT_TENSORS))
    for name, entry in payload["classes"].items():
        tried = entry["valid_nll"]
        # every class tries the mixture; diff (years) and euclidean (cities) the shift too
        shifts = ["shifted", "shifted_mixture"] if name != "convert" else []
        assert set(tried) == {"plain", "mixture", *shifts}
        assert entry["kind"] == min(tried, key=tried.get)
        assert entry["kept"] == (entry["kind"] != "plain")
        if "mixture" in entry["kind"]:  # 2 grid cells (+ the restricted parts of diff)
            assert tensors[f"{name}.W"].shape[0] == len(entry["components"])
        elif entry["kind"] == "shifted":
            assert tensors[f"{name}.A"].shape[0] == len(entry["edges"]) + 1


def test_the_scoring_pass_and_the_full_distribution_agree(context_run: Path) -> None:
    loaded = load_run(context_run)
    micro = run_micro_models(loaded, "context")
    assert any(m.needs_features for m in micro.values()), "no class kept a context model"
    split = head_of(loaded.corpus.test, 4000)
    scores = loaded.scorer().nslm(split, micro)
    year = loaded.corpus.class_id("year")
    positions = np.flatnonzero(split.class_ids == year)[:8]
    full = loaded.scorer().distribution_at(split, positions, micro, loaded.corpus.class_names)
    np.testing.assert_allclose(np.exp(full.marginal()).sum(axis=1), 1.0, atol=1e-4)
    ids, logp = full.within[year]
    where = np.searchsorted(ids, split.token_ids[positions])
    pair = full.tag[np.arange(len(positions)), year] + logp[np.arange(len(positions)), where]
    np.testing.assert_allclose(pair, scores.pure[positions], atol=1e-4)


def test_eval_adds_the_context_column(context_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "tables.json"
    done = run_cli(
        "eval", str(context_run), "--split", "test", "--prefix-tokens", "6000", "-o", str(out)
    )
    assert done.returncode == 0, done.stderr
    tables = json.loads(out.read_text())["tables"]
    for entry in tables.values():
        assert 0.0 <= entry["lambda_context"] <= 1.0
        scored = [row for row in entry["rows"].values() if row["NSLM"] is not None]
        assert scored  # a class without tokens in the prefix has no perplexity (None)
        for row in scored:
            assert np.isfinite(row["NSLM-context"]) and row["NSLM-context"] > 0
    assert "NSLM-context" in done.stdout


def test_predict_shows_the_gate_and_plain_does_not(context_run: Path) -> None:
    done = run_cli("predict", str(context_run), PROMPT, "--json")
    assert done.returncode == 0, done.stderr
    kinds = {
        n: e["kind"]
        for n, e in json.loads((context_run / CONTEXT_FILE).read_text())["classes"].items()
    }
    shown = 0
    for c in json.loads(done.stdout)["classes"]:
        kind = kinds.get(c["class"].strip("<>"))
        if kind in ("mixture", "shifted_mixture"):
            weights = [g["weight"] for g in c["gate"]]
            assert abs(sum(weights) - 1.0) < 1e-6 and weights == sorted(weights, reverse=True)
        elif kind == "shifted":
            factors = [g["factor"] for g in c["shift"]]
            assert min(factors) > 0 and factors == sorted(factors, reverse=True)
        shown += kind not in (None, "plain")
    assert shown == sum(k != "plain" for k in kinds.values()) > 0
    plain = run_cli("predict", str(context_run), PROMPT, "--json", "--micro", "plain")
    assert plain.returncode == 0, plain.stderr
    assert all("gate" not in c and "shift" not in c for c in json.loads(plain.stdout)["classes"])


def test_gates_of_other_weights_are_refused(context_run: Path, tmp_path: Path) -> None:
    run = copy_run(context_run, tmp_path / "retrained")
    weights = load_file(str(run / "model.safetensors"))
    name = next(iter(weights))
    weights[name] = weights[name] + 1e-3
    save_file(weights, str(run / "model.safetensors"))
    assert_one_line_error(run_cli("predict", str(run), PROMPT), "other LM weights", "--context")


def test_missing_context_models_and_bad_options_are_one_line_errors(tiny_nslm_run: Path) -> None:
    run = str(tiny_nslm_run)
    assert_one_line_error(run_cli("predict", run, PROMPT, "--micro", "context"), "--context")
    assert_one_line_error(run_cli("micro", "fit", run, "--context", "--fast"), "--context")


def test_the_report_lists_the_context_models(context_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = run_cli("report", str(context_run), "-o", str(out))
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    section = html[html.index("Context-aware micro-models</h2>") :]
    for name in ("&lt;year&gt;", "&lt;convert&gt;", "&lt;city&gt;"):
        assert name in section
    assert "mixture" in section and "shifted" in section
