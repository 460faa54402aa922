"""The cell-state extractor of the byte LM (nslm.byte_lm.probes.states): batched equals one by one,
padding never leaks, per-byte states equal stepping the LSTM one byte at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nslm.byte_lm.probes.states import byte_cell_states, final_states, text_bytes
from nslm.errors import NslmError
from nslm.runs.load import load_run

TEXTS = ["the movie", "great", "", b"\xff\xfe caf\xc3", "a much longer text about the plot " * 3]


@pytest.fixture(scope="module")
def loaded(tiny_byte_run: Path):
    return load_run(tiny_byte_run)


def stepped_cells(loaded, data: bytes) -> np.ndarray:
    """The reference: nn.LSTM run one byte at a time, reading c after each byte."""
    backbone = loaded.model.backbone
    state, rows = None, []
    with torch.no_grad():
        for byte in data:
            x = torch.tensor([[byte]])
            _, state = backbone.lstm(backbone.embed(x), state)
            rows.append(state[1][0, 0].numpy().copy())
    return np.array(rows, dtype=np.float32).reshape(len(data), backbone.out_dim)


def test_text_bytes() -> None:
    assert text_bytes("café") == "café".encode()
    assert text_bytes(b"\xff") == b"\xff"


def test_per_byte_states_equal_stepping_the_lstm(loaded) -> None:
    cells = byte_cell_states(loaded, TEXTS, batch_size=2)
    for text, got in zip(TEXTS, cells, strict=True):
        data = text_bytes(text)
        assert got.shape == (len(data), loaded.model.backbone.out_dim)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, stepped_cells(loaded, data), atol=1e-5)


def test_final_and_mean_states_agree_with_per_byte_states(loaded) -> None:
    states = final_states(loaded, TEXTS, batch_size=3)
    cells = byte_cell_states(loaded, TEXTS)
    for i, c in enumerate(cells):
        if len(c):
            np.testing.assert_allclose(states["final_cell"][i], c[-1], atol=1e-6)
            np.testing.assert_allclose(states["mean_cell"][i], c.mean(0), atol=1e-5)
        else:  # an empty text keeps its zero start state
            assert not states["final_cell"][i].any() and not states["mean_cell"][i].any()
    for key in ("final_cell", "mean_cell", "mean_hidden"):
        assert states[key].shape == (len(TEXTS), 32) and states[key].dtype == np.float32
    both = np.concatenate([states["mean_cell"], states["mean_hidden"]], axis=1)
    np.testing.assert_array_equal(states["mean_cell_hidden"], both)


def test_mean_hidden_is_the_mean_lstm_output(loaded) -> None:
    data = text_bytes(TEXTS[0])
    backbone = loaded.model.backbone
    with torch.no_grad():
        out, _ = backbone.lstm(backbone.embed(torch.tensor(list(data)).unsqueeze(1)))
    got = final_states(loaded, [TEXTS[0]])["mean_hidden"][0]
    np.testing.assert_allclose(got, out[:, 0].mean(0).numpy(), atol=1e-6)


def test_padding_does_not_leak(loaded) -> None:
    """A short text batched with long ones reads exactly what it reads alone."""
    short = "bad plot"
    alone = final_states(loaded, [short])
    batched = final_states(loaded, ["x" * 700, short, "good " * 90], batch_size=3)
    for key, value in alone.items():
        np.testing.assert_allclose(batched[key][1], value[0], atol=1e-6)


def test_last_bytes_reads_only_the_end(loaded) -> None:
    text = "the movie was great, the plot was bad"
    got = final_states(loaded, [text], last_bytes=8)
    want = final_states(loaded, [text.encode()[-8:]])
    for key in got:
        np.testing.assert_allclose(got[key], want[key], atol=1e-6)


@settings(max_examples=15, deadline=None)
@given(
    texts=st.lists(st.binary(min_size=0, max_size=60), min_size=1, max_size=7),
    batch_size=st.integers(1, 8),
)
def test_batched_equals_one_by_one(loaded, texts: list[bytes], batch_size: int) -> None:
    batched = final_states(loaded, texts, batch_size=batch_size)
    for i, text in enumerate(texts):
        one = final_states(loaded, [text])
        for key in one:
            np.testing.assert_allclose(batched[key][i], one[key][0], atol=1e-5)


def test_a_word_run_is_refused_in_one_line(loaded, monkeypatch) -> None:
    monkeypatch.setattr(loaded.corpus.vocab, "itos", ["<unk>", "a"])
    with pytest.raises(NslmError, match="needs a byte-LM run"):
        final_states(loaded, ["text"])
