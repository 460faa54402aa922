"""Sampling (temperature, top-k, top-p, seed) and n-gram generation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ngram_corpora import markov_stream
from nslm.errors import NslmError
from nslm.generation.sampling import Sampler, SamplingConfig, filtered_distribution
from nslm.ngram.build import build_model
from nslm.ngram.generation import generate_ngram

PROBS = np.array([0.05, 0.4, 0.1, 0.25, 0.2])

prob_vectors = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30).filter(
    lambda xs: sum(xs) > 1e-3
)


def test_temperature_zero_and_top_k_one_are_greedy() -> None:
    for config in (SamplingConfig(temperature=0), SamplingConfig(top_k=1)):
        out = filtered_distribution(PROBS, config)
        assert out.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_temperature_to_zero_approaches_greedy() -> None:
    mass = [filtered_distribution(PROBS, SamplingConfig(temperature=t))[1] for t in (1, 0.5, 0.1)]
    assert mass[0] == pytest.approx(0.4)
    assert mass[0] < mass[1] < mass[2]
    assert filtered_distribution(PROBS, SamplingConfig(temperature=0.01))[1] > 0.999


def test_temperature_is_a_power_of_the_probabilities() -> None:
    out = filtered_distribution(PROBS, SamplingConfig(temperature=0.5))
    np.testing.assert_allclose(out, PROBS**2 / (PROBS**2).sum())


def test_top_k_and_top_p_keep_the_right_tokens() -> None:
    out = filtered_distribution(PROBS, SamplingConfig(top_k=2))
    np.testing.assert_allclose(out, [0, 0.4 / 0.65, 0, 0.25 / 0.65, 0])
    # 0.4 + 0.25 = 0.65 < 0.7 ≤ 0.85: the nucleus for p = 0.7 is {1, 3, 4}
    out = filtered_distribution(PROBS, SamplingConfig(top_p=0.7))
    np.testing.assert_allclose(out, [0, 0.4 / 0.85, 0, 0.25 / 0.85, 0.2 / 0.85])
    # logits give the same answer as probabilities
    out_log = filtered_distribution(np.log(PROBS), SamplingConfig(top_p=0.7), log_space=True)
    np.testing.assert_allclose(out_log, out)


@settings(max_examples=60, deadline=None)
@given(
    probs=prob_vectors,
    temperature=st.floats(0.05, 3.0),
    top_k=st.integers(0, 10),
    top_p=st.floats(0.05, 1.0),
)
def test_filtered_distribution_is_a_distribution(probs, temperature, top_k, top_p) -> None:
    config = SamplingConfig(temperature=temperature, top_k=top_k or None, top_p=top_p)
    out = filtered_distribution(np.array(probs), config)
    assert abs(out.sum() - 1.0) < 1e-9
    assert (out >= 0).all()
    assert (out[np.array(probs) == 0] == 0).all()  # never a token the model excludes
    if top_k:
        assert np.count_nonzero(out) <= top_k


def test_seeded_sampler_is_reproducible_and_follows_the_distribution() -> None:
    draws = [Sampler(SamplingConfig(), seed=7).sample(PROBS) for _ in range(3)]
    assert len(set(draws)) == 1
    sampler = Sampler(SamplingConfig(), seed=11)
    counts = np.bincount([sampler.sample(PROBS) for _ in range(20_000)], minlength=5)
    # 20,000 draws: the standard error of each frequency is below 0.0035
    np.testing.assert_allclose(counts / counts.sum(), PROBS, atol=0.015)


@pytest.mark.parametrize(
    "kwargs", [{"temperature": -1}, {"top_k": -2}, {"top_p": 0.0}, {"top_p": 1.5}]
)
def test_bad_sampling_settings_are_user_errors(kwargs) -> None:
    with pytest.raises(NslmError):
        SamplingConfig(**kwargs)


MODEL = build_model(markov_stream(20_000, seed=0), 3)


def test_ngram_generation_fixed_seed_gives_same_text() -> None:
    config = SamplingConfig(temperature=0.9, top_k=40, top_p=0.95)
    first = generate_ngram(MODEL, ["w1", "w2"], 40, Sampler(config, seed=3))
    second = generate_ngram(MODEL, ["w1", "w2"], 40, Sampler(config, seed=3))
    other = generate_ngram(MODEL, ["w1", "w2"], 40, Sampler(config, seed=4))
    assert first == second
    assert first != other
    assert len(first) == 40 and "<s>" not in first


def test_ngram_top_k_one_is_greedy() -> None:
    top1 = generate_ngram(MODEL, ["w5"], 25, Sampler(SamplingConfig(top_k=1), seed=1))
    greedy = generate_ngram(MODEL, ["w5"], 25, Sampler(SamplingConfig(temperature=0), seed=2))
    assert top1 == greedy
    # and greedy really is the argmax of the model's distribution at every step
    history = [MODEL.stoi["w5"]]
    for token in greedy:
        assert MODEL.itos[int(np.argmax(MODEL.distribution(history)))] == token
        history.append(MODEL.stoi[token])


def test_low_temperature_generation_approaches_greedy() -> None:
    greedy = generate_ngram(MODEL, ["w5"], 25, Sampler(SamplingConfig(temperature=0), seed=0))
    cold = generate_ngram(MODEL, ["w5"], 25, Sampler(SamplingConfig(temperature=0.02), seed=0))
    assert cold == greedy
