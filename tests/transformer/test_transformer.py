"""The Transformer backbone: a GGUF llama checkpoint read back exactly (weights, tokenizer),
scored in windows as in one pass; on a tiny random model the tests write themselves."""

from __future__ import annotations

import numpy as np
import pytest
from transformer_helpers import tiny_llama, write_tiny_gguf

from nslm.errors import NslmError

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    model = tiny_llama()
    path = write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", model)
    return model, path


def test_gguf_round_trip_gives_the_same_logits(tiny) -> None:
    from nslm.transformer.backbone import build_model
    from nslm.transformer.checkpoint import load_checkpoint

    model, path = tiny
    loaded = load_checkpoint(path)
    assert loaded.config["num_key_value_heads"] == 2
    assert loaded.config["tie_word_embeddings"] is True
    rebuilt = build_model(loaded)
    ids = torch.tensor([[0, 5, 70, 71, 260, 12, 9, 44]])
    with torch.inference_mode():
        want = model(input_ids=ids).logits
        got = rebuilt(input_ids=ids).logits
    assert torch.allclose(want, got, atol=1e-5)


def test_permute_and_unpermute_are_inverse() -> None:
    from transformer_helpers import llama_permute

    from nslm.transformer.checkpoint import permute, unpermute

    w = np.arange(8 * 16 * 3, dtype=np.float32).reshape(8 * 16, 3)
    assert np.array_equal(permute(w, 8), llama_permute(w, 8))
    assert np.array_equal(unpermute(permute(w, 8), 8), w)
    assert not np.array_equal(permute(w, 8), w)


def test_gguf_tokenizer_splits_digits_and_round_trips(tiny) -> None:
    from nslm.transformer.checkpoint import load_checkpoint

    tok = load_checkpoint(tiny[1]).tokenizer
    text = "the war began in 1914, and ended in Paris."
    enc = tok.encode(text, add_special_tokens=False)
    assert tok.decode(enc.ids) == text
    assert "Ġwar" in enc.tokens and "Ġbegan" in enc.tokens  # the merges apply
    assert enc.tokens[enc.tokens.index("Ġin") + 1 :][:5] == ["Ġ", "1", "9", "1", "4"]
    for (a, b), piece in zip(enc.offsets, enc.tokens, strict=True):
        assert len(text[a:b].encode()) == len(piece) or piece.startswith("Ġ")


def test_windows_score_like_one_pass(tiny) -> None:
    from nslm.transformer.backbone import build_model, full_log_probs, score_ids
    from nslm.transformer.checkpoint import load_checkpoint

    ck = load_checkpoint(tiny[1])
    model = build_model(ck)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, ck.config["vocab_size"], 40)
    one = score_ids(model, ids, ck.start_id, window=64, stride=48, batch=2)
    rows = full_log_probs(model, ids, ck.start_id)
    assert np.allclose(one.log_probs, rows[np.arange(40), ids], atol=1e-5)
    mask = np.zeros(ck.config["vocab_size"], dtype=bool)
    mask[[3, 7, 100]] = True
    small = score_ids(model, ids, ck.start_id, window=8, stride=5, batch=3, token_sets=[mask])
    assert small.hidden.shape == (40, 32)
    # a window of 8 gives each token at least 2 tokens of context, not the whole text
    assert np.allclose(small.log_probs[:7], one.log_probs[:7], atol=1e-5)
    assert np.isfinite(small.log_probs).all()
    want = np.logaddexp.reduce(rows[:40][:, mask], axis=1)
    assert np.allclose(small.set_log_probs[:7, 0], want[:7], atol=1e-4)


def test_scoring_after_a_kept_context_is_one_pass_over_each_whole_text(tiny) -> None:
    """score_after reads the context once and its continuations side by side (of
    different lengths, one of them empty): each one's arrays are those of score_ids over
    the whole text."""
    from nslm.transformer.backbone import build_model, score_after, score_ids
    from nslm.transformer.checkpoint import load_checkpoint

    ck = load_checkpoint(tiny[1])
    model = build_model(ck)
    rng = np.random.default_rng(1)
    context = rng.integers(1, ck.config["vocab_size"], 12).tolist()
    continuations = [[5], [70, 71, 260], [], [9, 44]]
    mask = np.zeros(ck.config["vocab_size"], dtype=bool)
    mask[[3, 7, 100]] = True
    got, kept = score_after(model, context, continuations, ck.start_id, token_sets=[mask])
    assert kept.get_seq_length() == len(context)  # the start token and all but the last
    for continuation, after in zip(continuations, got, strict=True):
        whole = score_ids(model, context + continuation, ck.start_id, token_sets=[mask])
        assert len(after) == len(context) + len(continuation)
        assert np.allclose(after.log_probs, whole.log_probs, atol=1e-5)
        assert np.allclose(after.set_log_probs, whole.set_log_probs, atol=1e-4)
        assert np.allclose(after.hidden, whole.hidden, atol=1e-2)  # float16


def test_a_missing_or_foreign_checkpoint_is_one_line(tmp_path) -> None:
    from nslm.transformer.checkpoint import load_checkpoint

    with pytest.raises(NslmError, match="no such GGUF"):
        load_checkpoint(tmp_path / "missing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    with pytest.raises(NslmError, match="not a readable GGUF"):
        load_checkpoint(bad)
