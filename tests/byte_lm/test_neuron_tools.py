"""Interventions in a running byte LM (ablation, clamping, steering) and the probes' controls
(Hewitt & Liang's control task, random-unit baselines): nslm.byte_lm.intervention,
nslm.byte_lm.steering, nslm.byte_lm.probes.controls and the options of probe, eval, generate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import assert_one_line_error, run_cli
from nslm.byte_lm.generation import generate_bytes
from nslm.byte_lm.intervention import Intervention, intervening
from nslm.byte_lm.labelled import TaggedSentence, Token, byte_tags
from nslm.byte_lm.probes.controls import ControlTask, byte_types, random_baseline, shuffled_labels
from nslm.byte_lm.probes.states import byte_cell_states, final_states
from nslm.byte_lm.steering import build_intervention, direction, sample_bytes, unit_means
from nslm.generation.sampling import Sampler, SamplingConfig
from nslm.perplexity import bits_per_token
from nslm.runs.load import load_run
from nslm.scores.passes import head_of

TEXTS = ["\nthe movie was great ", "\nawful, just awful. ", "\n" + "a long review " * 6]


@pytest.fixture(scope="module")
def loaded(tiny_byte_run: Path):
    return load_run(tiny_byte_run)


def bpb(loaded) -> float:
    scores = loaded.scorer().score(head_of(loaded.corpus.splits["valid"], 2000))
    return float(bits_per_token(scores.nnlm))


def sampler(seed: int = 3) -> Sampler:
    return Sampler(SamplingConfig(temperature=1.0), seed=seed)


def test_ablating_no_unit_leaves_every_output_bit_identical(loaded) -> None:
    plain_cells = byte_cell_states(loaded, TEXTS)
    plain_final = final_states(loaded, TEXTS)["mean_cell_hidden"]
    plain_bpb, plain_text = bpb(loaded), generate_bytes(loaded, b"the ", 40, sampler())
    for mode in ("zero", "mean"):
        iv = build_intervention(loaded, ablate=(), ablate_mode=mode)
        with intervening(loaded.model, iv or Intervention(ablate=())):
            for got, want in zip(byte_cell_states(loaded, TEXTS), plain_cells, strict=True):
                assert np.array_equal(got, want)
            assert np.array_equal(final_states(loaded, TEXTS)["mean_cell_hidden"], plain_final)
            assert bpb(loaded) == plain_bpb
            assert generate_bytes(loaded, b"the ", 40, sampler()) == plain_text


def test_the_written_out_cell_is_the_lstm(loaded) -> None:
    """A steer by a zero direction runs the written-out cell and changes nothing: it agrees
    with the fused nn.LSTM up to float rounding."""
    hidden = loaded.model.backbone.out_dim
    iv = Intervention(steer={"cell": torch.zeros(hidden)}, alpha=1.0)
    assert not iv.empty
    plain, plain_bpb = byte_cell_states(loaded, TEXTS), bpb(loaded)
    with intervening(loaded.model, iv):
        for got, want in zip(byte_cell_states(loaded, TEXTS), plain, strict=True):
            np.testing.assert_allclose(got, want, atol=1e-5)
        assert abs(bpb(loaded) - plain_bpb) < 1e-4


def test_ablation_zeroes_the_units_and_changes_the_model(loaded) -> None:
    units = (1, 5)
    plain = byte_cell_states(loaded, TEXTS)
    with intervening(loaded.model, build_intervention(loaded, ablate=units)):
        cells = byte_cell_states(loaded, TEXTS)
        ablated_bpb = bpb(loaded)
    for got, want in zip(cells, plain, strict=True):
        assert not got[:, list(units)].any()
        assert not np.allclose(np.delete(got, units, 1), np.delete(want, units, 1), atol=1e-6)
    assert ablated_bpb != bpb(loaded)
    cell_means, _ = unit_means(loaded)
    with intervening(loaded.model, build_intervention(loaded, ablate=units, ablate_mode="mean")):
        cells = byte_cell_states(loaded, TEXTS)
    for got in cells:  # every step holds the unit's mean over the valid text
        np.testing.assert_allclose(
            got[:, list(units)], np.tile(cell_means[list(units)], (len(got), 1)), rtol=1e-6
        )


def test_clamping_a_unit_makes_its_cell_value_the_clamped_value_at_every_step(loaded) -> None:
    with intervening(loaded.model, build_intervention(loaded, clamp={3: 0.75, 7: -2.0})):
        cells = byte_cell_states(loaded, TEXTS)
        text = generate_bytes(loaded, b"it ", 30, sampler())
    for got in cells:
        assert (got[:, 3] == np.float32(0.75)).all() and (got[:, 7] == np.float32(-2.0)).all()
    assert len(text) == 30


def test_steering_with_alpha_zero_is_plain_generation(loaded, tiny_byte_run: Path) -> None:
    plain = generate_bytes(loaded, b"the ", 60, sampler(5))
    for place in ("cell", "hidden", "candidate"):
        iv = build_intervention(loaded, steer="random:1", steer_at=(place,), steer_scale=0.0)
        assert sample_bytes(loaded, b"the ", 1, 60, sampler(5), iv) == [plain]
    # and a real steer moves it
    iv = build_intervention(loaded, steer="random:1", steer_at=("hidden",), steer_scale=50.0)
    assert sample_bytes(loaded, b"the ", 1, 60, sampler(5), iv) != [plain]
    # (coloured by a neuron: the raw bytes need not be UTF-8, the coloured text is)
    args = [
        "generate",
        str(tiny_byte_run),
        "the ",
        "--max-tokens",
        "40",
        "--seed",
        "2",
        "--neuron",
        "0",
    ]
    plain_cli = run_cli(*args)
    steered_cli = run_cli(*args, "--steer", "random:1", "--steer-scale", "0", "--steer-at", "cell")
    assert plain_cli.returncode == 0 and steered_cli.stdout == plain_cli.stdout


def test_a_batch_of_samples_is_each_sample_drawn_alone_in_turn(loaded) -> None:
    one = sample_bytes(loaded, b"a ", 1, 25, sampler(9))
    many = sample_bytes(loaded, b"a ", 4, 25, sampler(9))
    assert len(many) == 4 and all(len(s) == 25 for s in many)
    assert one[0] == generate_bytes(loaded, b"a ", 25, sampler(9))


def test_directions(loaded, tmp_path: Path) -> None:
    hidden = loaded.model.backbone.out_dim
    digits = direction(loaded, "output:0123456789")
    weight = loaded.model.heads["nnlm"].softmax.linear.weight.detach().numpy()
    np.testing.assert_allclose(digits, weight[48:58].mean(0) - weight.mean(0), atol=1e-6)
    r = direction(loaded, "random:4")
    assert r.shape == (hidden,) and abs(np.linalg.norm(r) - 1) < 1e-5
    (tmp_path / "d.json").write_text(json.dumps(list(map(float, r))))
    np.testing.assert_allclose(direction(loaded, str(tmp_path / "d.json")), r, atol=1e-6)


def sentence(*words: tuple[str, str], space: bool = True) -> TaggedSentence:
    return TaggedSentence([Token(w, [(w, t)], space) for w, t in words])


def test_the_control_task_is_a_function_of_the_word_type() -> None:
    train = [
        sentence(("the", "DT"), ("dog", "NN"), ("runs", "VBZ")),
        sentence(("the", "DT"), ("cat", "NN"), ("sleeps", "VBZ"), ("dog", "NN")),
    ]
    control = ControlTask(seed=0).fit(train, grouped=True)
    assert set(control.tags_) == {"DT", "NN", "VB", "SPACE"}
    assert abs(control.p_.sum() - 1) < 1e-12
    tags = control.byte_tags(train)
    types = [t for s in train for t in byte_types(s)]
    assert len(tags) == len(types) == sum(len(byte_tags(s)[0]) for s in train)
    by_type: dict[str, set[str]] = {}
    for word_type, tag in zip(types, tags, strict=True):
        by_type.setdefault(word_type, set()).add(str(tag))
    assert all(len(v) == 1 for v in by_type.values())  # same type, same tag
    assert {next(iter(v)) for v in by_type.values()} <= set(control.tags_)
    again = ControlTask(seed=0).fit(train, grouped=True)
    assert [again.tag(t) for t in ("dog", "zebra")] == [control.tag(t) for t in ("dog", "zebra")]
    many = [f"w{i}" for i in range(400)]  # draws follow the distribution, not one tag
    assert len({control.tag(w) for w in many}) == 4


def test_shuffled_labels_and_random_baseline() -> None:
    y = np.array([0, 1] * 50)
    s = shuffled_labels(y)
    assert sorted(s) == sorted(y) and not np.array_equal(s, y)
    seen = []
    result = random_baseline(lambda units: seen.append(units) or float(len(units[0])), 30, 3, 2)
    assert result["draws"] == 20 and result["mean"] == 3.0 and result["sd"] == 0.0
    assert all(len(u) == 2 and all(len(set(row)) == 3 for row in u) for u in seen)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--clamp", "3"], "UNIT=VALUE"),
        (["--ablate", "x"], "integers"),
        (["--ablate", "999"], "unit 999 is out of range"),
        (["--steer", "nowhere.npy"], "no file"),
        (["--steer", "random:1", "--steer-at", "gates"], "gates"),
        (["--steer-scale", "2"], "go with --steer"),
    ],
)
def test_bad_intervention_options_are_one_line(tiny_byte_run: Path, args, message) -> None:
    result = run_cli("generate", str(tiny_byte_run), "--max-tokens", "5", *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_options_on_probe_and_eval(tiny_byte_run: Path, tiny_nslm_run: Path, tmp_path) -> None:
    result = run_cli(
        "eval",
        str(tiny_byte_run),
        "--split",
        "valid",
        "--ablate",
        "1,2",
        "-o",
        str(tmp_path / "e.json"),
    )
    assert result.returncode == 0, result.stderr
    ablated = json.loads((tmp_path / "e.json").read_text())["valid"]["bits_per_byte"]
    result = run_cli("eval", str(tiny_byte_run), "--split", "valid", "-o", str(tmp_path / "p.json"))
    assert ablated != json.loads((tmp_path / "p.json").read_text())["valid"]["bits_per_byte"]
    result = run_cli("generate", str(tiny_nslm_run), "--clamp", "1=1")
    assert_one_line_error(result, "byte-LM run")
    args = [
        "probe",
        "pos",
        str(tiny_byte_run),
        "--train-bytes",
        "2000",
        "--test-texts",
        "20",
        "--tags",
        "grouped",
        "--no-figures",
        "--json",
        "--out-dir",
    ]
    plain = run_cli(*args, str(tmp_path / "plain"))
    ablated = run_cli(*args, str(tmp_path / "ablated"), "--ablate", "0,1,2,3")
    assert plain.returncode == 0 and ablated.returncode == 0, ablated.stderr
    rows = [json.loads(r.stdout)["grouped"]["rows"]["all"] for r in (plain, ablated)]
    assert rows[0] != rows[1]  # the probe read the ablated model's states


def test_the_explorer_clamps_and_steers(tiny_byte_run: Path) -> None:
    from fastapi.testclient import TestClient

    from nslm.pages.server import create_app

    client = TestClient(create_app({"bytes": tiny_byte_run}), raise_server_exceptions=False)
    body = {"prime": "the movie", "max_bytes": 20, "neuron": 3, "seed": 1}
    plain = client.post("/api/runs/bytes/bytes", json=body).json()
    clamped = client.post("/api/runs/bytes/bytes", json={**body, "clamp": "3=0.5"}).json()
    assert all(c["value"] == pytest.approx(np.tanh(0.5), abs=1e-6) for c in clamped["chars"])
    zero = {**body, "steer": "random:2", "steer_scale": 0}
    unsteered = client.post("/api/runs/bytes/bytes", json=zero).json()
    assert unsteered == plain
    for bad, message in (
        ({"steer": "/etc/passwd"}, "steer is"),
        ({"ablate": "1,x"}, "integers"),
        ({"ablate_mode": "half", "ablate": "1"}, "zero or mean"),
    ):
        got = client.post("/api/runs/bytes/bytes", json={**body, **bad})
        assert got.status_code == 400 and message in got.json()["detail"]


def test_the_report_shows_the_intervention_figures(tiny_byte_run: Path, tmp_path: Path) -> None:
    import shutil

    from nslm.byte_lm.probes.control_plots import selectivity_plot
    from nslm.pages.report import write_report

    run = tmp_path / "run"
    shutil.copytree(tiny_byte_run, run)
    row = {"acc": 0.7, "control_acc": 0.6, "selectivity": 0.1}
    selectivity_plot(
        {"sst2": row}, tmp_path / "s.png", run / "probes/interventions/selectivity.png"
    )
    page = write_report(run, tmp_path / "report.html").read_text()
    assert "probe-interventions" in page and "data:image/png" in page
