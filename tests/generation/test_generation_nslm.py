"""NSLM generation on a tiny real run: Eq. 4 step by step, micro contexts that follow the text.

The run is the session's tiny run (conftest.py, shared with test_nslm.py): ``configs/tiny.toml``
(a WikiText-2 slice, a 1×32 LSTM, 40 steps), with fast micro-models fitted on the real training
split; the tests here use those of <year> and <city> (the <year> model is a diff metric on real
year pairs), and the other classes keep the HNLM's softmax.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nslm.cli import main
from nslm.data.text import to_plain
from nslm.data.vocab import EOS
from nslm.generation.nslm_sampling import (
    MicroContexts,
    NslmStepper,
    choose_reading,
    generate_nslm,
)
from nslm.generation.predict import predict
from nslm.generation.prompts import prompt_split
from nslm.generation.sampling import Sampler, SamplingConfig, filtered_distribution
from nslm.micro.classdata import builtin_class
from nslm.micro.model import MicroModel
from nslm.runs.micro import load_run_micro

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "configs" / "tiny.toml"
PROMPT = "The band released its first album in 1990 and in"
MICRO_CLASSES = ("year", "city")
pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def run(tiny_nslm_run: Path) -> Path:
    """The session's tiny run, read only (test_cli_errors works on a copy)."""
    return tiny_nslm_run


@pytest.fixture(scope="module")
def micro(loaded):
    """The run's micro-models of <year> and <city> (the run has <convert>'s too)."""
    return {name: model for name, model in load_run_micro(loaded).items() if name in MICRO_CLASSES}


def _id(loaded, token: str) -> int:
    return loaded.corpus.vocab.stoi[token]


def _year_values(micro) -> np.ndarray:
    return micro["year"].cls.candidates.values


def test_step_distribution_is_the_predict_marginal(loaded, micro) -> None:
    stepper = NslmStepper(loaded, micro, PROMPT)
    marginal = stepper.marginal()
    assert marginal.shape == (len(loaded.corpus.vocab),)
    assert abs(np.exp(marginal).sum() - 1.0) < 1e-6
    np.testing.assert_array_equal(marginal, stepper.distribution().marginal()[0])
    # nslm predict (λ = 0: pure Eq. 4) prepares the same prompt on its own
    ref = predict(loaded, micro, PROMPT, k=50, lam=0.0)
    ids = [_id(loaded, d["token"]) for d in ref["nslm"]]
    np.testing.assert_allclose(
        np.exp(marginal[ids]), [d["p"] for d in ref["nslm"]], rtol=1e-9, atol=1e-12
    )
    assert ids[0] == int(np.argmax(marginal))


def test_advancing_equals_preparing_the_longer_history(loaded, micro) -> None:
    """Carried state + incremental contexts = the whole longer prompt prepared at once."""
    short = "The band released its first album in"
    longer = short + " 1990 , toured Paris , and in"
    stepper = NslmStepper(loaded, micro, short)
    whole = NslmStepper(loaded, micro, longer)
    n = len(stepper.prompt_tokens)
    assert whole.prompt_tokens[:n] == stepper.prompt_tokens
    names = loaded.corpus.class_names
    split, _ = prompt_split(loaded, longer)
    for i in range(n, len(whole.prompt_tokens)):
        stepper.advance(int(split.token_ids[i]), int(split.rule_class_ids[i]))
    assert names[split.rule_class_ids[n]] == "year"
    for name in micro:
        a, b = stepper.contexts[name], whole.contexts[name]
        np.testing.assert_array_equal(a.prev_value, b.prev_value)
        np.testing.assert_array_equal(a.prev_coords, b.prev_coords)
    np.testing.assert_allclose(np.exp(stepper.marginal()), np.exp(whole.marginal()), atol=1e-6)


def test_after_a_year_the_next_year_is_near_it(loaded, micro) -> None:
    year = loaded.corpus.class_id("year")
    assert micro["year"].metric.name == "diff"
    stepper = NslmStepper(loaded, micro, PROMPT)
    assert stepper.contexts["year"].prev_value[0] == 1990
    _, within = stepper.distribution().within[year]
    best = _year_values(micro)[int(np.argmax(within[0]))]
    assert abs(best - 1990) <= 3
    # a generated year moves the context: the next <year> is scored relative to it
    stepper.advance(_id(loaded, "1850"), year)
    assert stepper.contexts["year"].prev_value[0] == 1850
    assert stepper.contexts["year"].prev_ids[0] == _id(loaded, "1850")
    _, within = stepper.distribution().within[year]
    assert abs(_year_values(micro)[int(np.argmax(within[0]))] - 1850) <= 3
    # a word, or a class that is not the year's context, leaves it alone
    stepper.advance(_id(loaded, "and"), 0)
    stepper.advance(_id(loaded, "Paris"), loaded.corpus.class_id("city"))
    assert stepper.contexts["year"].prev_value[0] == 1850
    assert np.isfinite(stepper.contexts["city"].prev_coords).all()


def test_generated_year_updates_the_context(loaded, micro) -> None:
    """Force the draw of a <year>: whatever year Y is drawn, the next context is Y."""
    year = loaded.corpus.class_id("year")
    stepper = NslmStepper(loaded, micro, PROMPT)
    ids, _ = stepper.distribution().within[year]
    rng = np.random.default_rng(0)
    for token in rng.choice(ids, 5, replace=False).tolist():
        stepper.advance(token, year)
        assert stepper.contexts["year"].prev_value[0] == float(loaded.corpus.vocab.itos[token])


def test_family_context_and_new_article(loaded) -> None:
    corpus = loaded.corpus
    family = MicroModel(builtin_class(corpus, "year"), "diff", "gaussian", context="family")
    contexts = MicroContexts({"year": family}, corpus.vocab.unk_id)
    assert not np.isfinite(contexts["year"].prev_value).any()
    # a <day> is in the numbers family: it becomes the family-mode context of <year>
    contexts.observe(7, _id(loaded, "12"), corpus.class_id("day"), 12.0, np.full(2, np.nan))
    assert contexts["year"].prev_value[0] == 12.0 and contexts["year"].prev_index[0] == 7
    contexts.observe(8, _id(loaded, "12"), 0, 12.0, np.full(2, np.nan))  # read as a word
    assert contexts["year"].prev_index[0] == 7
    contexts.clear()
    assert contexts["year"].prev_index[0] == -1


def test_a_generated_article_heading_clears_the_contexts(loaded, micro) -> None:
    stepper = NslmStepper(loaded, micro, PROMPT)
    for token in (EOS, "=", "="):  # "= =" opens a section: same article
        stepper.advance(_id(loaded, token), 0)
    assert stepper.contexts["year"].prev_value[0] == 1990
    for token in (EOS, "=", "The"):  # "= The …": a new article
        stepper.advance(_id(loaded, token), 0)
    assert np.isnan(stepper.contexts["year"].prev_value[0])


def test_fixed_seed_gives_the_same_text(loaded, micro) -> None:
    config = SamplingConfig(temperature=1.2, top_p=0.95)
    runs = [generate_nslm(loaded, micro, PROMPT, 25, Sampler(config, seed=s)) for s in (4, 4, 5)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_top_k_one_is_the_argmax_of_the_marginal(loaded, micro) -> None:
    out = generate_nslm(loaded, micro, PROMPT, 15, Sampler(SamplingConfig(top_k=1)))
    check = NslmStepper(loaded, micro, PROMPT)
    for g in out:
        assert g.token_id == int(np.argmax(check.marginal()))
        classes, logp = check.readings(g.token_id)
        assert g.cls == classes[int(np.argmax(logp))]
        check.advance(g.token_id, g.cls)
    zero = generate_nslm(loaded, micro, PROMPT, 15, Sampler(SamplingConfig(temperature=0)))
    assert zero == out


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    temperature=st.floats(0.3, 2.0),
    top_k=st.sampled_from([None, 5, 50]),
    top_p=st.floats(0.5, 1.0),
    seed=st.integers(0, 2**16),
)
def test_every_draw_is_allowed_by_the_filtered_marginal(
    loaded, micro, temperature: float, top_k: int | None, top_p: float, seed: int
) -> None:
    config = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    out = generate_nslm(loaded, micro, PROMPT, 6, Sampler(config, seed=seed))
    check = NslmStepper(loaded, micro, PROMPT)
    for g in out:
        allowed = filtered_distribution(check.marginal(), config, log_space=True)
        assert allowed[g.token_id] > 0
        classes, logp = check.readings(g.token_id)
        assert g.cls in classes and np.isfinite(logp[classes.index(g.cls)])
        check.advance(g.token_id, g.cls)


def test_reading_follows_the_posterior(loaded, micro) -> None:
    """A type with two readings is read as each in proportion to P(c, w | h)."""
    stepper = NslmStepper(loaded, micro, PROMPT)
    years = stepper.distribution().within[loaded.corpus.class_id("year")][0]
    both = [int(w) for w in years if len(stepper.readings(int(w))[0]) > 1]
    assert both, "some year-shaped type should also have another reading"
    w = both[0]
    classes, logp = stepper.readings(w)
    post = np.exp(logp - np.logaddexp.reduce(logp))
    sampler = Sampler(SamplingConfig(), seed=0)
    draws = [choose_reading(stepper, w, sampler) for _ in range(4000)]
    freq = np.array([draws.count(c) for c in classes]) / len(draws)
    np.testing.assert_allclose(freq, post, atol=0.03)
    greedy = Sampler(SamplingConfig(top_k=1))
    for w in both:
        classes, logp = stepper.readings(w)
        assert choose_reading(stepper, w, greedy) == classes[int(np.argmax(logp))]


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_generates_through_the_nslm_by_default(run: Path, capsys) -> None:
    args = ["generate", str(run), PROMPT, "--max-tokens", "30", "--seed", "2"]
    first = _cli(capsys, *args, "--show-classes")
    assert first[0] == 0, first[2]
    # the same text (stderr differs: auto says why it chose the NSLM, --model nslm was asked)
    assert first[:2] == _cli(capsys, *args, "--model", "nslm", "--show-classes")[:2]
    assert "using the NSLM" in first[2]
    tokens = _cli(capsys, *args, "--output-format", "tokenized")
    # the prompt as given, then the first generated token (an <eos> is a line break)
    assert tokens[1].startswith(PROMPT) and tokens[1][len(PROMPT)] in " \n"
    # --show-classes only tags the class tokens: stripping the tags gives the tokens
    stripped = " ".join(t.split("/<")[0] for t in first[1].split(" "))
    assert stripped == tokens[1]
    # by default the same words as plain text, joined by the run's detokenizer
    plain = _cli(capsys, *args)
    words = [w for line in tokens[1].splitlines() for w in (*line.split(), "<eos>")][:-1]
    assert plain[1] == to_plain(words, "wikitext") + "\n"
    greedy = _cli(
        capsys,
        "generate",
        str(run),
        PROMPT,
        "--top-k",
        "1",
        "--max-tokens",
        "5",
        "--head",
        "nnlm",
    )
    assert greedy[0] == 0 and greedy[1].startswith(PROMPT)


def test_cli_errors(run: Path, tmp_path: Path, capsys) -> None:
    bare = tmp_path / "bare"
    shutil.copytree(run, bare, ignore=shutil.ignore_patterns("micro.json"))
    for args, needle in [
        (["generate", str(bare), "a", "--model", "nslm"], "micro fit"),
        (["generate", str(run), "a", "--head", "nslm"], "--model nslm"),
        (["generate", str(bare), "a", "--show-classes"], "--show-classes"),
        (["generate", str(run), "--head", "nnlm", "--show-classes"], "--show-classes"),
    ]:
        code, out, err = _cli(capsys, *args)
        assert code == 2 and not out
        assert len(err.strip().splitlines()) == 1 and needle in err
    # without micro.json a run keeps generating with its first head
    code, out, _ = _cli(capsys, "generate", str(bare), "a", "--max-tokens", "3")
    assert code == 0 and out.startswith("a")


@pytest.fixture(scope="module")
def convert_model(loaded) -> MicroModel:
    return MicroModel(builtin_class(loaded.corpus, "convert"), "convert", "binary").fit(
        loaded.corpus.train
    )


def test_predict_gives_convert_the_quantity_before_the_parenthesis(loaded, convert_model) -> None:
    """``… 5 miles (`` → ``<convert>`` reads 5 mi in the units training converts miles to
    (km first), so 8 is among its top tokens; without a quantity it is the class unigram."""
    micro = {"convert": convert_model}
    got = predict(loaded, micro, "The trail is 5 miles (", k=5)
    entry = next(d for d in got["classes"] if d["class"] == "<convert>")
    assert entry["context"] == "5 mi"
    assert "8" in [t["token"] for t in entry["top"]]
    plain = predict(loaded, micro, "The trail is very long (", k=5)
    entry = next(d for d in plain["classes"] if d["class"] == "<convert>")
    assert entry["context"] is None
    assert "8" not in [t["token"] for t in entry["top"]]


def test_generation_tracks_a_pending_conversion(loaded, convert_model) -> None:
    stepper = NslmStepper(loaded, {"convert": convert_model}, "The trail is")
    assert not np.isfinite(stepper.contexts["convert"].convert_target).any()
    for token in ("5", "miles", "("):
        stepper.advance(_id(loaded, token), 0)
    target = stepper.contexts["convert"].convert_target[0]
    assert target[0] == pytest.approx(5 * 1.609344)  # km: what training converts miles to most
    stepper.advance(_id(loaded, "8"), loaded.corpus.class_id("convert"))
    stepper.advance(_id(loaded, "km"), 0)
    stepper.advance(_id(loaded, ")"), 0)
    assert not np.isfinite(stepper.contexts["convert"].convert_target).any()
