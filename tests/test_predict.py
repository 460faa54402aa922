"""``nslm predict``'s pieces: the top-k selection, and a batch of prompts (the explorer's) against
each prompt alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.generation.predict import top_indices


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
