"""A tiny random llama model with a byte-level BPE, written to GGUF by the tests themselves
(as llama.cpp's converter writes one: its query/key rows permuted, its tokenizer inside)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

WORDS = ("the", "war", "began", "in", "and", "ended", "Paris", "New", "York", "City", "of")


@functools.cache
def byte_chars() -> list[str]:
    """GPT-2's bytes → printable characters (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    bs += list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs, strict=True))
    return [chr(table[b]) for b in range(256)]


def tiny_vocab() -> tuple[list[str], list[str], list[int]]:
    """(tokens, merges, token types): <|endoftext|>, the 256 bytes, then merged words."""
    chars = byte_chars()
    tokens = ["<|endoftext|>", *chars]
    merges: list[str] = []
    have = set(tokens)
    space = chars[ord(" ")]

    def merge(a: str, b: str) -> str:
        if a + b not in have:
            merges.append(f"{a} {b}")
            tokens.append(a + b)
            have.add(a + b)
        return a + b

    for word in WORDS:  # left to right, then the word after a space ("Ġwar")
        pieces = [chars[b] for b in word.encode()]
        while len(pieces) > 1:
            pieces = [merge(pieces[0], pieces[1]), *pieces[2:]]
        merge(space, pieces[0])
    types = [3] + [1] * (len(tokens) - 1)  # CONTROL, then NORMAL
    return tokens, merges, types


def llama_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's LlamaModel.permute, written out independently."""
    return (
        weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
        .swapaxes(1, 2)
        .reshape(weight.shape)
    )


def tiny_llama(seed: int = 0):
    """A random transformers LlamaForCausalLM over the tiny vocabulary, float32, eval."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens, _, _ = tiny_vocab()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokens),
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3)
        for layer in model.model.layers:
            layer.input_layernorm.weight.fill_(1.0)
            layer.post_attention_layernorm.weight.fill_(1.0)
        model.model.norm.weight.fill_(1.0)
    return model.float().eval()


def write_tiny_gguf(path: Path, model=None, pre: str = "smollm") -> Path:
    """``model`` (default :func:`tiny_llama`) as a llama GGUF with the tiny BPE."""
    import gguf

    model = tiny_llama() if model is None else model
    cfg = model.config
    tokens, merges, types = tiny_vocab()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_dimension_count(cfg.head_dim)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    for i in range(cfg.num_hidden_layers):
        for hf, gg in names.items():
            weight = state[f"model.layers.{i}.{hf}"]
            if hf.startswith("self_attn.q_proj"):
                weight = llama_permute(weight, cfg.num_attention_heads)
            elif hf.startswith("self_attn.k_proj"):
                weight = llama_permute(weight, cfg.num_key_value_heads)
            writer.add_tensor(f"blk.{i}.{gg}", np.ascontiguousarray(weight))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
