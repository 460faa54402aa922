"""The probe estimators: a planted neuron is found, JSON round-trips, thresholds see train only."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.byte_lm.labelled import LabelledTexts, TaggedSentence
from nslm.byte_lm.probes.estimators import (
    L1Probe,
    NeuronThreshold,
    fit_on_dev,
    load_probe,
    save_probe,
)
from nslm.byte_lm.probes.sentiment import probe_sentiment
from nslm.errors import NslmError


def planted(n: int, h: int = 64, neuron: int = 17, seed: int = 0):
    """Noise features where only ``neuron`` carries the label (shifted by ±1.5)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, h)).astype(np.float32) * rng.uniform(0.2, 3.0, h).astype(np.float32)
    X[:, neuron] = rng.normal(size=n) + np.where(y == 1, 1.5, -1.5)
    return X, y


def test_a_probe_finds_the_planted_neuron() -> None:
    X, y = planted(2000)
    Xd, yd = planted(500, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no deprecation (penalty=) or other warning
        probe, scores = fit_on_dev(X, y, Xd, yd)
    assert probe.top_neurons(1)[0] == 17
    assert probe.score(Xd, yd) > 0.9
    assert set(scores) == {0.01, 0.03, 0.1, 0.3, 1.0}
    assert probe.n_nonzero() < 64  # L1: most noise weights are exactly zero
    single = NeuronThreshold(17).fit(X, y)
    assert single.score(Xd, yd) > 0.9 and single.sign_ == 1


def test_one_vs_rest_finds_one_neuron_per_class_and_top_k_uses_it() -> None:
    rng = np.random.default_rng(0)
    tags = np.array(["A", "B", "C"])[rng.integers(0, 3, 3000)]
    X = rng.normal(size=(3000, 32))
    for col, tag in [(3, "A"), (9, "B"), (20, "C")]:
        X[:, col] += 3.0 * (tags == tag)
    probe = L1Probe(C=0.1).fit(X, tags)
    assert [probe.top_neurons(1, t)[0] for t in "ABC"] == [3, 9, 20]
    one = probe.restricted(1).fit(X, tags)
    assert [np.flatnonzero(w).tolist() for w in one.coef_] == [[3], [9], [20]]
    assert one.score(X, tags) > 0.85


@pytest.mark.parametrize("multi", [False, True])
def test_probe_json_round_trips(tmp_path: Path, multi: bool) -> None:
    X, y = planted(600)
    labels = np.where(X[:, 0] > 0.5, "x", y.astype(str)) if multi else y
    probe = L1Probe(C=0.3).fit(X, labels)
    save_probe(tmp_path / "probe.json", probe, features="synthetic")
    again = load_probe(tmp_path / "probe.json")
    assert (again.predict(X) == probe.predict(X)).all()
    np.testing.assert_array_equal(again.decision_function(X), probe.decision_function(X))
    single = NeuronThreshold(17).fit(X, y)
    save_probe(tmp_path / "neuron.json", single)
    assert (load_probe(tmp_path / "neuron.json").predict(X) == single.predict(X)).all()
    assert "pickle" not in (tmp_path / "probe.json").read_text(encoding="utf-8")


def test_not_a_probe_file(tmp_path: Path) -> None:
    with pytest.raises(NslmError, match="no probe file"):
        load_probe(tmp_path / "none.json")
    (tmp_path / "x.json").write_text('{"kind": "pickle"}', encoding="utf-8")
    with pytest.raises(NslmError, match="not a probe"):
        load_probe(tmp_path / "x.json")


@pytest.mark.parametrize("y", [[1, 1, 0, 0], [0, 0, 1, 1]])
def test_a_cut_between_neighbouring_floats_separates_them(y) -> None:
    """0 and 5e-324 have no float between them: the cut is one of them, on the right side."""
    x = np.array([0.0, 0.0, 5e-324, 1.0])[:, None]
    fitted = NeuronThreshold(0).fit(x, np.array(y))
    assert fitted.train_accuracy_ == 1.0
    assert fitted.predict(x).tolist() == y


@given(st.lists(st.floats(-5, 5), min_size=2, max_size=40), st.data())
@settings(max_examples=80, deadline=None)
def test_threshold_is_the_best_cut_on_train(values, data) -> None:
    x = np.asarray(values)[:, None]
    y = np.asarray(data.draw(st.lists(st.integers(0, 1), min_size=len(x), max_size=len(x))))
    fitted = NeuronThreshold(0).fit(x, y)
    assert fitted.score(x, y) == pytest.approx(fitted.train_accuracy_)
    # no threshold in either direction does better on train
    for cut in np.concatenate([x[:, 0] - 1e-9, x[:, 0] + 1e-9]):
        for sign in (1, -1):
            assert np.mean((sign * (x[:, 0] - cut) > 0) == y) <= fitted.train_accuracy_ + 1e-12


def test_threshold_is_fitted_on_train_only() -> None:
    X, y = planted(400)
    fitted = NeuronThreshold(17).fit(X, y)
    # the test set's labels are flipped: a threshold that peeked would flip its sign
    Xt, yt = planted(400, seed=2)
    before = (fitted.threshold_, fitted.sign_)
    fitted.score(Xt, 1 - yt)
    assert (fitted.threshold_, fitted.sign_) == before


def test_sentiment_probe_on_planted_features_and_text() -> None:
    splits, features = {}, {}
    words = np.array(["good", "bad"])
    for i, (name, n) in enumerate([("train", 800), ("dev", 200), ("test", 300)]):
        X, y = planted(n, seed=i)
        rng = np.random.default_rng(i)
        # the text says the label only one time in three: BoW is weaker than the neuron
        texts = [
            f"{words[1 - t] if rng.random() < 0.33 else 'meh'} film {j}" for j, t in enumerate(y)
        ]
        splits[name] = LabelledTexts(texts, y)
        features[name] = {
            "final_cell": X,
            "mean_cell": X[:, ::-1].copy(),
            "mean_hidden": X * 2,
            "mean_cell_hidden": np.concatenate([X[:, ::-1], X * 2], axis=1),
        }
    result = probe_sentiment(features, splits)
    s = result.summary
    assert s["poolings"]["final_cell"]["neuron"] == 17
    assert s["poolings"]["mean_cell"]["neuron"] == 64 - 1 - 17
    assert s["poolings"]["mean_cell_hidden"]["neuron"] in (64 - 1 - 17, 64 + 17)
    assert s["all_acc"] > 0.9 and s["one_neuron_acc"] > 0.9
    assert 0.4 < s["majority"]["test_acc"] < 0.6
    assert s["bow"]["test_acc"] < s["all_acc"]
    with pytest.raises(NslmError, match="empty split"):
        probe_sentiment(features, {**splits, "dev": LabelledTexts([], np.zeros(0, int))})
    # the neuron's threshold sees train only: flipping the test labels flips its accuracy
    flipped = {**splits, "test": LabelledTexts(splits["test"].texts, 1 - splits["test"].labels)}
    again = probe_sentiment(features, flipped, bow=False)
    assert (again.neuron.threshold_, again.neuron.sign_) == (
        result.neuron.threshold_,
        result.neuron.sign_,
    )
    assert again.summary["one_neuron_acc"] == pytest.approx(1 - s["one_neuron_acc"])


def _byte_data(n: int, seed: int):
    """Synthetic bytes: neuron 5 marks SPACE, neuron 9 marks VB (VBD and VBZ), the rest noise."""
    from nslm.byte_lm.probes.pos import ByteData

    rng = np.random.default_rng(seed)
    tags = np.array(["NN", "SPACE", "VBD", "VBZ", "DT"])[rng.integers(0, 5, n)]
    X = rng.normal(size=(n, 24)).astype(np.float32)
    X[:, 5] += 4.0 * (tags == "SPACE")
    X[:, 9] += 4.0 * np.isin(tags, ["VBD", "VBZ"])
    X[:, 11] += 4.0 * (tags == "DT")
    return ByteData(X, tags, np.zeros(n, dtype=np.int64), [b"x"])


def test_pos_probe_finds_planted_tag_neurons() -> None:
    from nslm.byte_lm.probes.pos import ByteData, group_tag, probe_pos

    train, test = _byte_data(3000, 0), _byte_data(1000, 1)

    def grouped(d: ByteData) -> ByteData:
        return ByteData(d.X, np.array([group_tag(t) for t in d.tags]), d.sentence, d.texts)

    result = probe_pos(grouped(train), grouped(test))
    s = result.summary
    assert set(s["tags"]) == {"NN", "SPACE", "VB", "DT"}  # VBD, VBZ → VB
    assert s["per_tag"]["SPACE"]["neurons"][0] == 5 and s["per_tag"]["VB"]["neurons"][0] == 9
    assert s["space_top3_acc"] > 0.95
    assert s["rows"]["all"]["acc"] > 0.9 and s["rows"]["3"]["acc"] > 0.9
    # weighted recall is accuracy, as in Carvalho's table
    assert s["rows"]["1"]["recall"] == pytest.approx(s["rows"]["1"]["acc"])
    assert s["majority"]["test_acc"] < 0.45


def test_take_bytes_takes_whole_sentences_in_a_seeded_order() -> None:
    from nslm.byte_lm.labelled import Token
    from nslm.byte_lm.probes.pos import take_bytes

    sentences = [TaggedSentence([Token(f"w{i}", [(f"w{i}", "NN")])]) for i in range(100)]
    first = take_bytes(sentences, 50)
    assert first == take_bytes(sentences, 50)
    assert sum(len(s.tokens[0].text) for s in first) >= 50
    assert sum(len(s.tokens[0].text) for s in first[:-1]) < 50
    assert take_bytes(sentences, None) == sentences


def test_texts_are_framed_as_reviews_after_the_cut() -> None:
    from nslm.byte_lm.probes.sentiment import framed

    assert framed(["a good film", "é"]) == [b"\na good film ", b"\n\xc3\xa9 "]
    assert framed(["a good film"], last_bytes=4) == [b"\nfilm "]  # cut first, then framed
    assert framed(["a good film"], last_bytes=4, frame=False) == [b"film"]
    with pytest.raises(NslmError, match="last_bytes"):
        framed(["x"], last_bytes=0)


def test_pos_bytes_are_read_after_the_separator_and_its_row_dropped() -> None:
    from nslm.byte_lm.labelled import Token
    from nslm.byte_lm.probes.pos import byte_dataset

    seen: list[bytes] = []

    def extractor(loaded, texts: list[bytes], batch_size: int) -> list[np.ndarray]:
        seen.extend(texts)
        # state j = the byte read at j, so the rows say which bytes they belong to
        return [np.frombuffer(t, dtype=np.uint8)[:, None].astype(np.float32) for t in texts]

    sentence = TaggedSentence([Token("Hi", [("Hi", "UH")], True), Token("you", [("you", "PRP")])])
    framed = byte_dataset(None, [sentence], extractor=extractor)
    assert seen == [b"\nHi you"]
    assert bytes(framed.X[:, 0].astype(np.uint8)) == b"Hi you"  # no row for the newline
    assert framed.tags.tolist() == ["UH", "UH", "SPACE", "PRP", "PRP", "PRP"]
    raw = byte_dataset(None, [sentence], extractor=extractor, frame=False)
    assert seen[-1] == b"Hi you" and np.array_equal(raw.X, framed.X)
