"""``nslm predict``'s pieces: the top-k selection, a batch of prompts (the explorer's) against
each prompt alone, and NSLM-open's list of members outside the vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.cli import main
from nslm.generation.predict import top_indices

OPEN_PROMPT = "Construction began in 2027 and ended in"


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.integers(-5, 5), min_size=1, max_size=60), k=st.integers(1, 70))
def test_top_indices_is_the_stable_sort_prefix(values: list[int], k: int) -> None:
    scores = np.asarray(values, dtype=float)
    want = np.argsort(-scores, kind="stable")[:k]
    np.testing.assert_array_equal(top_indices(scores, k), want)


def test_a_batch_of_prompts_is_each_prompt_alone(tiny_nslm_run) -> None:
    from nslm.generation.predict import predict, predict_many
    from nslm.runs.context_micro import run_micro_models
    from nslm.runs.load import load_run

    loaded = load_run(tiny_nslm_run)
    micro = run_micro_models(loaded)
    # the second prompt has no year: the first one's 1990 must not become its context
    prompts = ["In 1990 , the city of", "The city of", "It was built in 1850 and in", "The"]
    many = predict_many(loaded, micro, prompts, k=5, n_within=4)
    assert [m["prompt"] for m in many] == prompts
    for prompt, got in zip(prompts, many, strict=True):
        want = predict(loaded, micro, prompt, k=5, n_within=4)
        assert [t["token"] for t in got["nslm"]] == [t["token"] for t in want["nslm"]]
        np.testing.assert_allclose(
            [t["p"] for t in got["nslm"]], [t["p"] for t in want["nslm"]], rtol=1e-5
        )
        assert {c["class"]: c["context"] for c in got["classes"]} == {
            c["class"]: c["context"] for c in want["classes"]
        }
        assert got["sums"]["nslm"] == pytest.approx(1.0, abs=1e-4)
    year = {c["class"]: c for c in many[1]["classes"]}.get("<year>")
    assert year is None or year["context"] is None
    assert {c["class"]: c for c in many[2]["classes"]}["<year>"]["context"] == "1850"


def test_last_states_of_a_batch_are_each_history_alone(tiny_nslm_run) -> None:
    from nslm.runs.load import load_run

    scorer = load_run(tiny_nslm_run).scorer()
    histories = [[3, 5, 7, 11], [2], [13, 17, 19, 23, 29, 31, 37]]
    batch = scorer.last_states(histories)
    assert batch.shape[0] == len(histories)
    for row, history in enumerate(histories):
        np.testing.assert_allclose(
            batch[row : row + 1].numpy(), scorer.last_features(history).numpy(), atol=1e-5
        )
    with pytest.raises(ValueError, match="at least one token"):
        scorer.last_states([[1], []])


def predict_json(capsys: pytest.CaptureFixture[str], run: Path, *flags: str) -> dict:
    # the tiny run's P(<year> | h) is small: its new years rank in the seventies and eighties
    assert main(["predict", str(run), OPEN_PROMPT, "--n-best", "100", "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def test_predict_lists_new_years_when_the_run_has_open_micro_models(open_run_dir, capsys) -> None:
    from nslm.runs.load import load_run

    vocab = load_run(open_run_dir).corpus.vocab.stoi
    got = predict_json(capsys, open_run_dir)["open"]  # open.json: NSLM-open by default
    assert "2027" in got["tokens"] and "2027" not in vocab
    # whether a new year reaches the overall list depends on the tiny LM's P(<year> | h);
    # any new member that does is a year outside the vocabulary
    new = [e for e in got["top"] if e["new"]]
    assert all(e["class"] == "year" and e["token"].isdigit() for e in new), new
    assert all(e["token"] not in vocab for e in new)
    assert all(e["token"] in vocab for e in got["top"] if not e["new"])
    probs = [e["p"] for e in got["top"]]
    assert probs == sorted(probs, reverse=True)
    year = got["classes"]["year"]
    assert any(e["new"] for e in year["top"]) and sum(e["p"] for e in year["top"]) <= 1 + 1e-9
    closed = predict_json(capsys, open_run_dir, "--closed-vocab")
    assert "open" not in closed
    # a plain word keeps the closed NSLM's probability: only the open classes change
    words = {
        e["token"]: e["p"]
        for e in closed["nslm"]
        if [part["as"] for part in e["breakdown"]] == ["word"]
    }
    shared = [e for e in got["top"] if e["token"] in words]
    assert shared
    for entry in shared:
        assert entry["p"] == pytest.approx(words[entry["token"]], rel=1e-6)
    assert main(["predict", str(open_run_dir), OPEN_PROMPT, "--n-best", "3"]) == 0
    assert "NSLM-open" in capsys.readouterr().out
    assert main(["predict", str(open_run_dir), OPEN_PROMPT, "--n-best", "3", "--closed-vocab"]) == 0
    assert "NSLM-open" not in capsys.readouterr().out


def test_predict_without_open_json_is_closed_and_open_vocab_names_the_fix(
    tiny_nslm_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "open" not in predict_json(capsys, tiny_nslm_run)
    assert main(["predict", str(tiny_nslm_run), OPEN_PROMPT, "--open-vocab"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "open.json" in err[0] and "nslm micro fit" in err[0], err


def test_a_new_member_adds_its_share_of_the_unknown_words_mass(open_run_dir) -> None:
    """With ρ_year of P_NSLM(<unk> | h) to the new years, each listed new year gains
    ρ · P(<unk>) · P_open(s | year) / P_open(new | year) over the escape's share, and the
    unknown word keeps 1 − ρ of its NSLM mass (at λ = 0)."""
    from nslm.generation.open_predict import open_predict_many
    from nslm.micro.unk_share import NewMass
    from nslm.runs.micro import load_run_micro
    from nslm.runs.open import open_run
    from nslm.runs.open_micro import load_run_open

    got = open_run(open_run_dir, micro="plain", threads=1)
    models = load_run_open(got.loaded, load_run_micro(got.loaded))
    k = 200  # deep enough that <unk> and the new years are listed
    escape = open_predict_many(got.loaded, got.micro, models, [OPEN_PROMPT], k=k)[0]
    both = NewMass("escape+unk", {"year": 0.3})
    shared = open_predict_many(got.loaded, got.micro, models, [OPEN_PROMPT], k=k, new_mass=both)[0]
    before = {e["token"]: e["p"] for e in escape["top"]}
    after = {e["token"]: e["p"] for e in shared["top"]}
    assert after["<unk>"] == pytest.approx(0.7 * before["<unk>"], rel=1e-9)
    year = {e["token"]: e["p"] for e in escape["classes"]["year"]["top"] if e["new"]}
    listed = [t for t in year if t in after and t in before]
    assert listed
    # the gain is ρ · P(<unk>) · P_open(s) / P_open(new), and Σ listed new ≤ P_open(new) ≤ 1
    for token in listed:
        gain = after[token] - before[token]
        assert gain >= 0.3 * before["<unk>"] * year[token] - 1e-12
        assert gain <= 0.3 * before["<unk>"] * year[token] / sum(year.values()) + 1e-12
