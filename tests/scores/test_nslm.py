"""The NSLM end to end on a tiny real run: Eq. 4, the ensemble, the tables, predict, bad input.

The session's tiny WikiText-2 runs (conftest.py: ``configs/tiny.toml``, a 20k-token slice, a
1×32 LSTM, 40 steps), one per HNLM top level, with fast micro-models for <year>, <convert> and
<city>; the other classes keep the HNLM's
neural within-class softmax, so both branches of the NSLM are exercised. Scoring uses the
first 20k tokens of valid/test.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from nslm.cli import main
from nslm.evaluation.columns import ColumnSource
from nslm.evaluation.report import EvalOptions, evaluate_run
from nslm.generation.predict import DEFAULT_PROMPT
from nslm.micro.pipeline import fit_micro
from nslm.micro.store import write_micro_json
from nslm.scores.mixture import ensemble_log_probs, tune_lambda
from nslm.scores.passes import Scorer, feature_batches, head_of

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
SLICE = 20_000
MICRO_CLASSES = ["year", "convert", "city"]
pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def run(tiny_nslm_each_top: Path) -> Path:
    """The session's tiny run for each HNLM top level: its own softmax layer, or the NNLM's
    (shared). Shared with other modules: the tests here write only ``tables_test.json``."""
    return tiny_nslm_each_top


@pytest.fixture(scope="module")
def scorer(loaded) -> Scorer:
    return Scorer(loaded.model, loaded.classes, batch_size=8, bptt=20)


@pytest.fixture(scope="module")
def scores(scorer, micro, test_slice):
    return scorer.nslm(test_slice, micro)


def test_micro_json_of_the_run(run: Path) -> None:
    payload = json.loads((run / "micro.json").read_text())
    assert list(payload["classes"]) == MICRO_CLASSES
    year = payload["classes"]["year"]
    assert year["grid"] and all(cell["pdf"] != "mog" for cell in year["grid"])  # --fast
    assert year["selected"]["metric"] in {c["metric"] for c in year["grid"]}
    assert payload["grid"] == "fast" and payload["run"] == str(run)


def test_full_distribution_sums_to_one_and_agrees(
    loaded, scorer, micro, test_slice, scores
) -> None:
    corpus = loaded.corpus
    rng = np.random.default_rng(0)
    cids = test_slice.class_ids
    year, city, other = (corpus.class_id(n) for n in ("year", "city", "other"))
    picks = [np.flatnonzero(cids == c) for c in (0, year, city, other)]
    positions = np.unique(np.concatenate([rng.choice(p, 6, replace=False) for p in picks]))
    positions = positions[positions > 0]
    full = scorer.distribution_at(test_slice, positions, micro, corpus.class_names)
    marginal = full.marginal()
    assert marginal.shape == (len(positions), len(corpus.vocab))
    np.testing.assert_array_less(np.abs(np.exp(marginal).sum(axis=1) - 1.0), 1e-4)
    # The ensemble's full distribution is a distribution too.
    nnlm = loaded.model.heads["nnlm"]
    assert nnlm is not None
    for lam in (0.0, 0.3, 1.0):
        with torch.no_grad():
            h = _features_at(loaded, test_slice, positions)
            nd = nnlm.log_dist(h).double().numpy()
        ens = ensemble_log_probs(nd, marginal, lam)
        np.testing.assert_array_less(np.abs(np.exp(ens).sum(axis=1) - 1.0), 1e-4)
    # The per-position target score is the (class, word) entry of the full distribution.
    targets = test_slice.token_ids[positions].astype(np.int64)
    pair = np.array(
        [_pair(full, i, int(cids[p]), int(targets[i])) for i, p in enumerate(positions)]
    )
    np.testing.assert_allclose(pair, scores.pure[positions], atol=1e-4)
    # The class entries used the micro-model where there is one, the HNLM elsewhere.
    assert full.source[year].startswith(micro["year"].metric.name)
    assert full.source[other] == "neural"
    # And a type's marginal is never below its target pair.
    assert (marginal[np.arange(len(positions)), targets] >= pair - 1e-9).all()


def _pair(full, row: int, cls: int, w: int) -> float:
    if cls == 0:
        return float(full.word[row, w])
    ids, logp = full.within[cls]
    return float(full.tag[row, cls] + logp[row, int(np.searchsorted(ids, w))])


def _features_at(loaded, split, positions: np.ndarray) -> torch.Tensor:
    out = torch.zeros(len(positions), loaded.model.backbone.out_dim)
    for hv, _, _, where in feature_batches(loaded.model, split, batch_size=8, bptt=20):
        hit = np.isin(where, positions)
        if hit.any():
            out[torch.from_numpy(np.searchsorted(positions, where[hit]))] = hv[
                torch.from_numpy(hit)
            ]
    return out


def test_training_validation_scores_the_same(loaded, test_slice, scores) -> None:
    """Validation during training (heads only, no class factor) is the same pass."""
    ref = Scorer(loaded.model, batch_size=8, bptt=20).score(test_slice)
    for part in ("nnlm", "hnlm", "top"):
        np.testing.assert_array_equal(getattr(scores, part), getattr(ref, part))
    # Words are scored by the top level; the NSLM there is the top level's own score.
    words = (test_slice.class_ids == 0) & ~np.isnan(scores.top)
    np.testing.assert_array_equal(scores.pure[words], scores.top[words])


def test_lambda_extremes_and_tuning(loaded, test_slice, scores) -> None:
    assert np.array_equal(scores.ensemble(1.0), scores.nnlm, equal_nan=True)
    assert np.array_equal(scores.ensemble(0.0), scores.pure, equal_nan=True)
    cls = test_slice.class_ids > 0
    lam, ppl = tune_lambda(scores.nnlm, scores.pure, cls)
    assert 0.0 <= lam <= 1.0

    def ppl_at(x: float) -> float:
        v = scores.ensemble(x)[cls]
        return math.exp(-np.nanmean(v))

    assert ppl == pytest.approx(ppl_at(lam))
    assert ppl <= min(ppl_at(0.0), ppl_at(1.0)) + 1e-9


def test_nslm_equals_hnlm_where_no_micro_model(loaded, test_slice, scores) -> None:
    corpus = loaded.corpus
    words = test_slice.class_ids == 0
    neural = np.isin(test_slice.class_ids, [corpus.class_id(n) for n in ("day", "other")])
    scored = ~np.isnan(scores.pure)
    assert np.array_equal(scores.pure[neural & scored], scores.hnlm[neural & scored])
    # word positions: P_top(w) = the HNLM's own word probability (Eq. 3 and 4 agree there)
    np.testing.assert_allclose(scores.pure[words & scored], scores.hnlm[words & scored])
    years = (test_slice.class_ids == corpus.class_id("year")) & scored
    np.testing.assert_allclose(scores.pure[years], scores.top[years] + scores.micro[years])


def test_tables_rows_and_aggregates(loaded, micro) -> None:
    result = evaluate_run(loaded, micro, split="test", options=EvalOptions(max_tokens=SLICE))
    assert set(result["tables"]) == {"numbers", "places"}
    numbers = result["tables"]["numbers"]
    assert list(numbers["classes"]) == [
        "year",
        "day",
        "round",
        "decimal",
        "range",
        "convert",
        "other",
    ]
    assert numbers["classes"]["year"]["metric"] == micro["year"].metric.name
    assert numbers["classes"]["day"]["metric"] == "neural"
    assert numbers["models"] == ["NNLM", "HNLM", "NSLM", "NSLM-pure"]
    for entry in result["tables"].values():
        rows, tokens = entry["rows"], entry["tokens"]
        agg = entry["aggregates"][0]
        members = list(entry["classes"])
        assert sum(tokens[c] for c in members) == tokens[agg]
        for model in entry["models"]:
            # the aggregate is the token-weighted geometric mean of its classes
            logs = sum(tokens[c] * math.log(rows[c][model]) for c in members if tokens[c])
            assert rows[agg][model] == pytest.approx(math.exp(logs / tokens[agg]), rel=1e-9)
            change = entry["change"][agg].get(model)
            if model != "NNLM":
                want = 100 * (rows[agg][model] / rows[agg]["NNLM"] - 1)
                assert change == pytest.approx(want)
        assert tokens["Global"] == SLICE - 1
        assert 0.0 <= entry["lambda"] <= 1.0
    # the OOV count under the table is the test slice's out-of-vocabulary number tokens
    split = head_of(loaded.corpus.test, SLICE)
    num_ids = [loaded.corpus.class_id(c) for c in numbers["classes"]]
    want = int((split.oov_class_mask & np.isin(split.rule_class_ids, num_ids)).sum())
    assert numbers["oov_class_tokens"] == want


class _TrainUnigram(ColumnSource):
    """The docs' example of a user column (docs/nslm.md, Python API)."""

    def __init__(self, corpus) -> None:
        counts = np.bincount(corpus.train.token_ids, minlength=len(corpus.vocab)) + 1.0
        self.log_p = np.log(counts / counts.sum())

    def score(self, name, split, columns, table=""):
        out = self.log_p[split.token_ids].astype(np.float64)
        out[np.isnan(columns["NNLM"])] = np.nan
        return {"unigram": out}


def test_a_user_column_source_joins_the_tables(loaded, micro) -> None:
    source = _TrainUnigram(loaded.corpus)
    result = evaluate_run(
        loaded, micro, split="test", options=EvalOptions(max_tokens=SLICE), extra=[source]
    )
    split = head_of(loaded.corpus.test, SLICE)
    expected = math.exp(-source.log_p[split.token_ids[1:]].mean())  # position 0 is unscored
    for entry in result["tables"].values():
        assert entry["models"][-1] == "unigram"
        assert entry["rows"]["Global"]["unigram"] == pytest.approx(expected, rel=1e-9)


def test_eval_cli_writes_tables(run: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", str(run), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "Table 2" in out and "Table 3" in out and "<year>" in out and "% change" in out
    data = json.loads((run / "tables_test.json").read_text())
    assert data["tables"]["numbers"]["rows"]["Numbers"]["NSLM"] > 0


def test_predict_shows_the_year_breakdown(run: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["predict", str(run), DEFAULT_PROMPT, "--n-best", "5"]) == 0
    out = capsys.readouterr().out
    year_line = next(line for line in out.splitlines() if line.strip().startswith("<year>"))
    assert "prev 1066" in year_line and micro_name(run) in year_line
    assert main(["predict", str(run), DEFAULT_PROMPT, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["tokens"][-5:] == ["1066", ",", "and", "died", "in"]
    assert abs(data["sums"]["nnlm"] - 1) < 1e-4 and abs(data["sums"]["nslm"] - 1) < 1e-4
    year = next(d for d in data["classes"] if d["class"] == "<year>")
    assert year["context"] == "1066" and len(year["top"]) == 3


def micro_name(run: Path) -> str:
    sel = json.loads((run / "micro.json").read_text())["classes"]["year"]["selected"]
    return f"{sel['metric']}+{sel['pdf']['name']}"


def test_micro_json_from_another_vocabulary(run, wt2_numbers, tmp_path, capsys) -> None:
    other = tmp_path / "copy"
    shutil.copytree(run, other)
    _, payload = fit_micro(wt2_numbers, names=["day"], pdfs=["unigram"], eval_splits=())
    write_micro_json(other / "micro.json", payload)
    assert main(["eval", str(other), "--split", "test"]) == 2
    # at most the line saying the NSLM is used, then one error line
    lines = capsys.readouterr().err.strip().splitlines()
    assert [line for line in lines if line.startswith("error:")] == lines[-1:]
    assert "another vocabulary" in lines[-1] and len(lines) <= 2


@pytest.mark.parametrize(
    "body, needle",
    [
        ('classes = "dates"\n', "classes"),
        ('class_rules = ["year=\\\\d+"]\n', "built in"),
        ('class_rules = ["verb"]\n', "NAME=REGEX"),
    ],
)
def test_bad_class_in_config(tmp_path, capsys, monkeypatch, body: str, needle: str) -> None:
    # set: else `nslm train` re-executes the process to set it (under `python -m pytest`, too)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    cfg = tmp_path / "bad.toml"
    cfg.write_text(TINY.read_text() + body)
    assert main(["train", "--config", str(cfg), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
    assert not (tmp_path / "r").exists()


def test_unknown_class_for_fit_micro(run: Path, capsys) -> None:
    assert main(["micro", "fit", str(run), "--only", "yaer", "--out", "/dev/null"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown class <yaer>" in err


def test_user_class_end_to_end(tmp_path, capsys, monkeypatch) -> None:
    """class_rules in the run's config → tagged corpus → HNLM tag → micro grid → tables."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # see test_bad_class_in_config
    months = (
        "(January|February|March|April|May|June|July|August|September|October|November|December)"
    )
    cfg = tmp_path / "user.toml"
    rules = f'class_rules = ["month={months}", "zzz=qqqzzzq"]\n'
    cfg.write_text(TINY.read_text() + 'classes = "numbers"\n' + rules)
    run_dir = tmp_path / "run"
    args = ["--set", "max_steps=10", "--set", "test_tokens=2000", "--run-dir", str(run_dir)]
    assert main(["train", "--config", str(cfg), *args]) == 0
    capsys.readouterr()
    # the empty class is refused by name, in one line
    assert main(["micro", "fit", str(run_dir), "--fast"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "<zzz> has an empty vocabulary" in err
    assert main(["micro", "fit", str(run_dir), "--fast", "--only", "month,year"]) == 0
    payload = json.loads((run_dir / "micro.json").read_text())
    assert set(payload["classes"]) == {"month", "year"}
    assert payload["classes"]["month"]["vc_size"] == 12
    capsys.readouterr()
    assert main(["eval", str(run_dir), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "User classes" in out and "<month>" in out
    tables = json.loads((run_dir / "tables_test.json").read_text())["tables"]
    assert tables["user"]["tokens"]["month"] > 0
