"""Generation from NSLM-open (src/nslm/generation/open_sampling.py) on the tiny run with an
open ``<year>``: the draw is a distribution over the vocabulary and the new members, a drawn
new year becomes the class's context and enters its cache, and the same seed gives the same
text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nslm.generation.open_sampling import OpenGenerated, OpenNslmStepper, generate_open
from nslm.generation.sampling import Sampler, SamplingConfig
from nslm.micro.logspace import logsumexp

PROMPT = "Construction began in 2027 and ended in"


@pytest.fixture(scope="module")
def opened(open_run_dir: Path):
    """The tiny run with an open ``<year>`` (conftest's ``open_run_dir``): the run opened
    with its plain micro-models, and its open ones."""
    from nslm.runs.micro import load_run_micro
    from nslm.runs.open import open_run
    from nslm.runs.open_micro import load_run_open

    got = open_run(open_run_dir, micro="plain", threads=1)
    return got, load_run_open(got.loaded, load_run_micro(got.loaded))


def stepper(opened, prompt: str = PROMPT) -> OpenNslmStepper:
    got, open_models = opened
    return OpenNslmStepper(got.loaded, got.micro, open_models, prompt)


def test_the_vocabulary_and_the_new_members_share_one_distribution(opened) -> None:
    """The stepper takes each class's new-member mass as 1 − Σ known; here every new
    member is scored one by one (micro/open_sums.py), so a wrong normaliser would show."""
    from nslm.micro.open_sums import open_totals

    step = stepper(opened)
    open_models = opened[1]
    names = step.names
    for _ in range(3):
        marginal = step.marginal()
        assert "year" in step._new_mass
        for name, mass in step._new_mass.items():
            om, ctx = open_models[name], step.contexts[name]
            H, cache = step._states(om), step._cache(name)
            known = float(np.exp(logsumexp(om.log_prob_known(ctx, H, cache)[0])))
            enumerated = open_totals(om, ctx, H, cache)[0] - known
            tag = float(step._full.tag[0, names.index(name)])
            assert np.exp(tag) * enumerated == pytest.approx(np.exp(mass), rel=1e-6)
        total = logsumexp(np.concatenate([marginal, list(step._new_mass.values())]))
        assert abs(float(np.exp(total)) - 1.0) < 1e-6
        step.advance(int(np.argmax(marginal)), 0)


@pytest.mark.parametrize("how", ["unk", "escape+unk"])
def test_new_members_may_take_a_share_of_the_unknown_words_mass(opened, how: str) -> None:
    """With ρ_c of P(<unk> | h) to a class's new members (nslm.micro.unk_share), the unknown
    word keeps 1 − Σρ of it, the class's new mass gains ρ_c · P(<unk> | h), and the whole
    is still one; with ``unk`` alone the known members keep the closed P_MM."""
    from nslm.micro.open_sums import open_totals
    from nslm.micro.unk_share import NewMass

    got, open_models = opened
    plain = OpenNslmStepper(got.loaded, got.micro, open_models, PROMPT)
    shared = OpenNslmStepper(
        got.loaded, got.micro, open_models, PROMPT, new_mass=NewMass(how, {"year": 0.2})
    )
    unk = plain.corpus.vocab.unk_id
    before, after = plain.marginal(), shared.marginal()
    log_unk = float(shared._full.marginal()[0, unk])
    assert after[unk] == pytest.approx(np.log(0.8) + log_unk, abs=1e-9)
    om, ctx = open_models["year"], shared.contexts["year"]
    c = shared.names.index("year")
    escape = 0.0
    if how == "escape+unk":
        H, cache = shared._states(om), shared._cache("year")
        known = float(np.exp(logsumexp(om.log_prob_known(ctx, H, cache)[0])))
        escape = np.exp(float(shared._full.tag[0, c])) * (open_totals(om, ctx, H, cache)[0] - known)
        keep = np.arange(len(before)) != unk  # the known members pay the escape as before
        assert np.allclose(after[keep], before[keep], atol=1e-12)
    else:  # the closed micro-model's rows: the years in V_c as the plain NSLM gives them
        from nslm.generation.nslm_sampling import NslmStepper

        closed = NslmStepper(got.loaded, {**got.micro, "year": om.micro}, PROMPT).marginal()
        keep = np.arange(len(closed)) != unk
        assert np.allclose(after[keep], closed[keep], atol=1e-9)
    want = escape + 0.2 * np.exp(log_unk)
    assert np.exp(shared._new_mass["year"]) == pytest.approx(want, rel=1e-6)
    total = logsumexp(np.concatenate([after, list(shared._new_mass.values())]))
    assert abs(float(np.exp(total)) - 1.0) < 1e-6


def test_the_new_years_listed_after_2027_are_near_it(opened) -> None:
    listed = [int(s) for s, _ in stepper(opened).new_members("year")[:5]]
    stoi = opened[0].loaded.corpus.vocab.stoi
    assert listed and not any(str(y) in stoi for y in listed)
    # the year difference's PDF around the prompt's 2027 (cached too): the tiny run's
    # ungated model, so the years before 2027 compete with those after it
    assert all(abs(y - 2027) <= 10 for y in listed) and any(y > 2027 for y in listed)


def test_a_drawn_new_year_is_the_next_years_context_and_in_the_cache(opened) -> None:
    step = stepper(opened)
    names = opened[0].loaded.corpus.class_names
    drawn = OpenGenerated(step.corpus.vocab.unk_id, names.index("year"), "2031")
    step.advance_new(drawn)
    assert step.contexts["year"].prev_value[0] == 2031.0
    assert step.caches["year"]["2031"] == 1
    after = [s for s, _ in step.new_members("year")]
    assert "2031" in after  # the cache lists it again
    top = [int(s) for s in after[:3]]  # the cached years and the diff PDF's around 2031
    assert all(abs(y - 2031) <= 10 for y in top)


def test_the_two_stage_draw_can_name_a_new_member(opened, monkeypatch) -> None:
    step = stepper(opened)
    step.marginal()
    new_outcome = len(step.marginal()) + list(step._new_mass).index("year")
    sampler = Sampler(SamplingConfig(), seed=0)
    monkeypatch.setattr(sampler, "sample", lambda scores, log_space=False: new_outcome)
    drawn = step.draw(sampler)
    assert drawn.new and drawn.string in {s for s, _ in step.new_members("year")}
    assert drawn.token_id == step.corpus.vocab.unk_id  # what the LM reads


def test_a_seed_fixes_the_text_and_filters_act_on_members(opened) -> None:
    def text(config: SamplingConfig, seed: int) -> list[tuple[int, int, str | None]]:
        out = generate_open(stepper(opened), 8, Sampler(config, seed=seed))
        return [(g.token_id, g.cls, g.string) for g in out]

    assert text(SamplingConfig(), 4) == text(SamplingConfig(), 4)
    greedy = text(SamplingConfig(temperature=0), 0)
    assert greedy == text(SamplingConfig(temperature=0), 1)  # no randomness left


def test_generate_draws_from_nslm_open_when_the_run_has_it(open_run_dir: Path, capsys) -> None:
    from nslm.cli import main

    args = ["generate", str(open_run_dir), PROMPT, "--max-tokens", "6", "--seed", "2"]
    assert main([*args, "--show-classes"]) == 0
    opened_text = capsys.readouterr().out
    assert opened_text.startswith("Construction began in 2027 and ended in")
    assert main([*args, "--show-classes", "--closed-vocab"]) == 0
    closed_text = capsys.readouterr().out
    assert "*" not in closed_text  # only NSLM-open marks new members
    assert main([*args, "--open-vocab", "--model", "neural"]) == 2
    assert "needs the NSLM" in capsys.readouterr().err


def test_the_new_members_mass_is_chosen_on_valid_and_kept(open_run_dir: Path, tmp_path) -> None:
    """``nslm micro fit``'s choice (nslm.evaluation.open_report.fit_run_new_mass): ρ from the
    training halves, each estimator scored on valid, the lowest perplexity kept, and
    RUN/open.json gives it back to every path."""
    import shutil

    from nslm.evaluation.open_report import fit_run_new_mass
    from nslm.micro.unk_share import NEW_MASS
    from nslm.runs.load import load_run
    from nslm.runs.micro import load_run_micro
    from nslm.runs.open_micro import load_run_open, run_new_mass, write_run_open

    run = tmp_path / "run"
    shutil.copytree(open_run_dir, run)
    loaded = load_run(run)
    assert run_new_mass(loaded).how == "escape"  # open.json written before the choice
    plain = load_run_micro(loaded)
    models = load_run_open(loaded, plain)
    kept, evidence = fit_run_new_mass(loaded, {"year": plain["year"]}, models)
    figures = evidence["estimators"]
    assert set(figures) == set(NEW_MASS)
    assert kept.how == min(figures, key=lambda h: figures[h]["valid"]["ppl_proper"])
    assert 0 < kept.rho["year"] < 1 and evidence["fitted_on"]["new_tokens"] > 0
    assert evidence["known_shift"] == {"classes": [], "kept": 0.0, "at_grid_edge": False}
    write_run_open(loaded, models, (kept, evidence))
    assert run_new_mass(load_run(run)) == kept
    # a class whose open set is its vocabulary has no new member to take a share
    from nslm.micro.unk_share import fit_unk_shares

    assert models["year"].has_new_members
    names = list(loaded.corpus.class_names)
    shares = fit_unk_shares(loaded.corpus.train, names, ["year"], closed=["year"])
    assert shares["rho"] == {"year": 0.0} and shares["closed"] == ["year"]
